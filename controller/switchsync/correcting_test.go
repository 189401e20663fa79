package switchsync

import (
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/internal/testutil"
)

// TestSyncerCorrectsPinnedShare drives a syncer against the fake switch: every second 700
// new connections pass the group by its slot table and 300 are pinned to backend a (its
// table-8 flow counts them). The syncer counts both, corrects, rewrites the group, and settles where the
// whole split meets the computed thirds; with share_correction off it measures the skew and
// plans the computed weights.
func TestSyncerCorrectsPinnedShare(t *testing.T) {
	for _, on := range []bool{true, false} {
		name := "on"
		if !on {
			name = "off"
		}
		t.Run(name, func(t *testing.T) {
			t0 := time.Unix(10_000, 0)
			var clock atomic.Int64
			clock.Store(t0.UnixNano())
			now := func() time.Time { return time.Unix(0, clock.Load()) }
			var logs syncBuffer
			conn := NewFakeConn(1)
			ovs := dataplane.OVSVersion{Major: 3, Minor: 1} // a 256-slot table
			s := start(t, conn, Config{Now: now, OVS: ovs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			svc := web("web", 5, nil, 500, 500, 500)
			svc.AffinityTimeout, svc.CorrectShare = 10, on
			var seq atomic.Uint64
			offer := func() {
				in := intentOf(seq.Add(1), 1, time.Hour, svc)
				s.Offer(in)
			}
			at := now()
			offer()
			testutil.Until(t, 20*time.Second, func() bool { st := s.Status(); return st.Known && !st.MeasuredAt.Before(at) }, "first reading")
			located := Located(intentOf(1, 1, time.Hour, svc), 1, locateAll)[0]
			hitCookie := dataplane.MakeCookie(5, 0, dataplane.KindAffinityPinned)
			var group map[string]float64
			for range 25 {
				conn.Edit(func(sw *dataplane.FakeSwitch) {
					g := sw.State().Groups[0]
					split, err := dataplane.SplitOf(located, g, ovs)
					if err != nil {
						t.Fatal(err)
					}
					done := map[int]bool{}
					for k, i := range split.Backend {
						if done[i] {
							continue
						}
						done[i] = true
						if err := sw.Hit(5, k, uint64(math.Round(700*split.Planned(i)))); err != nil {
							t.Fatal(err)
						}
					}
					if err := sw.HitFlow(hitCookie, 300); err != nil {
						t.Fatal(err)
					}
				})
				at := time.Unix(0, clock.Add(int64(time.Second)))
				offer()
				testutil.Until(t, 20*time.Second, func() bool { return !s.Status().MeasuredAt.Before(at) }, "a reading at %s", at)
				group = map[string]float64{}
				split, err := dataplane.SplitOf(located, conn.State().Groups[0], ovs)
				if err != nil {
					t.Fatal(err)
				}
				for i, b := range located.Backends {
					group[b.Name] = split.Planned(i)
				}
			}
			st := s.Status()
			m := st.Measured["web"]
			if m.Backends["a"].Pinned == 0 || m.Pinned == 0 {
				t.Fatalf("no pinned connections measured: %+v", m)
			}
			c, corrected := st.Corrections["web"]
			if !on {
				if corrected {
					t.Fatalf("correction %+v with share_correction off", c)
				}
				if got := group["a"]; math.Abs(got-1.0/3) > 0.01 {
					t.Fatalf("a's slot share %.4f with the correction off, want its computed third", got)
				}
				return
			}
			if !c.Active || c.Settled == 0 {
				t.Fatalf("correction not settled after 25 readings: %+v\n%s", c, logs.String())
			}
			// The whole split of a reading: 300 pinned to a, 700 by the slots.
			for _, name := range []string{"a", "b", "c"} {
				pinned := 0.0
				if name == "a" {
					pinned = 300
				}
				whole := (pinned + 700*group[name]) / 1000
				if math.Abs(whole-1.0/3) > 0.01 {
					t.Errorf("%s: whole share %.4f (slot share %.4f), want 1/3 within a point", name, whole, group[name])
				}
			}
			if !strings.Contains(logs.String(), "correcting the slots for pinned connections") {
				t.Errorf("correction not logged:\n%s", logs.String())
			}
		})
	}
}
