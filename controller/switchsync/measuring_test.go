package switchsync

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/ofwire"
	"flowweight/internal/testutil"
)

// syncBuffer is a log sink safe for the syncer's goroutine and the test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSyncerMeasuresShares drives a syncer against the fake switch's group counters: the
// first reading is only a base; traffic between readings lands on the backends whose buckets
// counted it; the counts before a reweight are read before the rewrite and kept, and the delta
// across it is discarded; a group re-created behind the syncer's back (counters from zero)
// discards its delta and logs why once; the window forgets what is older than MeasureWindow.
func TestSyncerMeasuresShares(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) time.Time { return time.Unix(0, clock.Add(int64(d))) }
	var logs syncBuffer
	conn := NewFakeConn(1)
	s := start(t, conn, Config{Now: now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	measuredAt := func(at time.Time) Measured {
		t.Helper()
		return testutil.Eventually(t, 20*time.Second, func() (Measured, bool) {
			st := s.Status()
			return st.Measured["web"], !st.MeasuredAt.Before(at)
		}, "a reading at %s", at)
	}
	hit := func(counts ...uint64) {
		t.Helper()
		conn.Edit(func(sw *dataplane.FakeSwitch) {
			for k, n := range counts {
				if err := sw.Hit(5, k, n); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	check := func(what string, m Measured, total uint64, counts map[string]uint64, skipped int) {
		t.Helper()
		if m.Total != total || m.Skipped != skipped || m.Unit != UnitConnections {
			t.Fatalf("%s: total %d skipped %d unit %q, want %d, %d, connections (%+v)", what, m.Total, m.Skipped, m.Unit, total, skipped, m)
		}
		for name, n := range counts {
			if b := m.Backends[name]; b.Count != n || (total > 0 && b.Share != float64(n)/float64(total)) {
				t.Fatalf("%s: backend %s counted %d (share %.4f), want %d", what, name, b.Count, b.Share, n)
			}
		}
	}

	s.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))
	check("first reading", measuredAt(t0), 0, map[string]uint64{"a": 0, "b": 0}, 0)
	if g := conn.State().Groups[0]; len(g.Buckets) != 3 {
		t.Fatalf("want the 50/50 layout's three buckets (a, b, a's lent slot): %v", g)
	}

	hit(30, 20, 1)
	at := advance(2 * time.Second)
	s.Offer(intentOf(2, 1, time.Hour, web("web", 5, nil, 500, 500)))
	m := measuredAt(at)
	check("after traffic", m, 51, map[string]uint64{"a": 31, "b": 20}, 0)
	if p := m.Backends["a"].Planned; p != 0.5 {
		t.Fatalf("planned share of a %.4f, want 0.5", p)
	}

	// Reweight: the 10 counted since are read before the rewrite; the delta across it is
	// discarded (the fake switch starts a modified group's counters from zero).
	hit(10, 0, 0)
	at = advance(2 * time.Second)
	s.Offer(intentOf(3, 2, time.Hour, web("web", 5, nil, 800, 200)))
	measuredAt(at)
	// The reading before the rewrite and the base after it carry the same clock: wait for the
	// write and the base.
	testutil.Until(t, 20*time.Second, func() bool { st := s.Status(); return st.Seq == 3 && st.Measured["web"].Skipped == 1 },
		"reweight applied and its delta discarded")
	check("across a reweight", s.Status().Measured["web"], 61, map[string]uint64{"a": 41, "b": 20}, 1)

	hit(0, 40, 0) // the 80/20 layout's buckets: a, b, a's lent slot
	at = advance(2 * time.Second)
	s.Offer(intentOf(4, 2, time.Hour, web("web", 5, nil, 800, 200)))
	m = measuredAt(at)
	check("after the reweight", m, 101, map[string]uint64{"a": 41, "b": 60}, 1)
	in := intentOf(4, 2, time.Hour, web("web", 5, nil, 800, 200))
	split, err := dataplane.SplitOf(Located(in, 1, locateAll)[0], conn.State().Groups[0], dataplane.OVSVersion{})
	if err != nil {
		t.Fatal(err)
	}
	// 61 counted under 50/50, 40 under the 80/20 table (13 of 64 slots for b).
	if p, want := m.Backends["b"].Planned, (61*0.5+40*split.Planned(1))/101; p != want || split.Planned(1) != 13.0/64 {
		t.Fatalf("planned share of b over the window %.6f, want the count-weighted %.6f (b's table share %.4f)", p, want, split.Planned(1))
	}
	if c := m.Cumulative; c["a"] != 41 || c["b"] != 60 {
		t.Fatalf("cumulative %v", c)
	}

	// Someone re-creates the group: its counters and duration start again from zero.
	hit(5, 5, 0)
	conn.Edit(func(sw *dataplane.FakeSwitch) { sw.Recreate(5) })
	hit(1, 1, 0)
	for i := range 2 {
		at = advance(2 * time.Second)
		s.Offer(intentOf(uint64(5+i), 2, time.Hour, web("web", 5, nil, 800, 200)))
		measuredAt(at)
	}
	check("after a re-creation", s.Status().Measured["web"], 101, map[string]uint64{"a": 41, "b": 60}, 2)
	if n := strings.Count(logs.String(), "re-created"); n != 1 {
		t.Fatalf("the re-creation was logged %d times, want once:\n%s", n, logs.String())
	}

	// A minute later the window holds only the latest sample.
	hit(3, 0, 0)
	at = advance(MeasureWindow)
	s.Offer(intentOf(7, 2, time.Hour, web("web", 5, nil, 800, 200)))
	check("a window later", measuredAt(at), 3, map[string]uint64{"a": 3, "b": 0}, 0)
}

// TestSampleOfDiscards: a reading that cannot be compared with the group as held is discarded
// with its reason, and the next reading starts a new base.
func TestSampleOfDiscards(t *testing.T) {
	in := intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500))
	svc := Located(in, 1, locateAll)[0]
	g := want(in, 1).Groups[0] // three buckets: a, b, a's lent slot
	other := g
	other.Buckets = append(slices.Clone(g.Buckets[:2]), dataplane.Bucket{Weight: 1, Actions: "\x00\x00\x00\x10"})
	t0 := time.Unix(5000, 0)
	stats := func(age uint32, n ...uint64) map[uint32]ofwire.GroupStats {
		gs := ofwire.GroupStats{GroupID: 5, DurationSec: age}
		for _, v := range n {
			gs.Buckets = append(gs.Buckets, ofwire.BucketCounter{Packets: v})
		}
		return map[uint32]ofwire.GroupStats{5: gs}
	}
	cases := []struct {
		name   string
		held   dataplane.Group
		first  map[uint32]ofwire.GroupStats
		second map[uint32]ofwire.GroupStats
		why    string // "" accepted
	}{
		{"accepted", g, stats(1, 1, 2, 3), stats(2, 2, 4, 6), ""},
		{"group missing from the reply", g, stats(1, 1, 2, 3), map[uint32]ofwire.GroupStats{}, "missing from the switch's group counters"},
		{"reply lags the layout", g, stats(1, 1, 2, 3), stats(2, 2, 4), "the reply lags the layout"},
		{"counters reset", g, stats(1, 1, 2, 3), stats(2, 0, 0, 0), "went backwards"},
		{"re-created", g, stats(9, 1, 2, 3), stats(1, 1, 2, 3), "re-created"},
		{"bucket to no backend", other, stats(1, 1, 2, 3), stats(2, 2, 4, 6), "sends to no backend"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(Config{Conn: NewFakeConn(1)})
			held := map[uint32]dataplane.Group{5: c.held}
			if sm, why := s.sampleOf(svc, held, c.first, nil, t0); sm != nil || (why != "" && c.held.Equal(g)) {
				t.Fatalf("first reading: %v, %q; want only a base", sm, why)
			}
			sm, why := s.sampleOf(svc, held, c.second, nil, t0.Add(time.Second))
			if (c.why == "") != (why == "") || !strings.Contains(why, c.why) || (why == "") != (sm != nil) {
				t.Fatalf("second reading: %v, %q; want reason %q", sm, why, c.why)
			}
			if sm != nil && (sm.Counts["a"] != 1+3 || sm.Counts["b"] != 2) {
				t.Fatalf("counts %v, want a 4 (two buckets), b 2", sm.Counts)
			}
		})
	}
}

// TestMeasuringBoundedUnderFastRewrites: rewrites faster than measureEvery (the fast loop)
// read no counters between them; a rewrite after a second reads them right before and right
// after the write, and keeps what was counted before it.
func TestMeasuringBoundedUnderFastRewrites(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Unix(20_000, 0).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	conn := NewFakeConn(1)
	s := start(t, conn, Config{Now: now})
	s.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))
	testutil.Until(t, 20*time.Second, func() bool { return s.Status().Seq == 1 && !s.Status().MeasuredAt.IsZero() }, "first reading")
	reads := conn.GroupStatsReads()
	for seq := uint64(2); seq <= 21; seq++ {
		s.Offer(intentOf(seq, seq, time.Hour, web("web", 5, nil, uint16(300+seq), 500)))
		testutil.Until(t, 20*time.Second, func() bool { return s.Status().Seq == seq }, "reweight %d applied", seq)
	}
	if got := conn.GroupStatsReads(); got != reads {
		t.Fatalf("20 rewrites within a second read the counters %d times, want none", got-reads)
	}
	conn.Edit(func(sw *dataplane.FakeSwitch) {
		if err := sw.Hit(5, 1, 7); err != nil {
			t.Error(err)
		}
	})
	clock.Add(int64(measureEvery))
	s.Offer(intentOf(22, 22, time.Hour, web("web", 5, nil, 900, 100)))
	testutil.Until(t, 20*time.Second, func() bool { return s.Status().Seq == 22 && conn.GroupStatsReads() == reads+2 },
		"a rewrite after a second: one reading before the write, one after")
	// The base was the first reading (every rewrite since moved the epoch, but no reading
	// saw it): that delta is discarded, the 7 counted are lost with it. The next ones count.
	conn.Edit(func(sw *dataplane.FakeSwitch) {
		if err := sw.Hit(5, 1, 5); err != nil {
			t.Error(err)
		}
	})
	clock.Add(int64(measureEvery))
	s.Offer(intentOf(23, 22, time.Hour, web("web", 5, nil, 900, 100)))
	testutil.Until(t, 20*time.Second, func() bool { return s.Status().Measured["web"].Backends["b"].Count == 5 }, "counted after the write")
	if got := conn.GroupStatsReads(); got != reads+3 {
		t.Fatalf("%d readings since the fast rewrites, want 3", got-reads)
	}
}

// TestSampleOfPinned: with client affinity a reading holds the table-8 flows' counters beside
// the buckets; their delta is each backend's pinned connections (in Counts too), and a
// pinned counter that cannot be compared discards the whole delta with its reason.
func TestSampleOfPinned(t *testing.T) {
	w := web("web", 5, nil, 500, 500)
	w.AffinityTimeout = 10
	in := intentOf(1, 1, time.Hour, w)
	svc := Located(in, 1, locateAll)[0]
	g := want(in, 1).Groups[0]
	t0 := time.Unix(5000, 0)
	groups := func(age uint32, n ...uint64) map[uint32]ofwire.GroupStats {
		gs := ofwire.GroupStats{GroupID: 5, DurationSec: age}
		for _, v := range n {
			gs.Buckets = append(gs.Buckets, ofwire.BucketCounter{Packets: v})
		}
		return map[uint32]ofwire.GroupStats{5: gs}
	}
	hit := func(backend uint16, age uint32, n uint64) dataplane.FlowCounter {
		return dataplane.FlowCounter{Cookie: dataplane.MakeCookie(5, backend, dataplane.KindAffinityPinned), Packets: n, DurationSec: age}
	}
	cases := []struct {
		name          string
		first, second []dataplane.FlowCounter
		why           string // "" accepted
	}{
		{"accepted", []dataplane.FlowCounter{hit(0, 100, 10), hit(1, 100, 0)}, []dataplane.FlowCounter{hit(0, 101, 40), hit(1, 101, 2)}, ""},
		{"pinned counter backwards", []dataplane.FlowCounter{hit(0, 100, 10)}, []dataplane.FlowCounter{hit(0, 101, 4)}, "went backwards"},
		{"affinity flow re-created", []dataplane.FlowCounter{hit(0, 100, 10)}, []dataplane.FlowCounter{hit(0, 0, 12)}, ""},
		{"unknown backend", []dataplane.FlowCounter{hit(0, 100, 10)}, []dataplane.FlowCounter{hit(7, 101, 12)}, "backend index 7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(Config{Conn: NewFakeConn(1)})
			held := map[uint32]dataplane.Group{5: g}
			if sm, why := s.sampleOf(svc, held, groups(100, 1, 2, 3), c.first, t0); sm != nil || why != "" {
				t.Fatalf("first reading: %v, %q; want only a base", sm, why)
			}
			sm, why := s.sampleOf(svc, held, groups(101, 2, 4, 6), c.second, t0.Add(time.Second))
			if c.name == "affinity flow re-created" {
				// Its duration went back: the delta is discarded (the group's did not).
				if sm != nil || why == "" {
					t.Fatalf("re-created flow: %v, %q; want the delta discarded", sm, why)
				}
				return
			}
			if (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
				t.Fatalf("second reading: %v, %q; want reason %q", sm, why, c.why)
			}
			if sm == nil {
				return
			}
			// Buckets: a 1+3, b 2; pinned: a 30, b 2.
			if sm.Pinned["a"] != 30 || sm.Pinned["b"] != 2 || sm.Counts["a"] != 4+30 || sm.Counts["b"] != 2+2 {
				t.Fatalf("counts %v pinned %v, want a 34 (30 pinned), b 4 (2 pinned)", sm.Counts, sm.Pinned)
			}
			m := (Window{Span: MeasureWindow}).Add(*sm).Measure(UnitConnections)
			if m.Pinned != 32 || m.Total != 38 || m.Backends["a"].Planned != 0.5 {
				t.Fatalf("measured %+v, want 32 pinned of 38, a planned 0.5 of the group's", m)
			}
		})
	}
}
