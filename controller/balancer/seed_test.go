package balancer

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/state"
	"flowweight/controller/switchsync"
	"flowweight/internal/testutil"
)

// holdSwitch connects a fake switch dpid to b that holds the first service's group with
// weights (in config order; nil: an empty switch), and waits until its syncer has read it back.
func holdSwitch(t *testing.T, b *Balancer, dpid uint64, weights []uint16) (*switchsync.FakeConn, *switchsync.Syncer) {
	t.Helper()
	conn := switchsync.NewFakeConn(dpid)
	if weights != nil {
		_, svcs := desiredFor(b, dpid)
		svcs[0].Backends = slices.Clone(svcs[0].Backends)
		for i := range svcs[0].Backends {
			svcs[0].Backends[i].Weight = weights[i]
		}
		onSwitch := dataplane.Desired(svcs, dataplane.DefaultOptions())
		conn.Edit(func(sw *dataplane.FakeSwitch) {
			if err := sw.ApplyPlan(dataplane.Plan(onSwitch, dataplane.State{})); err != nil {
				t.Fatal(err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	sy := switchsync.New(switchsync.Config{Conn: conn})
	b.mu.Lock()
	b.switches[dpid] = sy
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { sy.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	sy.Offer(b.board.Latest().Intent)
	testutil.Until(t, 10*time.Second, func() bool {
		st := sy.Status()
		return st.Known && (weights == nil || st.Seeds[b.services[0].cfg.Name] != nil)
	}, "switch read back")
	return conn, sy
}

// shares is w as shares of its sum.
func shares(w []uint16) []float64 {
	sum := 0.0
	for _, x := range w {
		sum += float64(x)
	}
	out := make([]float64, len(w))
	for i, x := range w {
		out[i] = float64(x) / sum
	}
	return out
}

// near reports whether two weight vectors have the same shares to within tol.
func near(a, b []uint16, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	sa, sb := shares(a), shares(b)
	for i := range sa {
		if d := sa[i] - sb[i]; d > tol || d < -tol {
			return false
		}
	}
	return true
}

// TestSeedNotFromOneSwitch: a fake switch with the lowest datapath id holding 940/30/30
// beside a real one at 334/333/333 does not seed a restarted controller: they disagree, so
// it starts from the weights it computes (here the static 1:1:1). Before, the lowest
// datapath id won and every switch was rewritten toward the fake's weights.
func TestSeedNotFromOneSwitch(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b := staticPool(t, clk, "", 1, 1, 1)
	b.update(context.Background(), false)
	holdSwitch(t, b, 1, []uint16{940, 30, 30})   // the fake
	holdSwitch(t, b, 2, []uint16{334, 333, 333}) // the real one
	b.update(context.Background(), false)
	if s := b.services[0]; s.seed != nil {
		t.Fatalf("seeded from %s: %v", s.seedFrom, s.seed)
	}
	b.startupUntil = clk.Now() // the hold ends with the first reports
	got := periods(b, clk, 3)
	for i, w := range got {
		if !slices.Equal(w, []uint16{334, 333, 333}) {
			t.Fatalf("update %d applied %v, want the computed 334/333/333 (all: %v)", i, w, got)
		}
	}
}

// TestSeedFromAgreeingSwitches: two of three switches hold the same weights; the third, with
// the lowest datapath id, holds others. The seed is the majority's.
func TestSeedFromAgreeingSwitches(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b := staticPool(t, clk, "", 1, 1, 1)
	b.update(context.Background(), false)
	holdSwitch(t, b, 1, []uint16{940, 30, 30})
	holdSwitch(t, b, 2, []uint16{200, 300, 500})
	holdSwitch(t, b, 3, []uint16{200, 300, 500})
	b.update(context.Background(), false)
	s := b.services[0]
	if !near(s.seed, []uint16{200, 300, 500}, 1.0/64) || !strings.Contains(s.seedFrom, "2 of 3 agree") {
		t.Fatalf("seed %v from %q, want the shares of 200/300/500 from 2 of 3 switches", s.seed, s.seedFrom)
	}
}

// TestSeedFromTheStateFileFirst: the weights a controller wrote are saved in its state file,
// and the next start seeds from them even though the switches agree on others.
func TestSeedFromTheStateFileFirst(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	path := filepath.Join(t.TempDir(), "controller.state")
	first := staticPoolWith(t, clk, "", Options{StatePath: path}, 1, 2, 5)
	periods(first, clk, 12)
	wrote := slices.Clone(first.services[0].applied)
	first.saveState()
	f, err := state.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Weights["web"]; len(got) != 3 || got["be1"] != wrote[0] || got["be3"] != wrote[2] {
		t.Fatalf("state file weights %v, want the applied %v", f.Weights, wrote)
	}

	next := staticPoolWith(t, clk, first.Config().Collector.KeyFile, Options{StatePath: path}, 1, 1, 1)
	next.update(context.Background(), false)
	holdSwitch(t, next, 1, []uint16{334, 333, 333})
	holdSwitch(t, next, 2, []uint16{334, 333, 333})
	next.update(context.Background(), false)
	if s := next.services[0]; !slices.Equal(s.seed, wrote) || s.seedFrom != seedFromState {
		t.Fatalf("seed %v from %q, want the state file's %v", s.seed, s.seedFrom, wrote)
	}
}

// TestAgreedSeed: the rule itself, by case.
func TestAgreedSeed(t *testing.T) {
	a, b := []uint16{10, 20, 34}, []uint16{60, 2, 2}
	for _, tc := range []struct {
		name          string
		held          [][]uint16
		authenticated bool
		want          []uint16
		why           string
	}{
		{name: "one switch", held: [][]uint16{a}, why: "1 of 1"},
		{name: "one authenticated switch", held: [][]uint16{a}, authenticated: true, want: a},
		{name: "two agree", held: [][]uint16{a, a}, want: a},
		{name: "two disagree", held: [][]uint16{b, a}, why: "1 of 2"},
		{name: "two of three", held: [][]uint16{b, a, a}, want: a},
		{name: "two of four", held: [][]uint16{b, a, a, nil}, why: "2 of 4"},
		{name: "one read of two", held: [][]uint16{a, nil}, why: "1 of 2"},
		{name: "authenticated, one of two not read", held: [][]uint16{a, nil}, authenticated: true, why: "needs all of them"},
		{name: "authenticated majority", held: [][]uint16{b, a, a}, authenticated: true, want: a},
		{name: "none holds the group", held: [][]uint16{nil, nil}, why: "none of the 2"},
		{name: "no switch", why: "none of the 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _, why, ok := agreedSeed(tc.held, tc.authenticated)
			if ok != (tc.want != nil) || !slices.Equal(w, tc.want) {
				t.Fatalf("agreedSeed = %v, %v (%s); want %v", w, ok, why, tc.want)
			}
			if !strings.Contains(why, tc.why) {
				t.Fatalf("why %q, want it to say %q", why, tc.why)
			}
		})
	}
}

// TestStateFileFollowsTheWeights: newly applied weights reach the state file at the next
// period, not only after StateEvery: a controller killed then restarts from the weights the
// switches hold, not from ones a minute older.
func TestStateFileFollowsTheWeights(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	path := filepath.Join(t.TempDir(), "controller.state")
	b := staticPoolWith(t, clk, "", Options{StatePath: path, StateEvery: time.Hour}, 1, 2, 5)
	b.saveState()
	changed := 0
	for i := range 8 {
		if i == 4 { // new capacities: the weights move again, by steps
			next := staticPool(t, clk, b.Config().Collector.KeyFile, 4, 2, 1).Config()
			if err := b.Reload(next); err != nil {
				t.Fatal(err)
			}
		}
		before := slices.Clone(b.services[0].applied)
		periods(b, clk, 1)
		maybeSaveState(b)
		applied := b.services[0].applied
		if !slices.Equal(before, applied) {
			changed++
		}
		f, err := state.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		ws := f.Weights["web"]
		if got := []uint16{ws["be1"], ws["be2"], ws["be3"]}; !slices.Equal(got, applied) {
			t.Fatalf("state file holds %v after a period that applied %v", got, applied)
		}
	}
	if changed < 2 {
		t.Fatalf("the weights changed %d times: the test shows nothing", changed)
	}
}
