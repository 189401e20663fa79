package switchsync

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/internal/testutil"
)

func intentOf(seq, gen uint64, readback time.Duration, services ...intent.Service) *intent.Intent {
	owned := map[uint32]bool{}
	for _, s := range services {
		owned[s.GroupID] = true
	}
	return (&intent.Intent{Seq: seq, Gen: gen, Owned: owned, Normal: true, BarrierTimeout: time.Second,
		ReadbackPeriod: readback, Services: services}).Build()
}

func start(t *testing.T, conn *FakeConn, cfg Config) *Syncer {
	t.Helper()
	cfg.Conn = conn
	if cfg.locate == nil {
		cfg.locate = locateAll
	}
	s := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

func want(in *intent.Intent, dpid uint64) dataplane.State {
	st, _ := Desired(in, dpid, dataplane.OVSVersion{}, locateAll)
	return st
}

// TestSyncerFollowsTheLatestIntent: the switch ends at the last intent offered, and an
// intent of the same generation plans nothing.
func TestSyncerFollowsTheLatestIntent(t *testing.T) {
	conn := NewFakeConn(1)
	s := start(t, conn, Config{})
	in := intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500))
	s.Offer(in)
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == 1 }, "first intent applied")
	if !conn.State().Equal(want(in, 1)) {
		t.Fatal("switch differs from the first intent")
	}
	for seq := uint64(2); seq <= 20; seq++ { // offered faster than applied: the last wins
		s.Offer(intentOf(seq, seq, time.Hour, web("web", 5, nil, uint16(1000-seq*10), uint16(seq*10))))
	}
	last := intentOf(20, 20, time.Hour, web("web", 5, nil, 800, 200))
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == 20 }, "last intent applied")
	if !conn.State().Equal(want(last, 1)) {
		t.Fatal("switch differs from the last intent")
	}
	applies := conn.Applies()
	s.Offer(intentOf(21, 20, time.Hour, web("web", 5, nil, 800, 200)))
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == 21 }, "same-generation intent taken")
	if conn.Applies() != applies {
		t.Errorf("an intent of the same generation was applied again (%d applies, before %d)", conn.Applies(), applies)
	}
}

// TestSyncerRepairsDrift: someone deletes our forwarding flows; the next read-back finds
// it and puts them back.
func TestSyncerRepairsDrift(t *testing.T) {
	conn := NewFakeConn(1)
	var drift, events atomic.Int32
	s := start(t, conn, Config{Up: eventFunc(func(kind, _, _ string) {
		events.Add(1)
		if kind == "drift" {
			drift.Add(1)
		}
	})})
	in := intentOf(1, 1, 5*time.Millisecond, web("web", 5, nil, 500, 500))
	s.Offer(in)
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == 1 && conn.State().Equal(want(in, 1)) }, "intent applied")
	conn.Edit(func(sw *dataplane.FakeSwitch) {
		st := sw.State()
		var flows []dataplane.Flow
		for _, f := range st.Flows {
			if _, _, kind, ok := dataplane.ParseCookie(f.Cookie); ok && kind == dataplane.KindForward {
				continue
			}
			flows = append(flows, f)
		}
		*sw = *dataplane.NewFakeSwitch()
		st.Flows = flows
		if err := sw.ApplyPlan(dataplane.Plan(st, dataplane.State{})); err != nil {
			t.Error(err)
		}
	})
	testutil.Until(t, 20*time.Second, func() bool { return drift.Load() > 0 && conn.State().Equal(want(in, 1)) }, "drift repaired")
}

// TestStalledSwitchDelaysOnlyItself: one switch stops answering; the others still reach every
// intent, and Offer never blocks.
func TestStalledSwitchDelaysOnlyItself(t *testing.T) {
	stalled := NewFakeConn(99)
	stalled.Stall(true)
	slow := start(t, stalled, Config{})
	var fast []*Syncer
	for dpid := uint64(1); dpid <= 5; dpid++ {
		fast = append(fast, start(t, NewFakeConn(dpid), Config{}))
	}
	for seq := uint64(1); seq <= 5; seq++ {
		in := intentOf(seq, seq, time.Hour, web("web", 5, nil, uint16(500+seq), uint16(500-seq)))
		offered := make(chan struct{})
		go func() {
			slow.Offer(in)
			for _, s := range fast {
				s.Offer(in)
			}
			close(offered)
		}()
		select {
		case <-offered:
		case <-time.After(10 * time.Second):
			t.Fatal("Offer blocked behind a stalled switch")
		}
		for _, s := range fast {
			testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == seq }, "fast switches at the intent")
		}
	}
	if slow.Status().Seq != 0 {
		t.Errorf("the stalled switch reports intent %d applied", slow.Status().Seq)
	}
}

// TestSyncerEndsWithItsSession: Run returns when the session ends.
func TestSyncerEndsWithItsSession(t *testing.T) {
	conn := NewFakeConn(1)
	s := New(Config{Conn: conn})
	done := make(chan struct{})
	go func() { s.Run(context.Background()); close(done) }()
	s.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 1000)))
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == 1 }, "applied")
	conn.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running after its session ended")
	}
}

// TestSyncerReadsCountersOncePerPeriod: a periodic intent that asks for counters gets them
// read (at the switch's offset within the spread), and the second read publishes rates.
func TestSyncerReadsCountersOncePerPeriod(t *testing.T) {
	conn := NewFakeConn(1)
	clock := time.Unix(1e9, 0)
	var mu sync.Mutex
	s := start(t, conn, Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	for seq := uint64(1); seq <= 2; seq++ {
		mu.Lock()
		clock = clock.Add(time.Second)
		mu.Unlock()
		in := intentOf(seq, 1, time.Hour, web("web", 5, nil, 500, 500))
		in.ReadCounters, in.CounterSpread = true, 20*time.Millisecond
		s.Offer(in)
		testutil.Until(t, 20*time.Second, func() bool { return s.Status().CountedAt.Equal(clock) }, "counters read")
	}
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().RatesAt; return v, !v.IsZero() }, "rates from two reads")
	st := s.Status()
	if len(st.Rates) == 0 {
		t.Fatalf("rates %v: want one per flow of ours", st.Rates)
	}
}

func TestCounterOffsetsSpread(t *testing.T) {
	const spread = 500 * time.Millisecond
	seen := map[time.Duration]bool{}
	for dpid := uint64(1); dpid <= 100; dpid++ {
		d := counterOffset(dpid, spread)
		if d < 0 || d >= spread {
			t.Fatalf("switch %d: offset %v outside [0,%v)", dpid, d, spread)
		}
		if d != counterOffset(dpid, spread) {
			t.Fatal("offset not fixed per switch")
		}
		seen[d/(spread/10)] = true
	}
	if len(seen) < 8 {
		t.Errorf("100 switches' offsets fall in %d of 10 tenths of the spread: not spread", len(seen))
	}
	if counterOffset(7, 0) != 0 {
		t.Error("no spread: read at once")
	}
}

// eventFunc is an Upward that records events with a function and ignores kicks.
type eventFunc func(kind, service, text string)

func (f eventFunc) Kick()                            {}
func (f eventFunc) Event(kind, service, text string) { f(kind, service, text) }
