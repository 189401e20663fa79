package main

import (
	"net"
	"strings"
	"testing"

	"flowweight/controller/view"
	"flowweight/weights"
)

type oneService struct{}

func (oneService) Services() []view.ServiceView {
	return []view.ServiceView{{Name: "web", Total: 1000, Backends: []view.BackendView{{Name: "a", AppliedWeight: 1000, LastReportAge: 1}}}}
}
func (oneService) History() map[string][]view.Point { return nil }
func (oneService) Events() []view.Event             { return nil }
func (oneService) Drain(string, bool) error         { return view.ErrNoBackend }
func (oneService) Drained(string) (view.DrainedView, error) {
	return view.DrainedView{}, view.ErrNoBackend
}
func (oneService) HA() view.HAView                { return view.HAView{Role: "single"} }
func (oneService) SwitchViews() []view.SwitchView { return nil }
func (oneService) Switches() []uint64             { return nil }

// TestStatusThroughTheGuardedAPI: `controller status` passes the API's Host check, both
// with the IP:port form of its default -api and with localhost.
func TestStatusThroughTheGuardedAPI(t *testing.T) {
	base := serveAPI(t, oneService{}, "")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	for _, base := range []string{base, "http://localhost:" + port} {
		if rc := statusCommand([]string{"-api", base}); rc != 0 {
			t.Fatalf("status -api %s: exit %d", base, rc)
		}
	}
}

// TestPrintStatusShares: the status table shows each backend's slots and realised share next
// to its weight share, and says when no switch gives a slot table.
func TestPrintStatusShares(t *testing.T) {
	svc := view.ServiceView{Name: "web", VIP: "10.0.0.100", Port: 80, Mode: "conntrack", GroupID: 5, Total: 1000,
		SlotTable: 256, Backends: []view.BackendView{
			{Name: "a", AppliedWeight: 700, Share: 0.7, Slots: 179, RealisedShare: 179.0 / 256,
				Measured: []view.MeasuredView{{DPID: "0000000000000001", Unit: "connections", MeasuredShare: ptr(0.712), Total: 1000},
					{DPID: "0000000000000002", Unit: "connections", MeasuredShare: ptr(0.5), Total: 2}}},
			{Name: "b", AppliedWeight: 300, Share: 0.3, Slots: 77, RealisedShare: 77.0 / 256},
		}}
	var out strings.Builder
	printStatus(&out, []view.ServiceView{svc})
	got := out.String()
	for _, want := range []string{"service web  10.0.0.100:80  mode=conntrack", "slots=256", "SLOTS", "REALISED", "179", "69.9%", "70.0%", "77", "30.1%",
		"MEASURED", "71.2% of 1000", "—"} {
		if !strings.Contains(got, want) {
			t.Errorf("status output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "50.0%") {
		t.Errorf("MEASURED shows the second switch's measurement, not the first's (REALISED's):\n%s", got)
	}
	svc.Backends[0].Measured = []view.MeasuredView{{Unit: "packets", MeasuredShare: ptr(0.25), Total: 40}}
	out.Reset()
	printStatus(&out, []view.ServiceView{svc})
	if !strings.Contains(out.String(), "25.0% of 40 pkts") {
		t.Errorf("a stateless service's measured share must say it counts packets:\n%s", out.String())
	}
	for hash, want := range map[string]string{"per_flow": "slots=256 udp=per-flow", "per_address": "slots=256 udp=per-address"} {
		svc.UDPHash = hash
		out.Reset()
		printStatus(&out, []view.ServiceView{svc})
		if !strings.Contains(out.String(), want) {
			t.Errorf("a UDP service hashed %s must say %q:\n%s", hash, want, out.String())
		}
	}
	svc.UDPHash = ""
	svc.SlotTable = 0
	out.Reset()
	printStatus(&out, []view.ServiceView{svc})
	if !strings.Contains(out.String(), "slots=none (no switch)") {
		t.Errorf("status without a switch:\n%s", out.String())
	}
	svc.VIP = "fd00:77::100" // an IPv6 VIP prints as host:port can be read back
	out.Reset()
	printStatus(&out, []view.ServiceView{svc})
	if !strings.Contains(out.String(), "service web  [fd00:77::100]:80  mode=") {
		t.Errorf("status of an IPv6 service:\n%s", out.String())
	}
}

// TestPrintStatusSignals: the table shows which signals each backend reports, the service's
// own CPU only where it was measured (absent is a dash, not 0 %), and why the headroom policy
// fell back.
func TestPrintStatusSignals(t *testing.T) {
	own := 0.25
	svc := view.ServiceView{Name: "web", Total: 1000, Policy: "headroom",
		PolicyFallback: "headroom needs the service's own CPU and 1 of 2 live backends do not report it: 1/AL used",
		Backends: []view.BackendView{
			{Name: "with", Signals: "service_cpu,cpu_pressure", ServiceCPU: &own},
			{Name: "without", Signals: "none"},
		}}
	var out strings.Builder
	printStatus(&out, []view.ServiceView{svc})
	lines := strings.Split(out.String(), "\n")
	var with, without string
	for _, l := range lines {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "with":
			with = l
		case len(f) > 0 && f[0] == "without":
			without = l
		}
	}
	if !strings.Contains(with, "25.0%") || !strings.Contains(with, "service_cpu,cpu_pressure") {
		t.Errorf("backend with service CPU: %q", with)
	}
	if !strings.Contains(without, "—") || !strings.Contains(without, "none") || strings.Contains(without, "25.0%") {
		t.Errorf("backend without service CPU: %q", without)
	}
	if !strings.Contains(out.String(), "policy fallback: headroom needs") {
		t.Errorf("no fallback line:\n%s", out.String())
	}
}

// TestPrintStatusLiveConnections: the LIVE CONNS column shows the latest count with its
// source and age, and a dash (not 0) where none was reported.
func TestPrintStatusLiveConnections(t *testing.T) {
	n, age := 50.0, 0.4
	svc := view.ServiceView{Name: "web", Total: 1000, Backends: []view.BackendView{
		{Name: "counted", Conns: 31.7, Connections: &n, ConnectionsSource: "snmp", ConnectionsAge: &age},
		{Name: "silent", State: "up", InFlight: &age},
	}}
	var out strings.Builder
	printStatus(&out, []view.ServiceView{svc})
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = l
		}
	}
	if !strings.Contains(lines["BACKEND"], "LIVE CONNS") || !strings.Contains(lines["counted"], "50 (snmp, 0.4s)") {
		t.Errorf("counted backend:\n%s", out.String())
	}
	// silent up CPU OWN MEM CONNS LIVE: the seventh field.
	if f := strings.Fields(lines["silent"]); len(f) < 8 || f[6] != "—" || f[7] != "0" {
		t.Errorf("backend with no count: %q, want a dash in LIVE CONNS", lines["silent"])
	}
}

// TestPrintStatusShadow: a SHADOW column appears when any service has a shadow policy, with
// each backend's shadow weight and share (a dash in a service without one), and not at all
// when none has.
func TestPrintStatusShadow(t *testing.T) {
	w, share := uint16(500), 0.5
	shadowed := view.ServiceView{Name: "web", Total: 1000, Policy: "static", ShadowPolicy: "equal", Backends: []view.BackendView{
		{Name: "a", AppliedWeight: 750, ShadowWeight: &w, ShadowShare: &share},
	}}
	plain := view.ServiceView{Name: "api", Total: 1000, Backends: []view.BackendView{{Name: "p", AppliedWeight: 1000}}}
	cases := []struct {
		name     string
		services []view.ServiceView
		want     map[string]string // first field of a line -> its last field
		absent   []string
	}{
		{"with a shadow", []view.ServiceView{shadowed, plain}, map[string]string{"BACKEND": "SHADOW", "a": "(50.0%)", "p": "—"}, nil},
		{"without", []view.ServiceView{plain}, map[string]string{"BACKEND": "SIGNALS"}, []string{"SHADOW", "shadow policy"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			printStatus(&out, c.services)
			for _, l := range strings.Split(out.String(), "\n") {
				f := strings.Fields(l)
				if len(f) == 0 {
					continue
				}
				if want, ok := c.want[f[0]]; ok && f[len(f)-1] != want {
					t.Errorf("line %q ends in %q, want %q", l, f[len(f)-1], want)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(out.String(), a) {
					t.Errorf("output shows %q:\n%s", a, out.String())
				}
			}
			if c.services[0].ShadowPolicy != "" && !strings.Contains(out.String(), "shadow policy: equal (computed beside the live weights, never applied)") ||
				!strings.Contains(out.String(), "500 (50.0%)") && c.services[0].ShadowPolicy != "" {
				t.Errorf("no shadow line or value:\n%s", out.String())
			}
		})
	}
}

// TestPrintStatusCanary: a shadow policy applied on canary switches says where.
func TestPrintStatusCanary(t *testing.T) {
	svc := view.ServiceView{Name: "web", Total: 1000, Policy: "static", ShadowPolicy: "equal",
		CanaryDatapaths: []string{"0000000000000002", "0000000000000003"}, Backends: []view.BackendView{{Name: "a", AppliedWeight: 1000}}}
	var out strings.Builder
	printStatus(&out, []view.ServiceView{svc})
	if want := "shadow policy: equal (computed beside the live weights; applied as a canary on 0000000000000002, 0000000000000003 only)"; !strings.Contains(out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, out.String())
	}
}

func ptr[T any](v T) *T { return &v }

// TestPrintStatusWarmup: a ramping backend gets a line under the table saying where its
// warm-up stands and why; a backend that is not ramping gets none.
func TestPrintStatusWarmup(t *testing.T) {
	svc := view.ServiceView{Name: "web", Total: 1000, Backends: []view.BackendView{
		{Name: "cold", State: "warming", Explanation: weights.Explanation{Warmup: 0.05, WarmupTimer: 0.63,
			WarmupWatch: "hold: more CPU per unit of weight than the pool"}},
		{Name: "timed", State: "warming", Explanation: weights.Explanation{Warmup: 0.75, WarmupTimer: 0.75}},
		{Name: "steady", State: "up", Explanation: weights.Explanation{Warmup: 1}},
	}}
	var out strings.Builder
	printStatus(&out, []view.ServiceView{svc})
	for _, want := range []string{
		"  cold warm-up: 5% of its weight (the timer would give 63%): hold: more CPU per unit of weight than the pool\n",
		"  timed warm-up: 75% of its weight (timer)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no line %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "steady warm-up") {
		t.Errorf("a backend that is not ramping has a warm-up line:\n%s", out.String())
	}
}

// TestPrintStatusCorrection: a service its first switch corrects gets one line under its
// table, each backend's group share with what is pinned to it; one not corrected, none.
func TestPrintStatusCorrection(t *testing.T) {
	share := 0.333
	corr := func(group, pinned float64, bound string) []view.MeasuredView {
		return []view.MeasuredView{{DPID: "0000000000000001", Unit: "connections", MeasuredShare: &share,
			Correction: &view.CorrectionView{State: "settled", SettledReadings: 3, ComputedShare: 1.0 / 3, PinnedShare: pinned,
				GroupShare: group, Bound: bound, Reason: "pinned connections (30.0% of 2000) would skew the split by 20.0 points: the group's slots correct it"}}}
	}
	svc := view.ServiceView{Name: "web", Total: 999, Backends: []view.BackendView{
		{Name: "be1", State: "up", Measured: corr(0.047, 0.301, "")},
		{Name: "be2", State: "up", Measured: corr(0.476, 0, "")},
		{Name: "be3", State: "up", Measured: corr(0.477, 0, "")},
	}}
	plain := view.ServiceView{Name: "api", Total: 10, Backends: []view.BackendView{{Name: "x", State: "up"}}}
	var out strings.Builder
	printStatus(&out, []view.ServiceView{svc, plain})
	want := "  share correction on 0000000000000001: settled (pinned connections (30.0% of 2000) would skew the split by 20.0 points: the group's slots correct it): " +
		"be1 group 4.7% (pinned 30.1%), be2 group 47.6%, be3 group 47.7%\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("no line %q in\n%s", want, out.String())
	}
	if n := strings.Count(out.String(), "share correction"); n != 1 {
		t.Errorf("%d correction lines, want 1:\n%s", n, out.String())
	}
}
