package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ctlconfig "flowweight/controller/config"
	"flowweight/e2e/lab"
	probeconfig "flowweight/probe/config"
	"flowweight/probe/sample"
)

func TestControllerTOMLLoads(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		caps []float64
		mode string
	}{
		{"defaults", Options{Dir: "/x"}, nil, ""},
		{"stateless, four backends", Options{Dir: "/x", Net: 9, Quotas: []float64{1, 1, 1, 1}, Mode: ModeStateless}, nil, ""},
		{"reloaded capacities and mode", Options{Dir: "/x"}, []float64{4, 1, 0.5}, ModeStateless},
		{"weighting overrides", Options{Dir: "/x", Weighting: map[string]string{"policy": `"static"`, "dead_band": "0.2"}}, nil, ""},
		{"hosts", Options{Dir: "/x", Hosts: true}, []float64{4, 1, 0.5}, ""},
		{"ipv6", Options{Dir: "/x", Net: 6, IPv6: true}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			if err := o.fill(); err != nil {
				t.Fatal(err)
			}
			caps, mode := o.Capacities, o.Mode
			if tt.caps != nil {
				caps = tt.caps
			}
			if tt.mode != "" {
				mode = tt.mode
			}
			text := ControllerTOML(o, "/run/ovs/controller.sock", "/x/push.key", caps, mode)
			cfg, err := ctlconfig.Parse("scenario.toml", []byte(text))
			if err != nil {
				t.Fatalf("controller rejects the scenario's config: %v\n%s", err, text)
			}
			if cfg.Controller.Listen != "unix:/run/ovs/controller.sock" {
				t.Errorf("controller.listen = %q", cfg.Controller.Listen)
			}
			if cfg.Controller.UpdatePeriod != o.UpdatePeriod || cfg.Controller.ReadbackPeriod != o.ReadbackPeriod {
				t.Errorf("periods %v/%v, want %v/%v", cfg.Controller.UpdatePeriod, cfg.Controller.ReadbackPeriod, o.UpdatePeriod, o.ReadbackPeriod)
			}
			if cfg.Collector.StaleAfter != o.StaleAfter || cfg.Collector.FailThreshold != o.FailThreshold || cfg.Collector.RiseThreshold != o.RiseThreshold {
				t.Errorf("collector %+v does not carry the options %+v", cfg.Collector, o)
			}
			if cfg.Weighting.Warmup != o.Warmup {
				t.Errorf("warmup %v, want %v", cfg.Weighting.Warmup, o.Warmup)
			}
			if v, ok := o.Weighting["dead_band"]; ok {
				if got := cfg.Weighting.DeadBand; v != "0.2" || got != 0.2 {
					t.Errorf("dead_band %v, want the override %s", got, v)
				}
			}
			if len(cfg.Services) != 1 {
				t.Fatalf("%d services", len(cfg.Services))
			}
			svc := cfg.Services[0]
			if svc.Mode != mode || svc.GroupID != GroupID || svc.Port != VIPPort || svc.VIP != o.addr(vipHost).String() {
				t.Errorf("service %+v", svc)
			}
			if len(svc.Backends) != len(o.Quotas) {
				t.Fatalf("%d backends for %d quotas", len(svc.Backends), len(o.Quotas))
			}
			for i, b := range svc.Backends {
				if b.IP != o.addr(backendBase+i).String() || b.Port != BackendPort || b.Capacity != caps[i] || b.Source != "probe" {
					t.Errorf("backend %d: %+v", i, b)
				}
			}
		})
	}
}

// TestPortServicesLoad: the hosts form with more ports of the VIP over the same hosts, as
// the multi-port end-to-end test writes it, loads, each service on its own port and group.
func TestPortServicesLoad(t *testing.T) {
	o := Options{Dir: "/x", Net: 5, Hosts: true}
	if err := o.fill(); err != nil {
		t.Fatal(err)
	}
	o.ExtraTOML = PortServicesTOML(o, PortService{"tls", "tcp", 443, 2}, PortService{"dns", "udp", 53, 3})
	text := ControllerTOML(o, "/run/ovs/controller.sock", "/x/push.key", o.Capacities, o.Mode)
	cfg, err := ctlconfig.Parse("scenario.toml", []byte(text))
	if err != nil {
		t.Fatalf("controller rejects the config: %v\n%s", err, text)
	}
	if len(cfg.Services) != 3 || len(cfg.Hosts) != 3 {
		t.Fatalf("%d services, %d hosts", len(cfg.Services), len(cfg.Hosts))
	}
	for i, want := range []struct {
		proto    string
		port, bp int
		group    int
	}{{"tcp", VIPPort, BackendPort, GroupID}, {"tcp", 443, 443, 2}, {"udp", 53, 53, 3}} {
		s := cfg.Services[i]
		if s.Protocol != want.proto || s.Port != want.port || s.GroupID != want.group || len(s.Backends) != 3 {
			t.Errorf("service %d: %+v", i, s)
		}
		for j, b := range s.Backends {
			if b.Name != fmt.Sprintf("be%d", j+1) || b.Port != want.bp || b.IP != o.addr(backendBase+j).String() {
				t.Errorf("service %s backend %d: %+v", s.Name, j, b)
			}
		}
	}
}

func TestProbeTOMLLoads(t *testing.T) {
	tests := []struct {
		interval, fast, wantFast time.Duration
		noService                bool
	}{
		{time.Second, 0, 100 * time.Millisecond, false}, // the probe's default
		{300 * time.Millisecond, 0, 100 * time.Millisecond, false},
		{5 * time.Second, 0, 100 * time.Millisecond, false},
		{time.Second, 50 * time.Millisecond, 50 * time.Millisecond, false},
		{time.Second, 0, 100 * time.Millisecond, true},
		{time.Second, 50 * time.Millisecond, 50 * time.Millisecond, true},
	}
	for _, tt := range tests {
		interval := tt.interval
		o := Options{Dir: "/x", Net: 3, ProbeInterval: interval, ProbeFastInterval: tt.fast, NoServiceCPU: tt.noService}
		if err := o.fill(); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		key := filepath.Join(dir, "push.key")
		if err := writeKey(key); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "probe.toml")
		pidFile := filepath.Join(dir, "be1-http.pid")
		text := ProbeTOML(o, "be1", "10.77.3.11", "/sys/fs/cgroup/cpu/fw1-be1", key, filepath.Join(dir, "drain"), pidFile)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := probeconfig.Load(path)
		if err != nil {
			t.Fatalf("interval %v: the probe rejects the scenario's config: %v\n%s", interval, err, text)
		}
		if c.Interval != interval || c.Collector != "10.77.3.2:7946" || c.Health.URL != "http://10.77.3.11:8080/health" ||
			!slices.Equal(c.ServicePorts, []int{BackendPort}) || c.Health.Timeout > interval || c.Health.FastInterval != tt.wantFast {
			t.Errorf("interval %v: probe config %+v", interval, c)
		}
		// The service is found by the pidfile alone (the probe accepts one of the three keys),
		// and only when the option leaves it on.
		want := probeconfig.Service{PIDFile: pidFile}
		if tt.noService {
			want = probeconfig.Service{}
		}
		if c.Service != want {
			t.Errorf("interval %v, NoServiceCPU %v: [service] %+v, want %+v\n%s", interval, tt.noService, c.Service, want, text)
		}
	}
}

// The pidfile StartHTTP writes is one the probe's service sampler reads.
func TestPIDFileDataParses(t *testing.T) {
	for _, pid := range []int{1, 4242, 1<<22 - 1} {
		got, err := sample.ParsePID(pidFileData(pid))
		if err != nil || got != pid {
			t.Errorf("ParsePID(%q) = %d, %v; want %d", pidFileData(pid), got, err, pid)
		}
	}
}

func TestOptionsFill(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no dir", Options{}, "Dir"},
		{"bad mode", Options{Dir: "/x", Mode: "fast"}, "Mode"},
		{"capacities mismatch", Options{Dir: "/x", Quotas: []float64{1, 2}, Capacities: []float64{1}}, "capacities"},
		{"too many backends", Options{Dir: "/x", Quotas: make([]float64, 90)}, "backends"},
		{"defaults", Options{Dir: "/x"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.fill()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				o := tt.opts
				if o.Mode != ModeConntrack || !slices.Equal(o.Quotas, []float64{0.25, 0.5, 1}) || len(o.Capacities) != 3 ||
					o.UpdatePeriod != time.Second || o.ReadbackPeriod != 2*time.Second || o.StaleAfter != 4*time.Second ||
					o.Warmup != 6*time.Second || o.FailThreshold != 3 || o.RiseThreshold != 2 {
					t.Fatalf("defaults not filled: %+v", o)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("fill() = %v, want an error about %s", err, tt.wantErr)
			}
		})
	}
}

// Recorded from Open vSwitch 3.1 (dump-flows of a scenario), with counters differing.
const flowsA = `OFPST_FLOW reply (OF1.3) (xid=0x2):
 cookie=0xf1e00001ffff0001, duration=12.116s, table=0, n_packets=8, n_bytes=336, priority=300,arp,arp_tpa=10.77.40.100 actions=CONTROLLER:65535
 cookie=0xf1e0ffffffff000a, duration=12.116s, table=0, n_packets=66, n_bytes=7785, priority=0 actions=NORMAL
 cookie=0xf1e0000100000006, duration=12.113s, table=2, n_packets=0, n_bytes=0, priority=100,ip,nw_dst=10.77.40.11 actions=set_field:02:5e:c8:9e:04:17->eth_dst,output:3
`

const flowsB = `OFPST_FLOW reply (OF1.3) (xid=0x9):
 cookie=0xf1e0000100000006, duration=0.5s, table=2, n_packets=17, n_bytes=1200, idle_age=0, priority=100,ip,nw_dst=10.77.40.11 actions=set_field:02:5e:c8:9e:04:17->eth_dst,output:3
 cookie=0xf1e0ffffffff000a, duration=1s, table=0, n_packets=0, n_bytes=0, priority=0 actions=NORMAL
 cookie=0xf1e00001ffff0001, duration=1.001s, table=0, n_packets=0, n_bytes=0, priority=300,arp,arp_tpa=10.77.40.100 actions=CONTROLLER:65535
`

func TestNormalizeFlows(t *testing.T) {
	a, b := NormalizeFlows(flowsA), NormalizeFlows(flowsB)
	if !slices.Equal(a, b) {
		t.Fatalf("same flows with other counters differ:\n%q\n%q", a, b)
	}
	want := "cookie=0xf1e0000100000006, table=2, priority=100,ip,nw_dst=10.77.40.11 actions=set_field:02:5e:c8:9e:04:17->eth_dst,output:3"
	if a[0] != want {
		t.Fatalf("first flow %q, want %q", a[0], want)
	}
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"duplicate shows", flowsA, flowsA + " cookie=0xf1e0ffffffff000a, duration=1s, table=0, n_packets=0, n_bytes=0, priority=0 actions=NORMAL\n", false},
		{"other action", flowsA, strings.Replace(flowsA, "output:3", "output:4", 1), false},
		{"other cookie", flowsA, strings.Replace(flowsA, "0xf1e0ffffffff000a", "0xf1e0ffffffff000b", 1), false},
		{"empty", "", "OFPST_FLOW reply (OF1.3) (xid=0x2):\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slices.Equal(NormalizeFlows(tt.a), NormalizeFlows(tt.b)); got != tt.same {
				t.Fatalf("equal = %v, want %v", got, tt.same)
			}
		})
	}
}

func FuzzNormalizeFlows(f *testing.F) {
	f.Add(flowsA)
	f.Add(flowsB)
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		a := NormalizeFlows(s)
		if !slices.IsSorted(a) {
			t.Fatalf("not sorted: %q", a)
		}
		// Normalising is idempotent: a normalised dump normalises to itself.
		if b := NormalizeFlows(strings.Join(a, "\n")); !slices.Equal(a, b) {
			t.Fatalf("not idempotent:\n%q\n%q", a, b)
		}
	})
}

func TestBucketsByBackend(t *testing.T) {
	ips := map[string]string{"be1": "10.77.0.1", "be2": "10.77.0.12", "be3": "10.77.0.13"}
	ct := func(ip string) string { return "ct(commit,table=2,zone=1,nat(dst=" + ip + ":8080))" }
	// Bucket actions as Open vSwitch 3.1 printed them for a scenario in each mode.
	sl := func(ip string) string {
		return "set_field:02:5e:c8:9e:04:17->eth_dst,set_field:" + ip + "->ip_dst,set_field:8080->tcp_dst,output:3"
	}
	tests := []struct {
		name    string
		buckets []lab.BucketWeight
		want    map[string]uint16
		wantErr string
	}{
		{"conntrack", []lab.BucketWeight{{BucketID: 0, Weight: 100, Actions: ct("10.77.0.1")}, {BucketID: 1, Weight: 200, Actions: ct("10.77.0.12")}, {BucketID: 2, Weight: 300, Actions: ct("10.77.0.13")}},
			map[string]uint16{"be1": 100, "be2": 200, "be3": 300}, ""},
		{"stateless, one absent", []lab.BucketWeight{{BucketID: 0, Weight: 5, Actions: sl("10.77.0.12")}, {BucketID: 1, Weight: 0, Actions: sl("10.77.0.13")}},
			map[string]uint16{"be2": 5, "be3": 0}, ""},
		{"prefix address is not a match", []lab.BucketWeight{{BucketID: 0, Weight: 1, Actions: ct("10.77.0.14")}}, nil, "want exactly one"},
		{"two buckets for one backend are summed", []lab.BucketWeight{{BucketID: 0, Weight: 1, Actions: ct("10.77.0.12")}, {BucketID: 1, Weight: 2, Actions: ct("10.77.0.12")}},
			map[string]uint16{"be2": 3}, ""},
		{"a bucket naming two backends", []lab.BucketWeight{{BucketID: 0, Weight: 1, Actions: ct("10.77.0.12") + "," + ct("10.77.0.13")}}, nil, "want exactly one"},
		{"none", nil, map[string]uint16{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BucketsByBackend(tt.buckets, ips)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if w, ok := got[k]; !ok || w != v {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestMentionsIP(t *testing.T) {
	tests := []struct {
		s, ip string
		want  bool
	}{
		{"nat(dst=10.0.0.1:80)", "10.0.0.1", true},
		{"nat(dst=10.0.0.12:80)", "10.0.0.1", false},
		{"nat(dst=110.0.0.1:80)", "10.0.0.1", false},
		{"10.0.0.1", "10.0.0.1", true},
		{"set_field:10.0.0.1->ip_dst", "10.0.0.1", true},
		{"10.0.0.12,10.0.0.1", "10.0.0.1", true},
		{"", "10.0.0.1", false},
		{"nat(dst=[fd00:77:0:6::b]:8080)", "fd00:77:0:6::b", true},
		{"nat(dst=[fd00:77:0:6::bc]:8080)", "fd00:77:0:6::b", false},
		{"nat(dst=[fd00:77:0:6::b:1]:8080)", "fd00:77:0:6::b", false},
		{"set_field:fd00:77:0:6::b->ipv6_dst", "fd00:77:0:6::b", true},
		{"set_field:1fd00:77:0:6::b->ipv6_dst", "fd00:77:0:6::b", false},
	}
	for _, tt := range tests {
		if got := mentionsIP(tt.s, tt.ip); got != tt.want {
			t.Errorf("mentionsIP(%q, %q) = %v, want %v", tt.s, tt.ip, got, tt.want)
		}
	}
}

func FuzzMentionsIP(f *testing.F) {
	f.Add("ct(commit,nat(dst=10.77.0.11:8080))", "10.77.0.11")
	f.Add("10.0.0.12,10.0.0.1", "10.0.0.1")
	f.Fuzz(func(t *testing.T, s, ip string) {
		if ip == "" {
			return
		}
		got := mentionsIP(s, ip)
		if got && !strings.Contains(s, ip) {
			t.Fatalf("mentionsIP(%q, %q) true without the substring", s, ip)
		}
	})
}

func TestCompareWeights(t *testing.T) {
	tests := []struct {
		name         string
		got, applied map[string]uint16
		wantErr      string
	}{
		{"equal", map[string]uint16{"a": 1, "b": 2}, map[string]uint16{"a": 1, "b": 2}, ""},
		{"evicted bucket absent", map[string]uint16{"a": 3}, map[string]uint16{"a": 3, "b": 0}, ""},
		{"evicted bucket at 0", map[string]uint16{"a": 3, "b": 0}, map[string]uint16{"a": 3, "b": 0}, ""},
		{"drift", map[string]uint16{"a": 2, "b": 1}, map[string]uint16{"a": 1, "b": 2}, "a: switch 2, applied 1"},
		{"missing bucket", map[string]uint16{"a": 3}, map[string]uint16{"a": 3, "b": 4}, "b: switch 0, applied 4"},
		{"stale bucket", map[string]uint16{"a": 3, "c": 1}, map[string]uint16{"a": 3}, "c: bucket on the switch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CompareWeights(tt.got, tt.applied)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ms(5), 0.99, 5 * time.Millisecond},
		{ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{ms(4, 1, 3, 2), 1, 4 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := Percentile(tt.in, tt.q); got != tt.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tt.in, tt.q, got, tt.want)
		}
	}
}

// Recorded from `ovs-ofctl -O OpenFlow14 monitor BR watch:` on Open vSwitch 3.1 while the
// controller restarted.
const monitorOut = `OFPST_FLOW_MONITOR reply (OF1.4) (xid=0x6):
 event=INITIAL table=0 cookie=0xf1e0ffffffff000a actions=NORMAL
 event=INITIAL table=2 cookie=0xf1e0000100000006 ip,nw_dst=10.77.43.11 actions=set_field:02:5e:c8:9e:04:17->eth_dst,output:3
OFPST_FLOW_MONITOR reply (OF1.4) (xid=0x0):
 event=DELETED reason=delete table=2 cookie=0xf1e0000100000006 ip,nw_dst=10.77.43.11 actions=set_field:02:5e:c8:9e:04:17->eth_dst,output:3
OFPST_FLOW_MONITOR reply (OF1.4) (xid=0x0):
 event=ADDED table=2 cookie=0xf1e0000100000006 ip,nw_dst=10.77.43.11 actions=set_field:02:5e:c8:9e:04:17->eth_dst,output:3
`

func TestParseFlowEvents(t *testing.T) {
	flow := "table=2 cookie=0xf1e0000100000006 ip,nw_dst=10.77.43.11 actions=set_field:02:5e:c8:9e:04:17->eth_dst,output:3"
	tests := []struct {
		name string
		in   string
		want []FlowEvent
	}{
		{"recorded restart", monitorOut, []FlowEvent{{"DELETED", flow}, {"ADDED", flow}}},
		{"initial only", "OFPST_FLOW_MONITOR reply (OF1.4) (xid=0x6):\n event=INITIAL table=0 actions=NORMAL\n", nil},
		{"modified", " event=MODIFIED table=0 cookie=0x1 actions=drop", []FlowEvent{{"MODIFIED", "table=0 cookie=0x1 actions=drop"}}},
		{"noise", "ovs-ofctl: something\n\nevent=\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseFlowEvents(tt.in)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzParseFlowEvents(f *testing.F) {
	f.Add(monitorOut)
	f.Add(" event=DELETED reason=delete")
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range ParseFlowEvents(s) {
			if e.Event == "" || e.Event == "INITIAL" || strings.Contains(e.Event, " ") {
				t.Fatalf("bad event %q from %q", e, s)
			}
			if !strings.Contains(s, e.Flow) {
				t.Fatalf("flow %q is not from the input", e.Flow)
			}
		}
	})
}

func TestP99All(t *testing.T) {
	ms := time.Millisecond
	lats := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(n-i) * ms // unsorted on purpose
		}
		return out
	}
	tests := []struct {
		name       string
		lats       []time.Duration
		failed     int
		want       time.Duration
		wantFailed bool
	}{
		{"none", nil, 0, 0, false},
		{"no failures", lats(100), 0, 99 * ms, false},
		{"1 % failed: the rank is the last success", lats(99), 1, 99 * ms, false},
		{"2 % failed: the rank is a failure", lats(98), 2, 5 * time.Second, true},
		{"all failed", nil, 3, 5 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.lats)
			got, failed := p99All(tt.lats, tt.failed, 5*time.Second)
			if got != tt.want || failed != tt.wantFailed {
				t.Errorf("p99All = %v, %v; want %v, %v", got, failed, tt.want, tt.wantFailed)
			}
			if !slices.Equal(in, tt.lats) {
				t.Error("p99All reordered its input")
			}
		})
	}
}

func TestErrKind(t *testing.T) {
	tests := []struct {
		err  string
		want string
	}{
		{`Get "http://10.0.0.100:80/": dial tcp 10.0.0.100:80: connect: connection refused`, "connection refused"},
		{`Get "http://10.0.0.100:80/": read tcp 10.0.0.9:4711->10.0.0.100:80: read: connection reset by peer`, "connection reset by peer"},
		{`Get "http://10.0.0.100:80/": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`, "timeout"},
		{`GET http://10.0.0.100:80/: status 503`, "status 503"},
		{`EOF`, "EOF"},
	}
	for _, tt := range tests {
		if got := ErrKind(errors.New(tt.err)); got != tt.want {
			t.Errorf("ErrKind(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
	r := LoadResult{ErrKinds: map[string]int{"timeout": 3, "connection reset by peer": 12, "EOF": 3}}
	if got, want := r.ErrSummary(), "12 connection reset by peer, 3 EOF, 3 timeout"; got != want {
		t.Errorf("ErrSummary = %q, want %q", got, want)
	}
}

func TestAllGrew(t *testing.T) {
	before := LongConnsResult{Each: []int{1, 5, 0}}
	cases := []struct {
		each []int
		ok   bool
	}{
		{[]int{4, 8, 3}, true},
		{[]int{9, 9, 9}, true},
		{[]int{4, 7, 3}, false}, // connection 1 grew by 2 only
		{[]int{1, 5, 0}, false},
	}
	for _, c := range cases {
		err := LongConnsResult{Each: c.each}.AllGrew(before, 3)
		if (err == nil) != c.ok {
			t.Errorf("AllGrew(%v from %v, 3) = %v, want ok %v", c.each, before.Each, err, c.ok)
		}
	}
}

// TestAPITokenConfig: with APIToken the API needs the scenario's token for writes (and the
// file loads as the controller reads it); without, writes need none, as before.
func TestAPITokenConfig(t *testing.T) {
	dir := t.TempDir()
	for _, withToken := range []bool{false, true} {
		o := Options{Dir: dir, APIToken: withToken}
		if err := o.fill(); err != nil {
			t.Fatal(err)
		}
		if withToken {
			if err := writeKey(o.tokenFile()); err != nil {
				t.Fatal(err)
			}
		}
		text := ControllerTOML(o, "/run/ovs/controller.sock", "/x/push.key", o.Capacities, o.Mode)
		cfg, err := ctlconfig.Parse("scenario.toml", []byte(text))
		if err != nil {
			t.Fatalf("controller rejects the config: %v\n%s", err, text)
		}
		if withToken != (cfg.API.TokenFile == o.tokenFile()) || withToken == cfg.API.AllowUnauthenticatedWrites {
			t.Fatalf("APIToken %v: token_file %q, allow_unauthenticated_writes %v", withToken, cfg.API.TokenFile, cfg.API.AllowUnauthenticatedWrites)
		}
		if withToken {
			if _, err := ctlconfig.ReadToken(cfg.API.TokenFile); err != nil {
				t.Fatalf("the scenario's token does not load: %v", err)
			}
		}
	}
}
