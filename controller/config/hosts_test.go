package config

import (
	"flowweight/internal/testutil"
	"slices"
	"strings"
	"testing"
)

// hostsGood is the configuration: one VIP, HTTP on 80 and 443 and DNS over UDP on 53,
// on the same three hosts, one probe each.
var hostsGood = testutil.Fixture("testdata/hosts.toml")

func hostsEdit(old, new string) string { return testutil.Edit(hostsGood, old, new) }

func TestHostsResolve(t *testing.T) {
	c, err := Parse("t.toml", []byte(hostsGood))
	if err != nil {
		t.Fatal(err)
	}
	type be struct {
		name, ip string
		port     int
		capacity float64
	}
	want := map[string][]be{
		"web": {{"fws1", "10.0.0.1", 8080, 2}, {"fws2", "10.0.0.2", 80, 1}, {"fws3", "10.0.0.3", 80, 0.5}},
		// backends_from: the list, each on this service's port, with the capacities given there.
		"tls": {{"fws1", "10.0.0.1", 443, 2}, {"fws2", "10.0.0.2", 443, 1}, {"fws3", "10.0.0.3", 443, 0.5}},
		"dns": {{"fws1", "10.0.0.1", 53, 2}, {"fws2", "10.0.0.2", 53, 1}, {"fws3", "10.0.0.3", 53, 0.5}},
	}
	for _, s := range c.Services {
		var got []be
		for _, b := range s.Backends {
			if b.Source != "probe" || b.Host != b.Name {
				t.Errorf("service %q backend %q: source %q host %q", s.Name, b.Name, b.Source, b.Host)
			}
			got = append(got, be{b.Name, b.IP, b.Port, b.Capacity})
		}
		if !slices.Equal(got, want[s.Name]) {
			t.Errorf("service %q backends %+v, want %+v", s.Name, got, want[s.Name])
		}
	}
	if c.Services[2].Protocol != "udp" || c.Services[2].Zone != 3 {
		t.Errorf("dns: %+v", c.Services[2])
	}
	ports := c.HostPorts()
	if !slices.Equal(ports["fws1"], []uint16{8080, 443}) || !slices.Equal(ports["fws2"], []uint16{80, 443}) {
		t.Errorf("HostPorts (tcp only, once each) = %v", ports)
	}
	if w := c.Warnings(); len(w) != 1 || !strings.Contains(w[0], "the 3 probe backend(s) fws1, fws2, fws3") {
		t.Errorf("warnings name each host once: %q", w)
	}
	unused, err := Parse("t.toml", []byte(hostsGood+"[[host]]\nname = \"fws4\"\nip = \"10.0.0.4\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := unused.Warnings(); len(w) != 2 || !strings.Contains(w[1], `host "fws4": declared but no service lists it`) {
		t.Errorf("an unused host is not warned about: %q", w)
	}
}

// TestInlineFormUnchanged: a file of inline backends parses to what it always did.
func TestInlineFormUnchanged(t *testing.T) {
	c, err := Parse("t.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Hosts) != 0 || c.Services[0].Backends[0].Host != "" || c.Services[0].Backends[1].Port != 8080 {
		t.Fatalf("inline form changed: %+v", c.Services[0].Backends)
	}
}

func TestHostErrorsNameTheKey(t *testing.T) {
	second := `
[[service]]
name = "echo"
vip = "10.0.0.100"
port = 9000
group_id = 8
  [[service.backend]]
  name = "a"
  ip = "10.0.0.1"
`
	cases := []struct {
		name, toml string
		want       []string
	}{
		// The file: the error says how to rewrite it.
		{"inline name in two services", good + second, []string{`service "echo".backend "a".name`, `duplicate backend name (also in service "web")`,
			`[[host]] with name = "a", ip = "10.0.0.1"`, `host = "a"`, "-check-config"}},
		{"unknown host", hostsEdit(`host = "fws2"`, `host = "fws9"`), []string{`service "web".backend[1].host`, `no [[host]] named "fws9"`}},
		{"host field repeated", hostsEdit("host = \"fws2\"\n", "host = \"fws2\"\n  ip = \"10.0.0.9\"\n  source = \"probe\"\n"),
			[]string{`service "web".backend "fws2".ip: given on a backend that references host "fws2"`, `service "web".backend "fws2".source`}},
		{"name on a reference", hostsEdit("host = \"fws2\"\n", "host = \"fws2\"\n  name = \"x\"\n"), []string{`service "web".backend "fws2".name: given on a backend that references host`}},
		{"host twice in a service", hostsEdit(`host = "fws3"`, `host = "fws1"`), []string{`service "web".backend "fws1"`, "is backend[0] of this service too"}},
		{"inline backend named like a host", hostsEdit("host = \"fws3\"\n  capacity = 0.5\n", "name = \"fws3\"\n  ip = \"10.0.0.3\"\n"),
			[]string{`service "web".backend "fws3".name`, `is a [[host]]: list it with host = "fws3"`}},
		{"duplicate host", hostsEdit(`name = "fws2"`, `name = "fws1"`), []string{`host "fws1".name: duplicate host name`}},
		{"host with a port", hostsEdit(`ip = "10.0.0.2"`, "ip = \"10.0.0.2\"\nport = 80"), []string{`host "fws2".port`, "no port of its own"}},
		{"host bad ip", hostsEdit(`ip = "10.0.0.2"`, `ip = "10.0.0.300"`), []string{`host "fws2".ip`, "not an IPv4"}},
		{"host bad source", hostsEdit(`ip = "10.0.0.2"`, "ip = \"10.0.0.2\"\nsource = \"magic\""), []string{`host "fws2".source`}},
		{"host bad capacity", hostsEdit(`capacity = 2`, `capacity = -2`), []string{`host "fws1".capacity`}},
		{"vip port protocol collision", hostsEdit(`port = 443`, `port = 80`), []string{`service "tls".port: 10.0.0.100 tcp port 80 is also service "web"'s`}},
		{"udp and tcp on one port are two services", hostsEdit("protocol = \"udp\"\nport = 53", "protocol = \"udp\"\nport = 80"), nil},
		{"udp collision", hostsEdit(`name = "tls"`, "name = \"tls\"\nprotocol = \"udp\"") + strings.Replace(second, "port = 9000", "port = 443\nprotocol = \"udp\"", 1),
			[]string{`service "echo".port: 10.0.0.100 udp port 443 is also service "tls"'s`}},
		{"group collision", hostsEdit(`group_id = 3`, `group_id = 2`), []string{`service "dns".group_id: 2 already used by service "tls"`}},
		{"bad protocol", hostsEdit(`protocol = "udp"`, `protocol = "sctp"`), []string{`service "dns".protocol: "sctp" is not one of tcp, udp`}},
		{"backends_from unknown", hostsEdit(`backends_from = "web"`, `backends_from = "www"`), []string{`service "tls".backends_from: no service named "www"`}},
		{"backends_from chain", hostsEdit("group_id = 3\nbackends_from = \"web\"", "group_id = 3\nbackends_from = \"tls\""), []string{`service "dns".backends_from: service "tls" takes its backends from service "web"`}},
		{"backends_from and backends", hostsGood + "  [[service.backend]]\n  host = \"fws1\"\n", []string{`service "dns".backends_from: given together with [[service.backend]]`}},
		{"two VIPs on one host port, zones differ", good + strings.Replace(strings.Replace(strings.Replace(second, "port = 9000", "port = 80", 1), "vip = \"10.0.0.100\"", "vip = \"10.0.0.101\"", 1), `name = "a"`, `name = "c"`, 1),
			[]string{`service "echo".backend "c".port: 10.0.0.1 tcp port 80 is also a backend of service "web" (there mode conntrack, zone 7; here mode conntrack, zone 8)`, "zone = 7 in both"}},
		{"two VIPs on one host port, one zone", good + strings.Replace(strings.Replace(strings.Replace(second, "port = 9000", "port = 80\nzone = 7", 1), "vip = \"10.0.0.100\"", "vip = \"10.0.0.101\"", 1), `name = "a"`, `name = "c"`, 1), nil},
		{"two VIPs on one host port, stateless", good + strings.Replace(strings.Replace(strings.Replace(second, "port = 9000", "port = 80\nzone = 7\nmode = \"stateless\"", 1), "vip = \"10.0.0.100\"", "vip = \"10.0.0.101\"", 1), `name = "a"`, `name = "c"`, 1),
			[]string{`service "echo".backend "c".port`, "here mode stateless, zone 7"}},
		{"udp with an http-checked snmp host", hostsEdit("name = \"fws2\"\nip = \"10.0.0.2\"\n", "name = \"fws2\"\nip = \"10.0.0.2\"\nsource = \"snmp\"\nhealth_url = \"http://10.0.0.2/\"\n[host.snmp]\nversion = \"v2c\"\ncommunity = \"c\"\n"),
			[]string{`service "dns".backend "fws2" (from host "fws2").health_url`, `an HTTP check over TCP, but the service's protocol is "udp"`}},
		{"udp with an inline http-checked snmp backend", good + strings.Replace(second, "port = 9000", "port = 53\nprotocol = \"udp\"", 1) +
			"  source = \"snmp\"\n  health_url = \"http://10.0.0.1/\"\n  [service.backend.snmp]\n  version = \"v2c\"\n  community = \"c\"\n",
			[]string{`service "echo".backend "a".health_url`, `an HTTP check over TCP, but the service's protocol is "udp"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(tc.toml))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}
