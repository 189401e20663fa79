package balancer

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/collector"
	"flowweight/controller/config"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// hostsConfigText is hosts a and b backing web on port 80 and echo on 9000 (backends_from),
// the services of the tests below (testdata/hosts.toml), with key as the push key file.
func hostsConfigText(key string) string {
	return withKey(baseConfig, key, "") + testutil.Fixture("testdata/hosts.toml")
}

// hostsConfig is the state rig's configuration with hosts a and b backing two services:
// web on port 80 and echo on 9000 (backends_from), one probe each.
func (r *stateRig) hostsConfig() *config.Config {
	r.t.Helper()
	text := hostsConfigText(r.key)
	c, err := config.Parse("hosts.toml", []byte(text))
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// TestHostBacksTwoServices: one pool state per host, shared by its services: one report
// moves both, a drain of the host leaves both, and the state file keeps each service's
// learned capacity apart.
func TestHostBacksTwoServices(t *testing.T) {
	r := newStateRig(t)
	b := r.start(r.hostsConfig())
	if n := len(b.pool.Snapshot(nil)); n != 2 {
		t.Fatalf("pool holds %d states, want 2 (one per host)", n)
	}
	feed := func() {
		for _, n := range []string{"a", "b"} {
			b.pool.Accept(&report.Report{BackendID: n, Flags: report.FlagHealthOK, CPUUtil: 0.3, MemUtil: 0.1, CPUCount: 2, MemBytes: 1 << 30}, netip.AddrPort{})
		}
	}
	feed()
	r.clk.Advance(11 * time.Second) // past warm-up
	feed()
	b.update(context.Background(), true)
	weightsOf := func() map[string][2]uint16 {
		b.mu.Lock()
		defer b.mu.Unlock()
		out := map[string][2]uint16{}
		for _, s := range b.services {
			out[s.cfg.Name] = [2]uint16{s.result.Backends[0].Weight, s.result.Backends[1].Weight}
		}
		return out
	}
	for svc, w := range weightsOf() {
		if w[0] == 0 || w[1] == 0 {
			t.Fatalf("service %s weights %v: each host must get weight in each service", svc, w)
		}
	}
	if err := b.Drain("a", true); err != nil {
		t.Fatal(err)
	}
	b.pool.Tick()
	b.update(context.Background(), true)
	for svc, w := range weightsOf() {
		if w[0] != 0 || w[1] == 0 {
			t.Fatalf("after draining host a, service %s weights %v: a drain leaves every service of the host", svc, w)
		}
	}
	b.mu.Lock()
	b.services[0].books[1].learned = 1.5 // web's b
	b.services[1].books[1].learned = 0.7 // echo's b
	b.mu.Unlock()
	b.saveState()
	e := r.file().Backends["b"]
	if e.LearnedIn("web") != 1.5 || e.LearnedIn("echo") != 0.7 {
		t.Fatalf("state file entry of host b %+v: want web 1.5 and echo 0.7", e)
	}
	if a := r.file().Backends["a"]; !a.OperatorDrain {
		t.Fatalf("state file entry of host a %+v: want the drain", a)
	}
	b2 := r.start(r.hostsConfig())
	if l0, l1 := b2.services[0].books[1].learned, b2.services[1].books[1].learned; l0 != 1.5 || l1 != 0.7 {
		t.Fatalf("after a restart, learned capacity of b: web %v echo %v, want 1.5 and 0.7", l0, l1)
	}
	if !operatorDrained(t, b2, "a") {
		t.Fatal("the drain of host a did not survive a restart")
	}
	// A reload that takes b out of both services and one that puts it back keep both.
	one := r.hostsConfig()
	for i := range one.Services {
		one.Services[i].Backends = one.Services[i].Backends[:1]
	}
	if err := b2.Reload(one); err != nil {
		t.Fatal(err)
	}
	if e := r.file().Backends["b"]; e.Removed == nil || e.LearnedIn("web") != 1.5 || e.LearnedIn("echo") != 0.7 {
		t.Fatalf("removed host b: %+v", e)
	}
	if err := b2.Reload(r.hostsConfig()); err != nil {
		t.Fatal(err)
	}
	if l0, l1 := b2.services[0].books[1].learned, b2.services[1].books[1].learned; l0 != 1.5 || l1 != 0.7 {
		t.Fatalf("host b put back: learned web %v echo %v, want 1.5 and 0.7", l0, l1)
	}
}

// TestReloadRefusesHostErrors: a reload with any hosts mistake changes nothing, and its
// error names the key; the same services rewritten correctly then apply.
func TestReloadRefusesHostErrors(t *testing.T) {
	r := newStateRig(t)
	b := r.start(r.cfg("a", "b"))
	good := hostsConfigText(r.key)
	bad := map[string]struct{ old, new, want string }{
		"unknown host":     {`host = "b"`, `host = "c"`, `service "web".backend[1].host`},
		"repeated field":   {"host = \"b\"\n", "host = \"b\"\n  ip = \"10.0.0.2\"\n", `service "web".backend "b".ip`},
		"host twice":       {`host = "b"`, `host = "a"`, `service "web".backend "a"`},
		"port collision":   {`port = 9000`, `port = 80`, `service "echo".port`},
		"udp http health":  {"ip = \"10.0.0.2\"\n", "ip = \"10.0.0.2\"\nsource = \"snmp\"\nhealth_url = \"http://10.0.0.2/\"\n[host.snmp]\nversion = \"v2c\"\ncommunity = \"c\"\n", ""},
		"from missing svc": {`backends_from = "web"`, `backends_from = "www"`, `service "echo".backends_from`},
	}
	for name, tc := range bad {
		text := strings.Replace(good, tc.old, tc.new, 1)
		want := tc.want
		if name == "udp http health" {
			text += "protocol = \"udp\"\n"
			want = `an HTTP check over TCP, but the service's protocol is "udp"`
		}
		err := b.ReloadFile("hosts.toml", []byte(text), ReloadOptions{Trigger: "test"})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: reload error %v, want one naming %q", name, err, want)
		}
		if c := b.Config(); len(c.Services) != 1 || len(c.Hosts) != 0 {
			t.Fatalf("%s: a refused reload changed the configuration: %d services", name, len(c.Services))
		}
	}
	if err := b.ReloadFile("hosts.toml", []byte(good), ReloadOptions{Trigger: "test"}); err != nil {
		t.Fatal(err)
	}
	if c := b.Config(); len(c.Services) != 2 || c.Services[1].Backends[1].Name != "b" || c.Services[1].Backends[1].Port != 9000 {
		t.Fatalf("the good file was not applied: %+v", c.Services)
	}
}

// TestSNMPOnePollerPerHost: an snmp host in two TCP services gets one
// poller, counting connections on both TCP ports; an inline snmp backend keeps its own port.
func TestSNMPOnePollerPerHost(t *testing.T) {
	text := `
[collector]
key_file = "/k"
[[host]]
name = "s1"
ip = "10.0.0.1"
source = "snmp"
health_url = "http://10.0.0.1/health"
[host.snmp]
version = "v2c"
community = "c"
[[service]]
name = "web"
vip = "10.0.0.100"
port = 80
group_id = 1
  [[service.backend]]
  host = "s1"
  port = 8080
  [[service.backend]]
  name = "s2"
  ip = "10.0.0.2"
  source = "snmp"
  health_url = "http://10.0.0.2/health"
  [service.backend.snmp]
  version = "v2c"
  community = "c"
[[service]]
name = "tls"
vip = "10.0.0.100"
port = 443
group_id = 2
  [[service.backend]]
  host = "s1"
`
	cfg, err := config.Parse("snmp.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	got := snmpHosts(cfg)
	if len(got) != 2 {
		t.Fatalf("%d sources, want 2 (one per host): %v", len(got), got)
	}
	if p := got["s1"].target().ServicePorts; !slices.Equal(p, []uint16{8080, 443}) {
		t.Errorf("host s1 counts connections on %v, want [8080 443]", p)
	}
	if p := got["s2"].target().ServicePorts; !slices.Equal(p, []uint16{80}) {
		t.Errorf("backend s2 counts connections on %v, want [80]", p)
	}
	tm := snmpTiming{interval: time.Second}
	if specOf(got["s1"], tm) == specOf(snmpHost{Backend: got["s1"].Backend, ports: []uint16{8080}}, tm) {
		t.Error("a change of the host's ports does not restart its source")
	}
}

// TestRunPollsSNMPBackends: Run starts the collector's poll of an snmp backend, whose failed
// polls reach the pool and the metrics (an agent that never answers), and a reload that
// removes the backend stops it.
func TestRunPollsSNMPBackends(t *testing.T) {
	agent, err := net.ListenPacket("udp", "127.0.0.1:0") // takes requests, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	snmpBackend := fmt.Sprintf(`
[[service]]
name = "dns"
vip = "10.0.1.100"
port = 53
group_id = 6
  [[service.backend]]
  name = "s1"
  ip = "10.0.1.1"
  source = "snmp"
  [service.backend.snmp]
  address = %q
  version = "v2c"
  community = "c"
  timeout = "20ms"
  retries = 0
  [service.backend.health]
  type = "tcp"
`, agent.LocalAddr().String())
	m := NewMetrics()
	b, err := New(testConfig(t, snmpBackend), Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	startInProcess(t, b)
	testutil.Eventually(t, 10*time.Second, func() (collector.Health, bool) {
		st, _ := b.Pool().Get("s1")
		return st.LastHealth, strings.Contains(st.LastHealth.Err, "snmp")
	}, "a failed poll in the pool (last health)")
	if got := counterValues(t, m, "flowweight_snmp_poll_errors_total", "backend")["s1"]; got < 1 {
		t.Errorf("snmp_poll_errors_total{backend=s1} = %v, want at least 1", got)
	}
	if err := b.reload("test.toml", testConfig(t, ""), ReloadOptions{AllowRemoval: true}); err != nil {
		t.Fatal(err)
	}
	if got := b.snmp.Running(); len(got) != 0 {
		t.Errorf("polls %v still running after the reload removed their backend", got)
	}
}

// TestRunPollsWhatTheLastReloadSaid: Run starts the SNMP polls of the configuration installed
// last, not of the one it read when it began: a reload while Run starts up (the file watcher
// starts beside Run; here the reload runs in Run's ready callback, after Run read its
// configuration) is not undone.
func TestRunPollsWhatTheLastReloadSaid(t *testing.T) {
	snmpService := func(name string) string {
		return fmt.Sprintf(`
[[service]]
name = "dns"
vip = "10.0.1.100"
port = 53
group_id = 6
  [[service.backend]]
  name = %q
  ip = "10.0.1.1"
  source = "snmp"
  [service.backend.snmp]
  address = "127.0.0.1:1"
  version = "v2c"
  community = "c"
  timeout = "20ms"
  retries = 0
  [service.backend.health]
  type = "tcp"
`, name)
	}
	b, err := New(testConfig(t, snmpService("old")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	next := testConfig(t, snmpService("new"))
	ctx, cancel := context.WithCancel(context.Background())
	reloaded := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- b.Run(ctx, func(net.Addr, net.Addr) {
			reloaded <- b.reload("test.toml", next, ReloadOptions{AllowRemoval: true})
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() ([]string, bool) {
		r := b.snmp.Running()
		return r, slices.Equal(r, []string{"new"})
	}, "the polls of the reloaded configuration alone running")
}
