package collector

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
	"flowweight/weights"
)

func rep(id string, ok bool) *report.Report {
	r := &report.Report{BackendID: id, CPUUtil: 0.5, CPUCount: 2, MemUtil: 0.25, MemBytes: 1 << 30, Conns: 10}
	if ok {
		r.Flags |= report.FlagHealthOK
	}
	return r
}

var from = netip.MustParseAddrPort("127.0.0.1:40000")

func newPool(c *testutil.Clock, trans *[]Transition) *Pool {
	p := NewPool(Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: 15 * time.Second, Warmup: 60 * time.Second,
		Alpha: 0.5, Now: c.Now, OnTransition: func(t Transition) { *trans = append(*trans, t) }})
	p.SetBackends([]string{"a", "b"})
	return p
}

func status(t *testing.T, p *Pool, name string) weights.Status {
	t.Helper()
	p.Tick()
	s, ok := p.Get(name)
	if !ok {
		t.Fatalf("%s not in pool", name)
	}
	return s.Status
}

// TestUnknownWarmingUp: a backend first seen after the start-up window (here added by a
// reload) warms up for the whole warm-up before it is up.
func TestUnknownWarmingUp(t *testing.T) {
	c := testutil.NewClock(testutil.Start)
	var tr []Transition
	p := NewPool(Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: 15 * time.Second, Warmup: 60 * time.Second,
		Alpha: 0.5, Now: c.Now, OnTransition: func(t Transition) { tr = append(tr, t) }})
	c.Advance(15 * time.Second)
	p.SetBackends([]string{"a", "b"})
	if got := status(t, p, "a"); got != weights.StatusUnknown {
		t.Fatalf("initial %v", got)
	}
	p.Accept(rep("a", true), from)
	if got := status(t, p, "a"); got != weights.StatusWarming {
		t.Fatalf("after first good report %v", got)
	}
	for i := 0; i < 11; i++ { // 55 s of reports every 5 s
		c.Advance(5 * time.Second)
		p.Accept(rep("a", true), from)
		if got := status(t, p, "a"); got != weights.StatusWarming {
			t.Fatalf("at %ds %v, want warming", (i+1)*5, got)
		}
	}
	s, _ := p.Get("a")
	if s.WarmupElapsed != 55*time.Second {
		t.Fatalf("warmup elapsed %v", s.WarmupElapsed)
	}
	c.Advance(5 * time.Second)
	p.Accept(rep("a", true), from)
	if got := status(t, p, "a"); got != weights.StatusUp {
		t.Fatalf("at 60s %v, want up", got)
	}
	var ofA []Transition
	for _, x := range tr {
		if x.Backend == "a" {
			ofA = append(ofA, x)
		}
	}
	if len(ofA) != 2 || ofA[0].To != weights.StatusWarming || ofA[1].To != weights.StatusUp {
		t.Fatalf("transitions logged %+v, want exactly unknown->warming->up", ofA)
	}
}

// TestFirstHealthyReport: start-up is not a recovery. A backend whose first check is good and
// comes within stale_after of the pool's start is up at once; one first seen later (a reload
// that widens stale_after does not open the window again), or failing before its first good
// check, warms up.
func TestFirstHealthyReport(t *testing.T) {
	cases := []struct {
		name      string
		addAfter  time.Duration // SetBackends this long after the pool's start
		firstAt   time.Duration // the first report, from the pool's start
		failFirst int           // failed checks first (fail_threshold of them: down, then rise_threshold good ones)
		reconfig  bool          // a reload raises stale_after to 10 minutes before the backend is added
		want      weights.Status
		reason    string
	}{
		{name: "at start-up", firstAt: time.Second, want: weights.StatusUp, reason: "at start-up"},
		{name: "late in the window", firstAt: 15*time.Second - time.Millisecond, want: weights.StatusUp, reason: "at start-up"},
		{name: "at the window's end", firstAt: 15 * time.Second, want: weights.StatusWarming, reason: "first healthy report"},
		{name: "added by a reload", addAfter: 20 * time.Second, firstAt: 21 * time.Second, want: weights.StatusWarming, reason: "first healthy report"},
		{name: "down at start-up, then recovered", firstAt: time.Second, failFirst: 3, want: weights.StatusWarming, reason: "recovered"},
		{name: "failing at start-up, then good", firstAt: time.Second, failFirst: 2, want: weights.StatusWarming, reason: "first healthy report"},
		{name: "a reload widens stale_after later", addAfter: 20 * time.Second, firstAt: 21 * time.Second, reconfig: true, want: weights.StatusWarming, reason: "first healthy report"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testutil.NewClock(testutil.Start)
			var tr []Transition
			p := NewPool(Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: 15 * time.Second, Warmup: 60 * time.Second,
				Alpha: 0.5, Now: c.Now, OnTransition: func(t Transition) { tr = append(tr, t) }})
			c.Advance(tc.addAfter)
			if tc.reconfig {
				p.Reconfigure(Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: 10 * time.Minute, Warmup: 60 * time.Second, Alpha: 0.5})
			}
			p.SetBackends([]string{"a"})
			c.Advance(tc.firstAt - tc.addAfter)
			for range tc.failFirst {
				p.Accept(rep("a", false), from)
			}
			if tc.failFirst >= 3 {
				if got := status(t, p, "a"); got != weights.StatusDown {
					t.Fatalf("after three failed checks %v, want down", got)
				}
				p.Accept(rep("a", true), from)
			}
			p.Accept(rep("a", true), from)
			if got := status(t, p, "a"); got != tc.want {
				t.Fatalf("status %v, want %v", got, tc.want)
			}
			last := tr[len(tr)-1]
			if last.To != tc.want || !strings.Contains(last.Reason, tc.reason) {
				t.Fatalf("last transition %+v, want to %v with a reason naming %q", last, tc.want, tc.reason)
			}
			s, _ := p.Get("a")
			if tc.want == weights.StatusUp && s.WarmupElapsed != 0 {
				t.Fatalf("up at start-up with warm-up elapsed %v: weights would read a ramp", s.WarmupElapsed)
			}
		})
	}
}

func upPool(t *testing.T) (*testutil.Clock, *Pool, *[]Transition) {
	c := testutil.NewClock(testutil.Start)
	tr := &[]Transition{}
	p := newPool(c, tr)
	p.Accept(rep("a", true), from)
	c.Advance(61 * time.Second)
	p.Accept(rep("a", true), from)
	p.Accept(rep("b", true), from)
	if got := status(t, p, "a"); got != weights.StatusUp {
		t.Fatalf("setup: %v", got)
	}
	*tr = nil
	return c, p, tr
}

func TestExactlyFailThresholdEvicts(t *testing.T) {
	c, p, tr := upPool(t)
	for i := 1; i <= 3; i++ {
		c.Advance(5 * time.Second)
		p.Accept(rep("a", false), from)
		p.Accept(rep("b", true), from)
		want := weights.StatusUp
		if i == 3 {
			want = weights.StatusDown
		}
		if got := status(t, p, "a"); got != want {
			t.Fatalf("after %d failures %v, want %v", i, got, want)
		}
	}
	if got := status(t, p, "b"); got != weights.StatusWarming {
		t.Fatalf("b touched by a's failures: %v", got)
	}
	// A success in between resets the count.
	c2, p2, _ := upPool(t)
	for _, ok := range []bool{false, false, true, false, false} {
		c2.Advance(5 * time.Second)
		p2.Accept(rep("a", ok), from)
	}
	if got := status(t, p2, "a"); got != weights.StatusUp {
		t.Fatalf("non-consecutive failures evicted: %v", got)
	}
	if len(*tr) != 1 || (*tr)[0].To != weights.StatusDown {
		t.Fatalf("transitions %+v", *tr)
	}
}

func TestRecoveryNeedsRiseThresholdAndWarmsUp(t *testing.T) {
	c, p, _ := upPool(t)
	for i := 0; i < 3; i++ {
		c.Advance(5 * time.Second)
		p.Accept(rep("a", false), from)
	}
	c.Advance(5 * time.Second)
	p.Accept(rep("a", true), from)
	if got := status(t, p, "a"); got != weights.StatusDown {
		t.Fatalf("one success recovered: %v", got)
	}
	c.Advance(5 * time.Second)
	p.Accept(rep("a", true), from)
	if got := status(t, p, "a"); got != weights.StatusWarming {
		t.Fatalf("after rise_threshold successes %v, want warming", got)
	}
	if s, _ := p.Get("a"); s.WarmupElapsed != 0 {
		t.Fatalf("warm-up restarted at %v, want 0", s.WarmupElapsed)
	}
}

func TestStaleEvictionAtStaleAfter(t *testing.T) {
	c, p, _ := upPool(t)
	c.Advance(15*time.Second - time.Millisecond)
	if got := status(t, p, "a"); got != weights.StatusUp {
		t.Fatalf("just before stale_after: %v", got)
	}
	c.Advance(time.Millisecond)
	if got := status(t, p, "a"); got != weights.StatusStale {
		t.Fatalf("at stale_after: %v", got)
	}
	// Coming back needs rise_threshold good reports, then warm-up.
	p.Accept(rep("a", true), from)
	if got := status(t, p, "a"); got != weights.StatusDown {
		t.Fatalf("first report after stale: %v, want down until rise_threshold", got)
	}
	p.Accept(rep("a", true), from)
	if got := status(t, p, "a"); got != weights.StatusWarming {
		t.Fatalf("second report after stale: %v", got)
	}
}

func TestNeverReportingBecomesStale(t *testing.T) {
	c := testutil.NewClock(testutil.Start)
	var tr []Transition
	p := newPool(c, &tr)
	c.Advance(15 * time.Second)
	if got := status(t, p, "b"); got != weights.StatusStale {
		t.Fatalf("silent backend: %v", got)
	}
}

func TestDrainAndLeaving(t *testing.T) {
	c, p, _ := upPool(t)
	r := rep("a", true)
	r.Flags |= report.FlagDrain
	p.Accept(r, from)
	if got := status(t, p, "a"); got != weights.StatusDrained {
		t.Fatalf("probe drain: %v", got)
	}
	p.Accept(rep("a", true), from)
	if got := status(t, p, "a"); got != weights.StatusUp {
		t.Fatalf("probe undrain: %v (drain must not reset health)", got)
	}
	if !p.Drain("a", true) || status(t, p, "a") != weights.StatusDrained {
		t.Fatal("operator drain")
	}
	p.Drain("a", false)
	if p.Drain("nope", true) {
		t.Fatal("drained an unknown backend")
	}
	c.Advance(time.Second)
	leave := rep("a", true)
	leave.Flags |= report.FlagLeaving
	p.Accept(leave, from)
	if got := status(t, p, "a"); got != weights.StatusStale {
		t.Fatalf("leaving: %v, want stale at once", got)
	}
}

func TestUnknownBackendIgnoredAndRemovalForgets(t *testing.T) {
	c, p, _ := upPool(t)
	p.Accept(rep("zzz", true), from)
	if _, ok := p.Get("zzz"); ok {
		t.Fatal("unknown backend created by a report")
	}
	added, removed := p.SetBackends([]string{"b", "c"})
	if fmt.Sprint(added, removed) != "[c] [a]" {
		t.Fatalf("added %v removed %v", added, removed)
	}
	if len(p.Snapshot(nil)) != 2 || p.Known("a") {
		t.Fatal("removed backend still held")
	}
	p.Accept(rep("a", true), from)
	if st, _ := p.Get("b"); st.Reports == 0 {
		t.Fatal("b lost its state")
	}
	// Re-added after the tombstone grace: a fresh start.
	c.Advance(DefaultTombstoneGrace)
	p.SetBackends([]string{"a", "b", "c"})
	c.Advance(time.Second)
	if got := status(t, p, "a"); got != weights.StatusUnknown {
		t.Fatalf("backend re-added after the grace kept old state: %v", got)
	}
}

// TestRemovedBackendResumesWithinGrace: a backend a reload removed and a later reload put back
// resumes with its health, smoothed metrics and operator drain, not as unknown.
func TestRemovedBackendResumesWithinGrace(t *testing.T) {
	c, p, _ := upPool(t)
	p.Drain("a", true)
	before, _ := p.Get("a")
	p.SetBackends([]string{"b"})
	if p.Known("a") {
		t.Fatal("removed backend still known")
	}
	c.Advance(DefaultTombstoneGrace - time.Second)
	p.Accept(rep("b", true), from) // keep b fresh; a's reports are not taken while it is out
	p.SetBackends([]string{"a", "b"})
	after, ok := p.Get("a")
	if !ok || !after.OperatorDrain || after.Reports != before.Reports || after.CPU != before.CPU || after.Since != before.Since {
		t.Fatalf("re-added within the grace:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestTombstonesBounded(t *testing.T) {
	c := testutil.NewClock(testutil.Start)
	p := NewPool(Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: time.Second, Warmup: time.Second, Alpha: 0.5, Now: c.Now})
	for i := range MaxTombstones + 10 {
		p.SetBackends([]string{fmt.Sprint("b", i)})
		c.Advance(time.Millisecond)
	}
	p.SetBackends(nil)
	if len(p.tombs) != MaxTombstones {
		t.Fatalf("%d tombstones, bound %d", len(p.tombs), MaxTombstones)
	}
	if _, ok := p.tombs["b0"]; ok {
		t.Fatal("the oldest tombstone was kept over newer ones")
	}
}

func TestSmoothingAndSnapshot(t *testing.T) {
	_, p, _ := upPool(t)
	r := rep("a", true)
	r.CPUUtil = 1
	p.Accept(r, from) // a's CPU EWMA: 0.5 -> 0.75 with alpha 0.5
	snap := p.Snapshot(nil)
	if len(snap) != 2 || snap[0].Name != "a" || snap[1].Name != "b" {
		t.Fatalf("snapshot order %+v", snap)
	}
	if snap[0].CPU != 0.75 || snap[0].CPUCount != 2 || snap[0].MemBytes != 1<<30 || !snap[0].HasMetrics {
		t.Fatalf("smoothed state %+v", snap[0])
	}
	snap[0].CPU = 99 // the snapshot is a copy
	if s, _ := p.Get("a"); s.CPU != 0.75 {
		t.Fatal("snapshot aliases pool state")
	}
}

func TestSNMPPathFailedPollCountsAsFailedCheck(t *testing.T) {
	c, p, _ := upPool(t)
	for i := 0; i < 3; i++ {
		c.Advance(5 * time.Second)
		p.Observe("b", Sample{CPUUtil: 0.2, HasCPU: true})
		p.CheckResult("b", Health{OK: false, Err: "snmp 127.0.0.1:161: timeout"})
	}
	if got := status(t, p, "b"); got != weights.StatusDown {
		t.Fatalf("3 failed polls: %v", got)
	}
}

// TestLateReportChangesNoState: a report of the boot last applied with a lower seq (UDP
// reordering, accepted once by the replay guard) is counted but must not undo what the newer
// report set. Reports of another boot are that boot's newest and apply.
func TestLateReportChangesNoState(t *testing.T) {
	type in struct {
		nonce, seq uint64
		ok         bool
		flags      report.Flags
		cpu        float64
	}
	tests := []struct {
		name  string
		steps []in
		want  weights.Status
		cpu   float64 // smoothed, alpha 0.5, from the 0.5 of upPool's reports
		late  uint64
	}{
		{"late undrained report after a drain", []in{{1, 7, true, report.FlagDrain, 0.5}, {1, 6, true, 0, 0.5}}, weights.StatusDrained, 0.5, 1},
		{"late report after leaving", []in{{1, 7, true, report.FlagLeaving, 0.5}, {1, 6, true, 0, 0.5}}, weights.StatusStale, 0.5, 1},
		{"late healthy report after the third failure", []in{{1, 5, false, 0, 0.5}, {1, 6, false, 0, 0.5}, {1, 7, false, 0, 0.5}, {1, 4, true, 0, 0.5}}, weights.StatusDown, 0.5, 1},
		{"late load does not move the average", []in{{1, 7, true, 0, 0.9}, {1, 6, true, 0, 0.1}}, weights.StatusUp, 0.7, 1},
		{"in order applies", []in{{1, 6, true, 0, 0.5}, {1, 7, true, report.FlagDrain, 0.9}}, weights.StatusDrained, 0.7, 0},
		{"a new boot applies whatever its seq", []in{{1, 7, true, report.FlagDrain, 0.5}, {2, 1, true, 0, 0.5}}, weights.StatusUp, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p, _ := upPool(t)
			before, _ := p.Get("a")
			for _, s := range tt.steps {
				c.Advance(time.Second)
				r := rep("a", s.ok)
				r.BootNonce, r.Seq, r.Flags, r.CPUUtil = s.nonce, s.seq, r.Flags|s.flags, s.cpu
				p.Accept(r, from)
			}
			got, _ := p.Get("a")
			if st := status(t, p, "a"); st != tt.want {
				t.Errorf("status %v, want %v", st, tt.want)
			}
			if got.CPU != tt.cpu {
				t.Errorf("smoothed cpu %v, want %v", got.CPU, tt.cpu)
			}
			if got.LateReports != tt.late || got.Reports != before.Reports+uint64(len(tt.steps)) {
				t.Errorf("late %d reports %d, want %d and %d (late reports are counted)", got.LateReports, got.Reports, tt.late, before.Reports+uint64(len(tt.steps)))
			}
		})
	}
}

// TestSignalsSmoothedAndAbsentNotZero: the service's own CPU and the CPU pressure are
// smoothed like CPU, and a sample without one makes it absent at once (a stale pidfile must not
// leave the weighting on an old value), after which it starts afresh.
func TestSignalsSmoothedAndAbsentNotZero(t *testing.T) {
	c := testutil.NewClock(testutil.Start)
	var trans []Transition
	p := newPool(c, &trans)
	sample := func(own float64, hasOwn bool, psi float64, hasPSI bool) Sample {
		return Sample{CPUUtil: 0.8, HasCPU: true, CPUCount: 2, MemBytes: 1 << 30,
			Signals: Signals{ServiceCPU: own, HasServiceCPU: hasOwn, CPUPressure: psi, HasPressure: hasPSI, PressureCgroup: true}}
	}
	steps := []struct {
		s        Sample
		own, psi float64
		hasOwn   bool
		hasPSI   bool
		names    string
	}{
		{sample(0.2, true, 0.1, true), 0.2, 0.1, true, true, "service_cpu,cpu_pressure"},
		{sample(0.4, true, 0.3, true), 0.3, 0.2, true, true, "service_cpu,cpu_pressure"}, // alpha 0.5
		{sample(0, false, 0.5, true), 0, 0.35, false, true, "cpu_pressure"},
		{sample(0.6, true, 0, false), 0.6, 0, true, false, "service_cpu"},                // own afresh, not 0.45
		{sample(0.6, true, 0.8, true), 0.6, 0.8, true, true, "service_cpu,cpu_pressure"}, // pressure afresh
		{sample(0.6, true, 2, true), 0.6, 0.9, true, true, "service_cpu,cpu_pressure"},   // clamped to 1 first
		{Sample{CPUUtil: 0.5, HasCPU: true}, 0, 0, false, false, "none"},
	}
	for i, st := range steps {
		p.Observe("a", st.s)
		s, _ := p.Get("a")
		g := s.Signals
		if g.HasServiceCPU != st.hasOwn || math.Abs(g.ServiceCPU-st.own) > 1e-12 || g.HasPressure != st.hasPSI ||
			math.Abs(g.CPUPressure-st.psi) > 1e-12 || g.Names() != st.names {
			t.Fatalf("step %d: signals %+v (%s), want service cpu %v (%v), pressure %v (%v), names %q",
				i, g, g.Names(), st.own, st.hasOwn, st.psi, st.hasPSI, st.names)
		}
	}
}

// TestAcceptCarriesVersion2Signals: a version-2 report's signals reach the state, and a
// version-1 report (no signals) leaves them absent rather than zero.
func TestAcceptCarriesVersion2Signals(t *testing.T) {
	_, p, _ := upPool(t)
	r := rep("a", true)
	r.Version, r.Signals = 2, report.SignalServiceCPU|report.SignalCPUPressure|report.SignalThrottled|report.SignalHealthLatency
	r.ServiceCPU, r.CPUPressure, r.Throttled = 0.3, 0.2, 0.1
	r.Seq = 100
	p.Accept(r, from)
	s, _ := p.Get("a")
	want := Signals{ServiceCPU: 0.3, HasServiceCPU: true, CPUPressure: 0.2, HasPressure: true, Throttled: 0.1, HasThrottled: true, HasHealthLatency: true}
	if s.Signals != want {
		t.Fatalf("signals %+v, want %+v", s.Signals, want)
	}
	v1 := rep("a", true)
	v1.Version, v1.Seq = 1, 101
	p.Accept(v1, from)
	if s, _ := p.Get("a"); s.Signals != (Signals{}) || s.Signals.Names() != "none" {
		t.Fatalf("after a version-1 report: %+v", s.Signals)
	}
}
