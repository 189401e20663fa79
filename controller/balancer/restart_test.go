package balancer

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"

	"flowweight/controller/config"
	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// staticPool is a controller with three located backends of declared capacities caps under
// the static policy, so every weight it computes follows from the capacities and the step
// limit alone.
func staticPool(t *testing.T, clk *testutil.Clock, keyFile string, caps ...float64) *Balancer {
	t.Helper()
	return staticPoolWith(t, clk, keyFile, Options{}, caps...)
}

// staticPoolWith is staticPool with opts (its Now is clk's).
func staticPoolWith(t *testing.T, clk *testutil.Clock, keyFile string, opts Options, caps ...float64) *Balancer {
	t.Helper()
	c := testConfig(t, `policy = "static"`)
	if keyFile != "" {
		c.Collector.KeyFile = keyFile
	}
	c.Services[0].Backends = nil
	for i, capacity := range caps {
		c.Services[0].Backends = append(c.Services[0].Backends, config.Backend{Name: fmt.Sprintf("be%d", i+1),
			IP: fmt.Sprintf("10.0.0.%d", i+1), Port: 80, Source: "probe", Capacity: capacity,
			MAC: fmt.Sprintf("02:00:00:00:00:%02x", i+1), SwitchPort: i + 1})
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	opts.Now = clk.Now
	b, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func reportAll(b *Balancer, clk *testutil.Clock) {
	for _, be := range b.Config().Services[0].Backends {
		b.pool.Accept(&report.Report{BackendID: be.Name, Flags: report.FlagHealthOK, CPUUtil: 0.3, CPUCount: 2,
			MemUtil: 0.2, MemBytes: 1 << 30, Time: clk.Now()}, netip.AddrPort{})
	}
}

// periods runs n periodic updates one second apart, each after a round of reports, and
// returns the weights applied after each.
func periods(b *Balancer, clk *testutil.Clock, n int) [][]uint16 {
	var out [][]uint16
	for range n {
		reportAll(b, clk)
		clk.Advance(time.Second)
		b.update(context.Background(), true)
		out = append(out, slices.Clone(b.services[0].applied))
	}
	return out
}

// TestReloadKickStepIsThePeriodsStep: a reload's kick that writes a step-limited move counts
// as that move. The next period continues from it; before, it repeated the same step, so the
// intermediate vector stood for up to two periods and looked settled (the cause of
// TestFaultControllerKilledMidRewrite's flakes).
func TestReloadKickStepIsThePeriodsStep(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b := staticPool(t, clk, "", 1, 1, 1)
	periods(b, clk, 12) // past warm-up
	if got := b.services[0].applied; !slices.Equal(got, []uint16{334, 333, 333}) {
		t.Fatalf("equal capacities: applied %v", got)
	}
	next := testConfig(t, "")
	next.Services[0].Backends = slices.Clone(b.Config().Services[0].Backends)
	next.Weighting = b.Config().Weighting
	next.Collector.KeyFile = b.Config().Collector.KeyFile
	for i, c := range []float64{1, 2, 4} {
		next.Services[0].Backends[i].Capacity = c
	}
	if err := b.Reload(next); err != nil {
		t.Fatal(err)
	}
	b.update(context.Background(), false) // the reload's kick
	kick := slices.Clone(b.services[0].applied)
	if slices.Equal(kick, []uint16{334, 333, 333}) {
		t.Fatal("the reload's kick wrote nothing")
	}
	after := periods(b, clk, 3)
	if slices.Equal(after[0], kick) {
		t.Fatalf("the period after the kick repeated the kick's step %v", kick)
	}
	want := []uint16{143, 286, 571}
	for i, w := range after {
		if !slices.Equal(w, want) {
			t.Fatalf("period %d after the kick: applied %v, want the static target %v (kick wrote %v)", i, w, want, kick)
		}
	}
}

// TestRestartStartsFromTheSwitchWeights: a controller restarted while the switches hold a
// group (the same weights on both) moves from those weights under the same step limit as the controller that wrote them,
// so both reach the same weights by the same path. Before, the restarted one jumped straight
// to the target.
func TestRestartStartsFromTheSwitchWeights(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	running := staticPool(t, clk, "", 1, 1, 1)
	periods(running, clk, 12)
	held := slices.Clone(running.services[0].applied)

	// The path of a controller that never stopped: a reload to 1:2:4, then periods.
	next := staticPool(t, clk, running.Config().Collector.KeyFile, 1, 2, 4).Config()
	if err := running.Reload(next); err != nil {
		t.Fatal(err)
	}
	want := periods(running, clk, 3)

	// A controller started with 1:2:4 while the switch holds the old weights.
	restarted := staticPool(t, clk, running.Config().Collector.KeyFile, 1, 2, 4)
	restarted.update(context.Background(), false) // the connect's kick: nobody reported, hold
	if !restarted.services[0].hold {
		t.Fatal("a freshly started controller with no reports is not in its start-up hold")
	}
	// Two switches the old controller programmed, with the old weights: their syncers read
	// them back and find the seed (one switch alone is not enough, TestSeedNotFromOneSwitch).
	conn, _ := holdSwitch(t, restarted, 1, held)
	holdSwitch(t, restarted, 2, held)
	_, svcs := desiredFor(restarted, 1)
	svcs[0].Backends = slices.Clone(svcs[0].Backends)
	for i := range svcs[0].Backends {
		svcs[0].Backends[i].Weight = held[i]
	}
	onSwitch := dataplane.Desired(svcs, dataplane.DefaultOptions())
	restarted.update(context.Background(), false) // the syncer's request: the seed is taken
	if g := conn.State().Groups; len(g) != 1 || !g[0].Equal(onSwitch.Groups[0]) {
		t.Fatalf("the held group was rewritten during the start-up hold: %v", g)
	}
	// The switch holds slots of its table (64 for a switch of unknown version): the seed gives
	// each backend its held share to within one slot.
	seed := restarted.services[0].seed
	var slots float64
	for _, w := range seed {
		slots += float64(w)
	}
	for i := range held {
		if d := float64(seed[i])/slots - float64(held[i])/1000; len(seed) != len(held) || d > 1/slots || d < -1/slots {
			t.Fatalf("seed from the switch %v, want the shares of %v to within a slot", seed, held)
		}
	}
	restarted.startupUntil = clk.Now() // the hold ends with the first reports
	got := periods(restarted, clk, 3)
	// The switch holds its shares to a slot (22/21/21 of 64) where the running controller kept
	// exact ones (1/3 each), so the restarted path may differ from the running one by up to a
	// slot's worth of weight (1000/64 units here; 1000/256 on Open vSwitch 2.17 and later).
	// The end is the same, and the first step is a step, not the jump to the target.
	slot := int(math.Ceil(1000 / slots))
	for i := range want {
		for j := range want[i] {
			if d := int(got[i][j]) - int(want[i][j]); d < -slot || d > slot {
				t.Fatalf("restarted controller's path %v, running controller's %v (switch held %v)", got, want, held)
			}
		}
	}
	if last := len(want) - 1; !slices.Equal(got[last], want[last]) {
		t.Fatalf("restarted controller ended at %v, running controller at %v", got[last], want[last])
	}
	if slices.Equal(got[0], want[len(want)-1]) {
		t.Fatalf("restart jumped to the target %v instead of stepping from %v", got[0], held)
	}
}

// TestHoldWaitsForTheFirstReadBack: a restarted controller whose backends all reported before
// its switch answered the read-back keeps the hold until it has, so the seed is not skipped
// (before, the hold ended with the reports and the first write jumped to the target).
func TestHoldWaitsForTheFirstReadBack(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b := staticPool(t, clk, "", 1, 2, 4)
	conn := switchsync.NewFakeConn(1)
	conn.Stall(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sy := switchsync.New(switchsync.Config{Conn: conn, Up: upward{b}})
	b.mu.Lock()
	b.switches[1] = sy
	b.mu.Unlock()
	go sy.Run(ctx)
	reportAll(b, clk)
	b.update(ctx, false)
	// Settled: the syncer is waiting on the switch (before, the test could unstall it first or
	// not, and when not, the read-back waited out its 10 s timeout and the test failed).
	testutil.Until(t, 10*time.Second, func() bool { return conn.Stalled() > 0 }, "the syncer waits on the stalled switch")
	if !b.services[0].hold || b.services[0].applied != nil {
		t.Fatalf("every backend reported but the switch was not read back: hold %v, applied %v", b.services[0].hold, b.services[0].applied)
	}
	conn.Stall(false)
	b.update(ctx, false)
	testutil.Until(t, 10*time.Second, func() bool { return sy.Status().Known }, "switch read back")
	b.update(ctx, false)
	if b.services[0].hold || b.services[0].applied == nil {
		t.Fatalf("switch read back (empty: nothing to seed from), all reported: hold %v, applied %v", b.services[0].hold, b.services[0].applied)
	}
}
