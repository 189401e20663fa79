package config

import (
	"encoding/json"
	"flowweight/internal/testutil"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// good is a valid configuration: one IPv4 service with two backends.
var good = testutil.Fixture("testdata/web.toml")

// good6 is good with an IPv6 service added.
var good6 = good + testutil.Fixture("testdata/web6-service.toml")

// TestIPv6Service: an IPv6 service loads next to an IPv4 one, addresses canonical.
func TestIPv6Service(t *testing.T) {
	c, err := Parse("t.toml", []byte(good6))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Services[1]
	if got := s.ParsedVIP().String(); got != "fd00:77::100" {
		t.Fatalf("vip %s", got)
	}
	if got := s.Backends[1].ParsedIP().String(); got != "fd00:77::12" {
		t.Fatalf("backend ip %s", got)
	}
	if !c.Services[0].ParsedVIP().Is4() {
		t.Fatalf("the IPv4 service's vip is %v", c.Services[0].ParsedVIP())
	}
}

func TestExampleLoads(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "configs", "controller.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Services) != 1 || len(c.Services[0].Backends) != 3 || c.Services[0].Backends[2].SNMP == nil {
		t.Fatalf("unexpected example content: %+v", c.Services)
	}
}

func TestParseDatapathID(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0000000000000001", 1, true},
		{"0000A2C4F1E3B64D", 0xa2c4f1e3b64d, true},
		{"0x1a", 0x1a, true},
		{"0X1A", 0x1a, true},
		{"0xffffffffffffffff", 0xffffffffffffffff, true},
		{"1a", 0, false},
		{"", 0, false},
		{"0x", 0, false},
		{"0x-1", 0, false},
		{"00:00:00:00:00:00:00:01", 0, false},
		{"0x10000000000000000", 0, false},
	}
	for _, c := range cases {
		got, err := ParseDatapathID(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDatapathID(%q) = %#x, %v; want %#x, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	c, err := Parse("t.toml", []byte(edit(`group_id = 7`, "group_id = 7\ndatapaths = [\"0x2\", \"0000000000000001\"]")))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Services[0].ParsedDatapaths(); len(got) != 2 || got[0] != 2 || got[1] != 1 {
		t.Errorf("placement %v, want [2 1]", got)
	}
	if c, _ := Parse("t.toml", []byte(good)); c.Services[0].ParsedDatapaths() != nil {
		t.Error("no datapaths must place the service everywhere (nil)")
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
func edit(old, new string) string { return testutil.Edit(good, old, new) }

// checkServiceKey parses the good configuration with lines added to its service (after
// group_id) and checks either that it is refused with an error holding every one of wantErr,
// or (wantErr nil) that it parses and key reads want from it.
func checkServiceKey[T comparable](t *testing.T, lines string, wantErr []string, key func(*Config) T, want T) {
	t.Helper()
	c, err := Parse("t.toml", []byte(edit(`group_id = 7`, "group_id = 7\n"+lines)))
	if wantErr == nil {
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if got := key(c); got != want {
			t.Fatalf("got %v, want %v", got, want)
		}
		return
	}
	if err == nil {
		t.Fatalf("Parse accepted %q", lines)
	}
	for _, w := range wantErr {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, toml string
		want       []string // every substring must appear in the error
	}{
		{"unknown key", edit(`port = 80`, "port = 80\nprot = 1"), []string{`t.toml:7: unknown key "service.prot"`}},
		{"unknown table key", "[weighting]\nalpah = 0.3\n" + good, []string{`unknown key "weighting.alpah"`, ":2:"}},
		{"wrong type", edit(`port = 80`, `port = "80"`), []string{"service.port", "incompatible types"}},
		{"coefficients sum", "[weighting.load]\ncpu = 0.5\nmem = 0.3\nconn = 0.1\nnet = 0\n" + good, []string{"weighting: load: coefficients cpu+mem+conn+net sum to 0.9"}},
		{"capacity sum", "[weighting.capacity]\ncpu = 0.9\nmem = 0.3\n" + good, []string{"weighting: capacity: coefficients"}},
		{"alpha zero", "[weighting]\nalpha = 0.0\n" + good, []string{"weighting: alpha: 0 outside (0,1]"}},
		{"warm-up mode", "[weighting]\nwarmup_mode = \"watched\"\n" + good, []string{`weighting: warmup_mode: "watched": want "watch" or "timer"`}},
		{"warm-up mode type", "[weighting]\nwarmup_mode = 1\n" + good, []string{"weighting.warmup_mode", "incompatible types"}},
		{"alpha big", "[weighting]\nalpha = 1.5\n" + good, []string{"weighting: alpha"}},
		{"capacity ratio below 1", "[weighting]\nmax_capacity_ratio = 0.5\n" + good, []string{"weighting: max_capacity_ratio: 0.5 outside [1,1000]"}},
		{"bad vip", edit(`vip = "10.0.0.100"`, `vip = "10.0.0.300"`), []string{`service "web".vip`, `"10.0.0.300" is not an IPv4 address`}},
		{"ipv6 backend in ipv4 service", edit(`ip = "10.0.0.1"`, `ip = "fd00::1"`), []string{`service "web".backend "a".ip`, "fd00::1 is not an IPv4 address like the service's vip 10.0.0.100"}},
		{"ipv4 backend in ipv6 service", strings.Replace(good6, `ip = "fd00:77::12"`, `ip = "10.0.0.2"`, 1), []string{`service "web6".backend "b6".ip`, "10.0.0.2 is not an IPv6 address like the service's vip fd00:77::100"}},
		{"ipv6 link-local vip", strings.Replace(good6, `vip = "fd00:77::100"`, `vip = "fe80::100"`, 1), []string{`service "web6".vip`, "fe80::100 is IPv6 link-local"}},
		{"ipv6 multicast vip", strings.Replace(good6, `vip = "fd00:77::100"`, `vip = "ff02::1"`, 1), []string{`service "web6".vip`, "ff02::1 cannot be a host address"}},
		{"ipv6 unspecified backend", strings.Replace(good6, `ip = "fd00:77::12"`, `ip = "::"`, 1), []string{`service "web6".backend "b6".ip`, ":: cannot be a host address"}},
		{"ipv4-mapped vip", strings.Replace(good6, `vip = "fd00:77::100"`, `vip = "::ffff:10.0.0.100"`, 1), []string{`service "web6".vip`, "IPv4-mapped", "write 10.0.0.100"}},
		{"ipv6 zone", strings.Replace(good6, `ip = "fd00:77::12"`, `ip = "fd00:77::12%eth0"`, 1), []string{`service "web6".backend "b6".ip`, "has a zone"}},
		{"ipv6 duplicate endpoint spelled twice", strings.Replace(good6, `ip = "fd00:77::12"`, `ip = "fd00:77:0::0011"`, 1), []string{`service "web6".backend "b6".ip`, "duplicate backend [fd00:77::11]:8080"}},
		{"duplicate backend name", edit(`name = "b"`, `name = "a"`), []string{`backend "a".name`, "duplicate backend name"}},
		{"duplicate backend endpoint", edit("ip = \"10.0.0.2\"\n  port = 8080", "ip = \"10.0.0.1\"\n  port = 80"), []string{`backend "b".ip`, "duplicate backend 10.0.0.1:80"}},
		{"port out of range", edit(`port = 80`, `port = 70000`), []string{`service "web".port`, "70000 outside 1-65535"}},
		{"backend port zero", edit(`port = 8080`, `port = -1`), []string{`backend "b".port`}},
		{"history of none", "[controller]\nconfig_history = 0\n" + good, []string{"controller.config_history", "0: keep between 1 and 100 versions"}},
		{"history too long", "[controller]\nconfig_history = 101\n" + good, []string{"controller.config_history", "101: keep between 1 and 100"}},
		{"bad duration", "[controller]\nupdate_period = \"5 parsecs\"\n" + good, []string{"controller.update_period", "5 parsecs"}},
		{"negative duration", edit(`key_file = "/k"`, "key_file = \"/k\"\nstale_after = \"-1s\""), []string{"collector.stale_after", "positive"}},
		{"fast health interval short", edit(`key_file = "/k"`, "key_file = \"/k\"\nhealth_fast_interval = \"1ms\""), []string{"collector.health_fast_interval", "below the minimum 10ms"}},
		{"fast health interval integer", edit(`key_file = "/k"`, "key_file = \"/k\"\nhealth_fast_interval = 250"), []string{"collector.health_fast_interval", "below the minimum"}},
		{"fast health interval long", edit(`key_file = "/k"`, "key_file = \"/k\"\npoll_interval = \"1s\"\nhealth_fast_interval = \"2s\""), []string{"collector.health_fast_interval", "longer than poll_interval 1s"}},
		{"bad mode", edit(`group_id = 7`, "group_id = 7\nmode = \"magic\""), []string{`service "web".mode`, `"magic"`}},
		{"bad policy", edit(`group_id = 7`, "group_id = 7\npolicy = \"fastest\""), []string{`service "web".policy`}},
		{"bad shadow policy", edit(`group_id = 7`, "group_id = 7\nshadow_policy = \"fastest\""), []string{`service "web".shadow_policy`, `"fastest" is not one of`}},
		{"shadow policy is the service's policy", edit(`group_id = 7`, "group_id = 7\npolicy = \"static\"\nshadow_policy = \"static\""), []string{`service "web".shadow_policy`, `"static" is the service's live policy`}},
		{"shadow policy is the global policy", "[weighting]\npolicy = \"equal\"\n" + edit(`group_id = 7`, "group_id = 7\nshadow_policy = \"equal\""), []string{`service "web".shadow_policy`, `"equal" is the service's live policy`}},
		{"shadow policy is the default policy", edit(`group_id = 7`, "group_id = 7\nshadow_policy = \"headroom\""), []string{`service "web".shadow_policy`, `"headroom" is the service's live policy`}},
		{"shadow policy wrong type", edit(`group_id = 7`, "group_id = 7\nshadow_policy = 1"), []string{"service.shadow_policy", "incompatible types"}},
		{"vip on backend", edit(`ip = "10.0.0.1"`, `ip = "10.0.0.100"`), []string{`backend "a".ip`, "balances nothing"}},
		{"bad mac", edit(`name = "a"`, "name = \"a\"\n  mac = \"zz:00\""), []string{`backend "a".mac`}},
		{"missing key file", strings.Replace(good, "[collector]\nkey_file = \"/k\"", "", 1), []string{"collector.secret_file", "required", "controller key"}},
		{"api off loopback without token", "[api]\nlisten = \"0.0.0.0:9090\"\n" + good, []string{"api.token_file", "required"}},
		{"open writes with a token", "[api]\ntoken_file = \"/t\"\nallow_unauthenticated_writes = true\n" + good, []string{"api.allow_unauthenticated_writes", "given with api.token_file"}},
		{"open writes off loopback", "[api]\nlisten = \"0.0.0.0:9090\"\nallow_unauthenticated_writes = true\n" + good, []string{"api.allow_unauthenticated_writes", "only on a loopback"}},
		{"snmp without table", edit(`name = "b"`, "name = \"b\"\n  source = \"snmp\"\n  health_url = \"http://10.0.0.2:8080/\""), []string{`backend "b".snmp`, "needs a [snmp] table"}},
		{"snmp bad version", good + "  source = \"snmp\"\n  health_url = \"http://10.0.0.2/\"\n  [service.backend.snmp]\n  version = \"v9\"\n", []string{`backend "b".snmp`}},
		{"snmp negative max_conn_rows", good + "  source = \"snmp\"\n  health_url = \"http://10.0.0.2/\"\n  [service.backend.snmp]\n  version = \"v2c\"\n  community = \"c\"\n  max_conn_rows = -1\n", []string{`backend "b".snmp`, "MaxConnRows -1"}},
		{"group id zero", edit(`group_id = 7`, `group_id = 0`), []string{`service "web".group_id`}},
		{"duplicate service", good + strings.Replace(strings.Replace(strings.Replace(good[strings.Index(good, "[[service]]"):], `"a"`, `"c"`, 1), `"b"`, `"d"`, 1), "10.0.0.100", "10.0.0.101", 1), []string{`service "web".name`, "duplicate service name", `service "web".group_id`}},
		{"tls cert without key", "[controller]\ntls_cert = \"/c.crt\"\n" + good, []string{"controller.tls_cert", "together"}},
		{"tls ca without cert", "[controller]\ntls_ca = \"/ca.crt\"\n" + good, []string{"controller.tls_ca", "needs TLS"}},
		{"tls names dpid without ca", "[controller]\ntls_names_dpid = true\n" + good, []string{"controller.tls_names_dpid", "tls_ca"}},
		{"tls on a unix socket", "[controller]\nlisten = \"unix:/run/of.sock\"\ntls_cert = \"/c\"\ntls_key = \"/k\"\n" + good, []string{"controller.tls_cert", "unix socket"}},
		{"datapath id short without 0x", edit(`group_id = 7`, "group_id = 7\ndatapaths = [\"1a\"]"), []string{`service "web".datapaths[0]`, "16 hex digits"}},
		{"datapath id not hex", edit(`group_id = 7`, "group_id = 7\ndatapaths = [\"0x1\", \"0xzz\"]"), []string{`service "web".datapaths[1]`, `"0xzz" is not a datapath id`}},
		{"datapath id too long", edit(`group_id = 7`, "group_id = 7\ndatapaths = [\"0x10000000000000000\"]"), []string{`service "web".datapaths[0]`, "longer than"}},
		{"datapath id repeated", edit(`group_id = 7`, "group_id = 7\ndatapaths = [\"0x1a\", \"000000000000001A\"]"), []string{`service "web".datapaths[1]`, "is datapaths[0] again"}},
		{"datapaths not a list", edit(`group_id = 7`, "group_id = 7\ndatapaths = \"0x1\""), []string{"service.datapaths", "incompatible types"}},
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

func TestAPILimitsNameTheKey(t *testing.T) {
	for _, c := range []struct{ name, api, want string }{
		{"read timeout zero", `read_timeout = "0s"`, "api.read_timeout: 0s is below the minimum 100ms"},
		{"write timeout huge", `write_timeout = "2h"`, "api.write_timeout: 2h0m0s is above the maximum 1h0m0s"},
		{"idle timeout negative", `idle_timeout = "-1s"`, "api.idle_timeout"},
		{"header bytes small", `max_header_bytes = 100`, "api.max_header_bytes: 100 outside [1024,1048576]"},
		{"body bytes negative", `max_body_bytes = -1`, "api.max_body_bytes: -1 outside"},
		{"body bytes huge", `max_body_bytes = 10485760`, "api.max_body_bytes"},
		{"no connections", `max_connections = 0`, "api.max_connections: 0 outside [1,10000]"},
		{"wildcard host", `allowed_hosts = ["fw.example.net", "*.example.net"]`, `api.allowed_hosts[1]: "*.example.net": not a DNS name`},
		{"host with scheme", `allowed_hosts = ["http://fw.example.net"]`, `api.allowed_hosts[0]`},
		{"host bad port", `allowed_hosts = ["fw.example.net:99999"]`, `api.allowed_hosts[0]: "fw.example.net:99999": port`},
		{"bare ipv6", `allowed_hosts = ["::1"]`, "brackets"},
		{"empty entry", `allowed_hosts = ["", "ok.example"]`, `api.allowed_hosts[0]: "": empty`},
		{"not a list", `allowed_hosts = "fw.example.net"`, "allowed_hosts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte("[api]\n"+c.api+"\n"+good))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	c, err := Parse("t.toml", []byte("[api]\nallowed_hosts = [\"fw.example.net\", \"Fw2.Example.NET:8443\", \"[::1]:9090\", \"192.0.2.7\"]\nmax_body_bytes = 0\n"+good))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.API; a.ReadTimeout != 10*time.Second || a.WriteTimeout != 10*time.Second || a.IdleTimeout != 30*time.Second ||
		a.MaxHeaderBytes != 32<<10 || a.MaxBodyBytes != 0 || a.MaxConnections != 64 || len(a.AllowedHosts) != 4 {
		t.Fatalf("api defaults: %+v", a)
	}
}

// writeToken writes a token file with mode and returns a config that uses it.
func writeToken(t *testing.T, content string, mode os.FileMode) (cfgPath, tokenPath string) {
	t.Helper()
	dir := t.TempDir()
	tokenPath = filepath.Join(dir, "api.token")
	if err := os.WriteFile(tokenPath, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokenPath, mode); err != nil {
		t.Fatal(err)
	}
	cfgPath = filepath.Join(dir, "controller.toml")
	text := fmt.Sprintf("[api]\nlisten = \"0.0.0.0:9090\"\ntoken_file = %q\n", tokenPath) + good
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, tokenPath
}

// TestTokenFile: Load (and so -check-config and every reload) refuses a token file that
// would weaken authentication, naming api.token_file and the path.
func TestTokenFile(t *testing.T) {
	tok := "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name, content string
		mode          os.FileMode
		want          string // "" = accepted
		token         string
	}{
		{"good", tok + "\n", 0o600, "", tok},
		{"surrounding white space trimmed", "  \t" + tok + " \r\n\n", 0o400, "", tok},
		{"group readable like the push key", tok, 0o640, "", tok},
		{"exactly the minimum", tok[:MinTokenLen], 0o600, "", tok[:MinTokenLen]},
		{"empty", "", 0o600, "holds no token", ""},
		{"whitespace only", " \n\t\r\n  ", 0o600, "holds no token", ""},
		{"short", "fifteen-bytes!!\n", 0o600, "token is 15 bytes, want at least 16", ""},
		{"world readable", tok, 0o644, "readable by others (mode 0644)", ""},
		{"group writable", tok, 0o660, "writable by group or others", ""},
		{"inner space", "0123456789 abcdef0123456789", 0o600, "byte 0x20 at offset 10", ""},
		{"control byte", tok + "\x00", 0o600, "byte 0x00", ""},
		{"non ascii", tok + "é", 0o600, "byte 0xc3", ""},
		{"too large", strings.Repeat("a", 5000), 0o600, "larger than 4096 bytes", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfgPath, tokenPath := writeToken(t, c.content, c.mode)
			cfg, err := Load(cfgPath)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.API.Token.Reveal() != c.token {
					t.Fatalf("token %q, want %q", cfg.API.Token.Reveal(), c.token)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted token file %q mode %04o", c.content, c.mode)
			}
			for _, w := range []string{"api.token_file: ", tokenPath, c.want} {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		cfgPath, tokenPath := writeToken(t, tok, 0o600)
		os.Remove(tokenPath)
		_, err := Load(cfgPath)
		if err == nil || !strings.Contains(err.Error(), "api.token_file: ") || !strings.Contains(err.Error(), "no such file") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("reported with the other problems", func(t *testing.T) {
		cfgPath, _ := writeToken(t, "short", 0o600)
		data, _ := os.ReadFile(cfgPath)
		os.WriteFile(cfgPath, []byte(strings.Replace(string(data), "port = 80", "port = 0", 1)), 0o600)
		_, err := Load(cfgPath)
		if err == nil || !strings.Contains(err.Error(), "api.token_file") || !strings.Contains(err.Error(), `service "web".port`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("Parse does not read it", func(t *testing.T) {
		cfg, err := Parse("t.toml", []byte("[api]\ntoken_file = \"/nonexistent/api.token\"\n"+good))
		if err != nil || cfg.API.Token != "" {
			t.Fatalf("Parse: %v, token %q", err, cfg.API.Token.Reveal())
		}
	})
}

// TestSecretNeverPrinted: a Config dumped with fmt or JSON does not show the token.
func TestSecretNeverPrinted(t *testing.T) {
	c := Default()
	c.API.Token = "0123456789abcdef-very-secret"
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(c.API.Token), string(b)} {
		if strings.Contains(s, "very-secret") {
			t.Fatalf("token printed: %s", s)
		}
	}
}

// TestExampleShowsAPIDefaults: the example file says its values are the defaults; for the
// API limits it must be so.
func TestExampleShowsAPIDefaults(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "configs", "controller.toml"))
	if err != nil {
		t.Fatal(err)
	}
	got, want := c.API, Default().API
	got.AllowedHosts, want.AllowedHosts = nil, nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("example [api] %+v, defaults %+v", got, want)
	}
}

// FuzzParseToken: an accepted token is long enough and can travel in a header as is.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"0123456789abcdef\n", " \n", "", "0123456789abcdef 0", "\x000123456789abcdef", "\u00a00123456789abcdef\u00a0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := parseToken("f", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		s := tok.Reveal()
		if len(s) < MinTokenLen || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			t.Fatalf("token %q accepted", s)
		}
	})
}

// TestShadowPolicyAccepted: every policy other than the live one is a valid shadow, and the
// file keeps it as written.
func TestShadowPolicyAccepted(t *testing.T) {
	for _, c := range []struct{ live, shadow string }{
		{"", "equal"}, {"static", "equal"}, {"equal", "headroom"}, {"dynamic", "least_conn"}, {"headroom", "dynamic"}, {"least_conn", "static"},
	} {
		t.Run(c.live+"/"+c.shadow, func(t *testing.T) {
			add := "group_id = 7\nshadow_policy = \"" + c.shadow + "\""
			if c.live != "" {
				add += "\npolicy = \"" + c.live + "\""
			}
			cfg, err := Parse("t.toml", []byte(edit(`group_id = 7`, add)))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(cfg.Services[0].ShadowPolicy); got != c.shadow {
				t.Fatalf("shadow_policy = %q, want %q", got, c.shadow)
			}
		})
	}
}
