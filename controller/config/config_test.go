package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const good = `
[collector]
key_file = "/k"
[[service]]
name = "web"
vip = "10.0.0.100"
port = 80
group_id = 7
  [[service.backend]]
  name = "a"
  ip = "10.0.0.1"
  [[service.backend]]
  name = "b"
  ip = "10.0.0.2"
  port = 8080
`

func TestExampleLoads(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "configs", "controller.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Services) != 1 || len(c.Services[0].Backends) != 3 || c.Services[0].Backends[2].SNMP == nil {
		t.Fatalf("unexpected example content: %+v", c.Services)
	}
}

func TestDefaultsFilled(t *testing.T) {
	c, err := Parse("t.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Services[0]
	if s.Mode != "conntrack" || s.Protocol != "tcp" || s.Zone != 7 {
		t.Fatalf("service defaults: %+v", s)
	}
	if s.Backends[0].Port != 80 || s.Backends[1].Port != 8080 || s.Backends[0].Source != "probe" || s.Backends[0].Capacity != 1 {
		t.Fatalf("backend defaults: %+v", s.Backends)
	}
	if c.Controller.Listen != ":6653" || c.Collector.FailThreshold != 3 || c.Weighting.Alpha != 0.3 {
		t.Fatalf("global defaults not applied: %+v", c)
	}
}

// edit replaces the first occurrence of old in the good config.
func edit(old, new string) string {
	if !strings.Contains(good, old) {
		panic("test bug: " + old)
	}
	return strings.Replace(good, old, new, 1)
}

func TestErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, toml string
		want       []string // every substring must appear in the error
	}{
		{"unknown key", edit(`port = 80`, "port = 80\nprot = 1"), []string{`t.toml:8: unknown key "service.prot"`}},
		{"unknown table key", "[weighting]\nalpah = 0.3\n" + good, []string{`unknown key "weighting.alpah"`, ":2:"}},
		{"wrong type", edit(`port = 80`, `port = "80"`), []string{"service.port", "incompatible types"}},
		{"coefficients sum", "[weighting.load]\ncpu = 0.5\nmem = 0.3\nconn = 0.1\nnet = 0\n" + good, []string{"weighting: load: coefficients cpu+mem+conn+net sum to 0.9"}},
		{"capacity sum", "[weighting.capacity]\ncpu = 0.9\nmem = 0.3\n" + good, []string{"weighting: capacity: coefficients"}},
		{"alpha zero", "[weighting]\nalpha = 0.0\n" + good, []string{"weighting: alpha: 0 outside (0,1]"}},
		{"alpha big", "[weighting]\nalpha = 1.5\n" + good, []string{"weighting: alpha"}},
		{"bad vip", edit(`vip = "10.0.0.100"`, `vip = "10.0.0.300"`), []string{`service "web".vip`, `"10.0.0.300" is not an IPv4 address`}},
		{"ipv6 backend", edit(`ip = "10.0.0.1"`, `ip = "::1"`), []string{`service "web".backend "a".ip`, "not an IPv4"}},
		{"duplicate backend name", edit(`name = "b"`, `name = "a"`), []string{`backend "a".name`, "duplicate backend name"}},
		{"duplicate backend endpoint", edit("ip = \"10.0.0.2\"\n  port = 8080", "ip = \"10.0.0.1\"\n  port = 80"), []string{`backend "b".ip`, "duplicate backend 10.0.0.1:80"}},
		{"port out of range", edit(`port = 80`, `port = 70000`), []string{`service "web".port`, "70000 outside 1-65535"}},
		{"backend port zero", edit(`port = 8080`, `port = -1`), []string{`backend "b".port`}},
		{"bad duration", "[controller]\nupdate_period = \"5 parsecs\"\n" + good, []string{"controller.update_period", "5 parsecs"}},
		{"negative duration", edit(`key_file = "/k"`, "key_file = \"/k\"\nstale_after = \"-1s\""), []string{"collector.stale_after", "positive"}},
		{"bad mode", edit(`group_id = 7`, "group_id = 7\nmode = \"magic\""), []string{`service "web".mode`, `"magic"`}},
		{"bad policy", edit(`group_id = 7`, "group_id = 7\npolicy = \"fastest\""), []string{`service "web".policy`}},
		{"vip on backend", edit(`ip = "10.0.0.1"`, `ip = "10.0.0.100"`), []string{`backend "a".ip`, "balances nothing"}},
		{"bad mac", edit(`name = "a"`, "name = \"a\"\n  mac = \"zz:00\""), []string{`backend "a".mac`}},
		{"missing key file", strings.Replace(good, "[collector]\nkey_file = \"/k\"", "", 1), []string{"collector.key_file", "required"}},
		{"api off loopback without token", "[api]\nlisten = \"0.0.0.0:9090\"\n" + good, []string{"api.token_file", "required"}},
		{"snmp without table", edit(`name = "b"`, "name = \"b\"\n  source = \"snmp\"\n  health_url = \"http://10.0.0.2:8080/\""), []string{`backend "b".snmp`, "needs a [snmp] table"}},
		{"snmp bad version", good + "  source = \"snmp\"\n  health_url = \"http://10.0.0.2/\"\n  [service.backend.snmp]\n  version = \"v9\"\n", []string{`backend "b".snmp`}},
		{"group id zero", edit(`group_id = 7`, `group_id = 0`), []string{`service "web".group_id`}},
		{"duplicate service", good + strings.Replace(strings.Replace(strings.Replace(good[strings.Index(good, "[[service]]"):], `"a"`, `"c"`, 1), `"b"`, `"d"`, 1), "10.0.0.100", "10.0.0.101", 1), []string{`service "web".name`, "duplicate service name", `service "web".group_id`}},
		{"tls cert without key", "[controller]\ntls_cert = \"/c.crt\"\n" + good, []string{"controller.tls_cert", "together"}},
		{"tls ca without cert", "[controller]\ntls_ca = \"/ca.crt\"\n" + good, []string{"controller.tls_ca", "needs TLS"}},
		{"tls names dpid without ca", "[controller]\ntls_names_dpid = true\n" + good, []string{"controller.tls_names_dpid", "tls_ca"}},
		{"tls on a unix socket", "[controller]\nlisten = \"unix:/run/of.sock\"\ntls_cert = \"/c\"\ntls_key = \"/k\"\n" + good, []string{"controller.tls_cert", "unix socket"}},
		{"syntax error", good + "\n[[service]\n", []string{"t.toml:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(c.toml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	bad := edit(`port = 80`, `port = 0`)
	bad = strings.Replace(bad, `ip = "10.0.0.2"`, `ip = "x"`, 1)
	_, err := Parse("t.toml", []byte("[weighting]\ngain = 3.0\n"+bad))
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"weighting: gain", `service "web".port`, `backend "b".ip`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%v", w, err)
		}
	}
}

func TestEveryExampleConfigLoads(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "configs", "*.toml"))
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "[[service]]") {
			continue // another component's file (probe.toml)
		}
		n++
		if _, err := Parse(f, data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if n == 0 {
		t.Fatal("no controller example found in configs/")
	}
}
