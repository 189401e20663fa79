package balancer

import (
	"context"
	"testing"
	"time"

	"flowweight/collector"
	"flowweight/controller/view"
	"flowweight/weights"
)

// TestEveryTransitionKicks: a state change asks for an early update even when the log budget
// has made it quiet (not logged, no event): a probe that flapped earlier must not leave its
// backend's next real failure, or recovery, waiting a whole update period for the switch.
func TestEveryTransitionKicks(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		kick := make(chan struct{}, 1)
		events := view.NewLog(10)
		onTransition(NewMetrics(), events, kick)(collector.Transition{Time: time.Now(), Backend: "a",
			From: weights.StatusUp, To: weights.StatusDown, Reason: "refused", Quiet: quiet})
		select {
		case <-kick:
		default:
			t.Errorf("quiet=%v: no kick", quiet)
		}
		if n := len(events.List()); (n == 1) == quiet {
			t.Errorf("quiet=%v: %d events, want one only when logged", quiet, n)
		}
	}
}

// TestKickFloodIsSpaced: kicks as fast as they can come (a flapping probe) run kicked updates
// at most one per minKickGap, not one per kick. The bound is an upper one, so a slow machine
// only runs fewer.
func TestKickFloodIsSpaced(t *testing.T) {
	b, err := New(testConfig(t, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq := func() uint64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.seq
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		b.updateLoop(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	before := seq()
	start := time.Now()
	const flood = 300 * time.Millisecond
	for kicks := 0; kicks < 1_000_000 && time.Since(start) < flood; kicks++ {
		b.Kick()
	}
	elapsed := time.Since(start)
	cancel()
	<-done
	updates := seq() - before
	// One kicked update per gap, one more at the start, and the periodic ticks (none within
	// the default 5 s period, but counted in case).
	most := uint64(elapsed/minKickGap) + 2 + uint64(elapsed/b.Config().Controller.UpdatePeriod)
	if updates > most {
		t.Errorf("%d updates in %v of kicks, want at most %d (one per %v)", updates, elapsed.Round(time.Millisecond), most, minKickGap)
	}
	if updates == 0 {
		t.Error("no kicked update at all")
	}
}
