package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// minimal is the smallest valid file; cases append lines to it.
const minimal = `
backend_id = "web1"
collector = "127.0.0.1:7946"
key_file = "/etc/flowweight/probe.key"
`

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "probe.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadExample(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "configs", "probe.toml"))
	if err != nil {
		t.Fatalf("configs/probe.toml: %v", err)
	}
	if c.BackendID != "web1" || c.Interval != 5*time.Second || len(c.ServicePorts) != 2 {
		t.Errorf("example decoded to %+v", c)
	}
}

// The commented collectors line of the example is valid in place of its collector line.
func TestExampleCollectors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "configs", "probe.toml"))
	if err != nil {
		t.Fatal(err)
	}
	body, n := regexp.MustCompile(`(?m)^collector = .*$`).ReplaceAllString(string(b), ""), 0
	body = regexp.MustCompile(`(?m)^# (collectors = .*)$`).ReplaceAllStringFunc(body, func(s string) string {
		n++
		return strings.TrimPrefix(s, "# ")
	})
	if n != 1 {
		t.Fatalf("%d commented collectors lines in the example, want 1", n)
	}
	c, err := Load(write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CollectorAddrs(); len(got) != 2 || c.Collector != "" {
		t.Errorf("collectors %q, collector %q", got, c.Collector)
	}
}

func TestDefaultsApplied(t *testing.T) {
	c, err := Load(write(t, minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.BackendID, want.Collector = "web1", "127.0.0.1:7946"
	if c.Interval != want.Interval || c.Jitter != want.Jitter || c.Scope != want.Scope ||
		c.Health.Timeout != want.Health.Timeout || c.Health.ExpectStatus != want.Health.ExpectStatus ||
		c.Health.FastInterval != 100*time.Millisecond || c.Health.FastRise != 3 || c.ConnsInterval != 5*time.Second ||
		c.DrainFile != want.DrainFile || c.LogLevel != want.LogLevel || !reflect.DeepEqual(c.AgentCheck, want.AgentCheck) {
		t.Errorf("got %+v, want defaults %+v", c, want)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		key   string // the message must name this key
		extra string // and contain this text
	}{
		{"unknown key", minimal + "intervall = \"5s\"\n", "intervall", "unknown key"},
		{"unknown key in table", minimal + "[health]\nurll = \"http://x\"\n", "health.urll", "unknown key"},
		{"wrong type", minimal + "jitter = \"a\"\n", "jitter", "incompatible"},
		{"wrong type list", minimal + "service_ports = 80\n", "service_ports", "incompatible"},
		{"bad duration", minimal + "interval = \"5 parsecs\"\n", "interval", "duration"},
		{"integer duration", minimal + "interval = 5\n", "interval", "minimum"},
		{"interval too long", minimal + "interval = \"2h\"\n", "interval", "maximum"},
		{"conns interval short", minimal + "conns_interval = \"50ms\"\n", "conns_interval", `want "0s" (count for every report) or at least 100ms`},
		{"conns interval negative", minimal + "conns_interval = \"-1s\"\n", "conns_interval", "at least 100ms"},
		{"conns interval integer", minimal + "conns_interval = 5\n", "conns_interval", "at least 100ms"},
		{"conns interval long", minimal + "conns_interval = \"2h\"\n", "conns_interval", "above the maximum 1h0m0s"},
		{"collector missing", "backend_id = \"a\"\n", "collector", "required"},
		{"collector missing names collectors", "backend_id = \"a\"\n", "collector", "or collectors"},
		{"collector no port", strings.Replace(minimal, "127.0.0.1:7946", "127.0.0.1", 1), "collector", "host:port"},
		{"collector no host", strings.Replace(minimal, "127.0.0.1:7946", ":7946", 1), "collector", "no host"},
		{"collector port range", strings.Replace(minimal, "127.0.0.1:7946", "127.0.0.1:70000", 1), "collector", "outside"},
		{"collector port name", strings.Replace(minimal, "127.0.0.1:7946", "127.0.0.1:http", 1), "collector", "not a number"},
		{"key file empty", strings.Replace(minimal, "/etc/flowweight/probe.key", "", 1), "key_file", "required"},
		{"jitter negative", minimal + "jitter = -0.1\n", "jitter", "outside"},
		{"jitter large", minimal + "jitter = 0.6\n", "jitter", "outside"},
		{"scope unknown", minimal + "scope = \"vm\"\n", "scope", "vm"},
		{"cgroup without path", minimal + "scope = \"cgroup\"\n", "cgroup_path", "required"},
		{"port zero", minimal + "service_ports = [0]\n", "service_ports[0]", "outside"},
		{"port high", minimal + "service_ports = [80, 65536]\n", "service_ports[1]", "outside"},
		{"port twice", minimal + "service_ports = [80, 80]\n", "service_ports[1]", "twice"},
		{"nic path", minimal + "nic = \"../eth0\"\n", "nic", "interface"},
		{"nic speed", minimal + "nic_speed_mbps = -1\n", "nic_speed_mbps", "negative"},
		{"health url scheme", minimal + "[health]\nurl = \"ftp://x/\"\n", "health.url", "scheme"},
		{"health url host", minimal + "[health]\nurl = \"http:///x\"\n", "health.url", "no host"},
		{"health timeout bad", minimal + "[health]\ntimeout = \"zz\"\n", "health.timeout", "duration"},
		{"health timeout long", minimal + "interval = \"1s\"\n[health]\nurl = \"http://127.0.0.1:8080/\"\ntimeout = \"2s\"\n", "health.timeout", "longer than interval"},
		{"status reversed", minimal + "[health]\nexpect_status = \"399-200\"\n", "health.expect_status", "reversed"},
		{"status range", minimal + "[health]\nexpect_status = \"200-700\"\n", "health.expect_status", "outside"},
		{"status junk", minimal + "[health]\nexpect_status = \"ok\"\n", "health.expect_status", "not a status"},
		{"fast interval short", minimal + "[health]\nfast_interval = \"5ms\"\n", "health.fast_interval", "below the minimum 10ms"},
		{"fast interval integer", minimal + "[health]\nfast_interval = 100\n", "health.fast_interval", "below the minimum"},
		{"fast interval long", minimal + "interval = \"1s\"\n[health]\nfast_interval = \"1.5s\"\n", "health.fast_interval", "longer than interval 1s"},
		{"fast rise zero", minimal + "[health]\nfast_rise = 0\n", "health.fast_rise", "outside 1-100"},
		{"fast rise large", minimal + "[health]\nfast_rise = 101\n", "health.fast_rise", "outside 1-100"},
		{"status empty", minimal + "[health]\nexpect_status = \"\"\n", "health.expect_status", "empty"},
		{"drain relative", minimal + "drain_file = \"drain\"\n", "drain_file", "absolute"},
		{"log level", minimal + "log_level = \"loud\"\n", "log_level", "loud"},
		{"backend id charset", strings.Replace(minimal, "web1", "web 1", 1), "backend_id", "only letters"},
		{"agent listen no port", minimal + "[agent_check]\nlisten = \"127.0.0.1\"\n", "agent_check.listen", "host:port"},
		{"agent listen port range", minimal + "[agent_check]\nlisten = \":0\"\n", "agent_check.listen", "outside"},
		{"agent listen port name", minimal + "[agent_check]\nlisten = \":agent\"\n", "agent_check.listen", "not a number"},
		{"agent coefficient range", minimal + "[agent_check]\ncpu = 1.5\nmem = -0.5\n", "agent_check.cpu", "outside [0,1]"},
		{"agent coefficient negative", minimal + "[agent_check]\ncpu = 1.5\nmem = -0.5\n", "agent_check.mem", "outside [0,1]"},
		{"agent coefficients sum", minimal + "[agent_check]\ncpu = 0.5\nmem = 0.3\n", "agent_check", "sum to 0.8, want 1"},
		{"agent conn without max", minimal + "service_ports = [80]\n[agent_check]\ncpu = 0.5\nconn = 0.5\nmem = 0.0\n", "agent_check.max_conns", "required"},
		{"agent conn without ports", minimal + "[agent_check]\ncpu = 0.5\nmem = 0.0\nconn = 0.5\nmax_conns = 10\n", "agent_check.conn", "service_ports is empty"},
		{"agent max conns negative", minimal + "[agent_check]\nmax_conns = -1\n", "agent_check.max_conns", "negative"},
		{"agent floor", minimal + "[agent_check]\nfloor_percent = 101\n", "agent_check.floor_percent", "outside 0-100"},
		{"agent unknown key", minimal + "[agent_check]\nport = 8081\n", "agent_check.port", "unknown key"},
		{"agent checker name", minimal + "[agent_check]\ncheckers = [\"10.0.0.5\", \"haproxy\"]\n", "agent_check.checkers", `[1] "haproxy": want an IP address or prefix`},
		{"agent checker host bits", minimal + "[agent_check]\ncheckers = [\"10.0.0.5/24\"]\n", "agent_check.checkers", "host bits"},
		{"backend id long", strings.Replace(minimal, "web1", strings.Repeat("x", 65), 1), "backend_id", "65 bytes"},
		{"service two keys", minimal + "[service]\npidfile = \"/run/web.pid\"\nunit = \"web\"\n", "service", "pidfile and unit are all set"},
		{"service three keys", minimal + "[service]\npidfile = \"/run/web.pid\"\nunit = \"web\"\ncgroup = \"web\"\n", "service", "pidfile and unit and cgroup"},
		{"service pidfile relative", minimal + "[service]\npidfile = \"web.pid\"\n", "service.pidfile", "absolute"},
		{"service unit slash", minimal + "[service]\nunit = \"system.slice/web.service\"\n", "service.unit", "only letters"},
		{"service unit dotted without suffix", minimal + "[service]\nunit = \"org.example.web\"\n", "service.unit", "only service units"},
		{"service unit socket", minimal + "[service]\nunit = \"web.socket\"\n", "service.unit", "only service units"},
		{"service unit empty template", minimal + "[service]\nunit = \"web@.service\"\n", "service.unit", "needs an instance"},
		{"service unit suffix only", minimal + "[service]\nunit = \".service\"\n", "service.unit", "no name"},
		{"service unit long", minimal + "[service]\nunit = \"" + strings.Repeat("u", 256) + "\"\n", "service.unit", "256 bytes"},
		{"service cgroup dotdot", minimal + "[service]\ncgroup = \"/sys/fs/cgroup/../etc\"\n", "service.cgroup", "not allowed"},
		{"service unknown key", minimal + "[service]\npid = 12\n", "service.pid", "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(write(t, tt.body))
			if err == nil {
				t.Fatalf("no error for:\n%s", tt.body)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.key) || !strings.Contains(msg, tt.extra) {
				t.Errorf("error %q does not name key %q with %q", msg, tt.key, tt.extra)
			}
		})
	}
}

// collectorsOnly is minimal with its collector line taken out, for cases that give collectors.
var collectorsOnly = strings.Replace(minimal, "collector = \"127.0.0.1:7946\"\n", "", 1)

func TestCollectors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string // the collectors accepted; nil: an error is expected
		errs []string // substrings of the error, each
	}{
		{"single collector", minimal, []string{"127.0.0.1:7946"}, nil},
		{"one in the list", collectorsOnly + `collectors = ["10.0.0.1:7946"]`, []string{"10.0.0.1:7946"}, nil},
		{"two", collectorsOnly + `collectors = ["10.0.0.1:7946", "10.0.0.2:7946"]`, []string{"10.0.0.1:7946", "10.0.0.2:7946"}, nil},
		{"names and ipv6", collectorsOnly + `collectors = ["ctl-a.example:7946", "[2001:db8::1]:7946", "ctl-b.example:7946"]`,
			[]string{"ctl-a.example:7946", "[2001:db8::1]:7946", "ctl-b.example:7946"}, nil},
		{"eight", collectorsOnly + `collectors = ["a:1", "a:2", "a:3", "a:4", "a:5", "a:6", "a:7", "a:8"]`,
			[]string{"a:1", "a:2", "a:3", "a:4", "a:5", "a:6", "a:7", "a:8"}, nil},
		{"nine", collectorsOnly + `collectors = ["a:1", "a:2", "a:3", "a:4", "a:5", "a:6", "a:7", "a:8", "a:9"]`, nil,
			[]string{"collectors: 9 addresses, at most 8"}},
		{"empty list", collectorsOnly + `collectors = []`, nil, []string{"collectors: empty"}},
		{"both keys", minimal + `collectors = ["10.0.0.1:7946"]`, nil, []string{"collectors: set together with collector: use one"}},
		{"neither", collectorsOnly, nil, []string{"collector: required", "or collectors"}},
		{"no port", collectorsOnly + `collectors = ["10.0.0.1:7946", "10.0.0.2"]`, nil, []string{`collectors[1]: "10.0.0.2" is not host:port`}},
		{"no host", collectorsOnly + `collectors = [":7946"]`, nil, []string{`collectors[0]: ":7946" has no host`}},
		{"port range", collectorsOnly + `collectors = ["10.0.0.1:7946", "10.0.0.2:70000"]`, nil, []string{`collectors[1]: "10.0.0.2:70000": port 70000 is outside 1-65535`}},
		{"port name", collectorsOnly + `collectors = ["10.0.0.1:push"]`, nil, []string{`collectors[0]: "10.0.0.1:push": port "push" is not a number`}},
		{"empty entry", collectorsOnly + `collectors = ["10.0.0.1:7946", ""]`, nil, []string{`collectors[1]: "" is not host:port`}},
		{"every bad entry reported", collectorsOnly + `collectors = ["x", "10.0.0.1:7946", ":1"]`, nil,
			[]string{`collectors[0]: "x"`, `collectors[2]: ":1" has no host`}},
		{"duplicate", collectorsOnly + `collectors = ["10.0.0.1:7946", "10.0.0.2:7946", "10.0.0.1:7946"]`, nil,
			[]string{`collectors[2]: "10.0.0.1:7946" is collectors[0] ("10.0.0.1:7946") again`}},
		{"duplicate spelt differently", collectorsOnly + `collectors = ["[2001:db8::1]:7946", "[2001:DB8:0::1]:07946"]`, nil,
			[]string{`collectors[1]: "[2001:DB8:0::1]:07946" is collectors[0] ("[2001:db8::1]:7946") again`}},
		{"duplicate name case", collectorsOnly + `collectors = ["Ctl-A.example:7946", "ctl-a.example.:7946"]`, nil,
			[]string{`collectors[1]: "ctl-a.example.:7946" is collectors[0]`}},
		{"wrong type", collectorsOnly + `collectors = "10.0.0.1:7946"`, nil, []string{"collectors", "incompatible"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(write(t, tt.body+"\n"))
			if tt.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := c.CollectorAddrs(); !slices.Equal(got, tt.want) {
					t.Errorf("collectors %q, want %q", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error for:\n%s", tt.body)
			}
			for _, e := range tt.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q lacks %q", err, e)
				}
			}
		})
	}
}

// Every problem is reported in one run, not only the first.
func TestValidateJoinsProblems(t *testing.T) {
	c := Defaults()
	c.Collector, c.Jitter, c.Scope = "nope", 2, "vm"
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, key := range []string{"collector", "jitter", "scope"} {
		if !strings.Contains(err.Error(), key+":") {
			t.Errorf("error %q lacks %s", err, key)
		}
	}
}

func TestAgentCheckAccepted(t *testing.T) {
	tests := []struct {
		name  string
		table string
		want  AgentCheck
	}{
		{"defaults, disabled", "", AgentCheck{CPU: 0.7, Mem: 0.3, FloorPercent: 1}},
		{"all addresses", "listen = \":8081\"\n", AgentCheck{Listen: ":8081", CPU: 0.7, Mem: 0.3, FloorPercent: 1}},
		{"loopback", "listen = \"127.0.0.1:8081\"\n", AgentCheck{Listen: "127.0.0.1:8081", CPU: 0.7, Mem: 0.3, FloorPercent: 1}},
		{"ipv6", "listen = \"[::1]:8081\"\nfloor_percent = 0\n", AgentCheck{Listen: "[::1]:8081", CPU: 0.7, Mem: 0.3}},
		{"with connections", "listen = \":8081\"\ncpu = 0.5\nmem = 0.2\nconn = 0.3\nmax_conns = 500\nfloor_percent = 10\n",
			AgentCheck{Listen: ":8081", CPU: 0.5, Mem: 0.2, Conn: 0.3, MaxConns: 500, FloorPercent: 10}},
		{"connections only", "listen = \":8081\"\ncpu = 0.0\nmem = 0.0\nconn = 1.0\nmax_conns = 4\n",
			AgentCheck{Listen: ":8081", Conn: 1, MaxConns: 4, FloorPercent: 1}},
		{"checkers", "listen = \":8081\"\ncheckers = [\"10.0.0.5\", \"2001:db8::/64\"]\n",
			AgentCheck{Listen: ":8081", CPU: 0.7, Mem: 0.3, FloorPercent: 1, Checkers: []string{"10.0.0.5", "2001:db8::/64"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(write(t, minimal+"service_ports = [80]\n[agent_check]\n"+tt.table))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.AgentCheck, tt.want) {
				t.Errorf("got %+v, want %+v", c.AgentCheck, tt.want)
			}
		})
	}
}

// fast_interval may equal interval (which switches the faster pace off) but not exceed it,
// and the bound follows interval, not the default.
func TestFastIntervalBounds(t *testing.T) {
	tests := []struct {
		name, body string
		ok         bool
	}{
		{"default under shortest interval", "interval = \"100ms\"\n", true},
		{"equal to interval", "interval = \"1s\"\n[health]\nfast_interval = \"1s\"\n", true},
		{"minimum", "[health]\nfast_interval = \"10ms\"\n", true},
		{"above interval", "interval = \"200ms\"\n[health]\nfast_interval = \"250ms\"\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(write(t, minimal+tt.body))
			if (err == nil) != tt.ok {
				t.Errorf("error %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// conns_interval "0s" counts connections for every report; it is not below the minimum.
func TestConnsIntervalZero(t *testing.T) {
	c, err := Load(write(t, minimal+"conns_interval = \"0s\"\n"))
	if err != nil || c.ConnsInterval != 0 {
		t.Fatalf("conns_interval 0s: %+v %v, want accepted as 0", c.ConnsInterval, err)
	}
}

func TestShortIntervalWithoutHealthCheck(t *testing.T) {
	// No [health] url: the default 2 s timeout never runs, so a 1 s interval is fine.
	if _, err := Load(write(t, minimal+"interval = \"1s\"\n")); err != nil {
		t.Fatalf("interval 1s without a health check rejected: %v", err)
	}
}

func TestServiceAccepted(t *testing.T) {
	tests := []struct {
		name       string
		table      string
		want       Service
		unitCgroup string
	}{
		{"none", "", Service{}, ""},
		{"pidfile", "pidfile = \"/run/nginx.pid\"\n", Service{PIDFile: "/run/nginx.pid"}, ""},
		{"bare unit", "unit = \"nginx\"\n", Service{Unit: "nginx"}, "system.slice/nginx.service"},
		{"unit with suffix", "unit = \"nginx.service\"\n", Service{Unit: "nginx.service"}, "system.slice/nginx.service"},
		{"dotted template instance", "unit = \"getty@tty1.service\"\n", Service{Unit: "getty@tty1.service"}, "system.slice/getty@tty1.service"},
		{"cgroup", "cgroup = \"/sys/fs/cgroup/lab/web\"\n", Service{Cgroup: "/sys/fs/cgroup/lab/web"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(write(t, minimal+"[service]\n"+tt.table))
			if err != nil {
				t.Fatal(err)
			}
			if c.Service != tt.want || c.Service.UnitCgroup() != tt.unitCgroup {
				t.Errorf("got %+v (unit cgroup %q), want %+v (%q)", c.Service, c.Service.UnitCgroup(), tt.want, tt.unitCgroup)
			}
		})
	}
}
