package balancer

import (
	"net/netip"
	"testing"
	"time"

	"flowweight/collector"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// TestStateEventsRateLimited: a probe toggling its drain flag with every report (2,000 in
// 2 s) changes its backend's state each time and the metrics count each change, but the
// event list gets collector.TransitionBurst of them. Every change still asks for an early
// update (a real failure after a flap must not wait a period); the update loop spaces the
// updates those asks cause (TestKickFloodIsSpaced).
func TestStateEventsRateLimited(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b, err := New(testConfig(t, ""), Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	kicks := 0
	drainKick := func() {
		select {
		case <-b.kick:
			kicks++
		default:
		}
	}
	drainKick() // install's
	kicks = 0
	const toggles = 2000
	for i := range toggles + 1 {
		clk.Advance(time.Millisecond)
		r := &report.Report{BackendID: "a", BootNonce: 1, Seq: uint64(i + 1), Flags: report.FlagHealthOK,
			CPUUtil: 0.2, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30, Time: clk.Now()}
		if i%2 == 1 {
			r.Flags |= report.FlagDrain
		}
		b.pool.Accept(r, netip.AddrPort{})
		drainKick()
	}
	events := 0
	for _, e := range b.View().Events() {
		if e.Kind == "state" && e.Backend == "a" {
			events++
		}
	}
	if events != collector.TransitionBurst {
		t.Errorf("%d state events for %d changes, want %d", events, toggles+1, collector.TransitionBurst)
	}
	if kicks != toggles+1 {
		t.Errorf("%d early updates asked for %d changes, want one each", kicks, toggles+1)
	}
	counted := counterValue(t, b.metrics.transitions.WithLabelValues("drained")) + counterValue(t, b.metrics.transitions.WithLabelValues("up"))
	if counted != toggles+1 {
		t.Errorf("transitions counted %v, want all %d", counted, toggles+1)
	}
}
