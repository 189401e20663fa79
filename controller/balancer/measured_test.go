package balancer

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"
	"flowweight/internal/testutil"
)

// TestServicesShowMeasuredShares: what a switch's group counters measured reaches the API's
// view per backend per switch (share, count, the planned share for the same counts, the
// sampling error) and the metrics, through the syncer's published status only.
func TestServicesShowMeasuredShares(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b := staticPool(t, clk, "", 1, 3)
	conn := switchsync.NewFakeConn(1)
	sy := switchsync.New(switchsync.Config{Conn: conn, Now: clk.Now})
	b.mu.Lock()
	b.switches[1] = sy
	publishLocked(b)
	b.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sy.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	group := uint32(b.Config().Services[0].GroupID)
	layout := func() dataplane.Group {
		if st := conn.State(); len(st.Groups) == 1 {
			return st.Groups[0]
		}
		return dataplane.Group{}
	}
	// Until the hold ends and the switch holds the static 1:3 split, read back at least once.
	for i := 0; len(layout().Buckets) != 3 || sy.Status().MeasuredAt.IsZero(); i++ {
		if i == 20 {
			t.Fatalf("the switch never held the 1:3 layout: %v", layout())
		}
		periods(b, clk, 1)
		testutil.Until(t, 10*time.Second, func() bool { return sy.Status().Seq == b.seq }, "update %d taken", b.seq)
	}
	// One more update, with nothing to write, and its reading. The update that set the layout
	// wrote the group, and the syncer's reading right after that write (a rebase: its delta
	// is discarded) may still be to come: hits made before it would be lost with it (the
	// flake this wait fixes: "0 measurements", once in a -race run of ./controller/...).
	periods(b, clk, 1)
	testutil.Until(t, 10*time.Second, func() bool {
		st := sy.Status()
		return st.Seq == b.seq && !st.MeasuredAt.Before(clk.Now())
	}, "a reading after the layout settled")
	g := layout()
	if g.ID != group || len(g.Buckets) != 3 {
		t.Fatalf("want the 1:3 layout of 64 slots as three buckets (be1, be2, be1's lent slot): %v", g)
	}
	conn.Edit(func(sw *dataplane.FakeSwitch) {
		for k, n := range []uint64{24, 75, 1} {
			if err := sw.Hit(group, k, n); err != nil {
				t.Error(err)
			}
		}
	})
	clk.Advance(2 * time.Second)
	at := clk.Now()
	reportAll(b, clk)
	b.update(ctx, true)
	testutil.Until(t, 10*time.Second, func() bool { return !sy.Status().MeasuredAt.Before(at) }, "the second reading")

	v := b.View().Services()[0]
	for i, want := range []struct {
		share, planned float64
		count          uint64
	}{{0.25, 16.0 / 64, 25}, {0.75, 48.0 / 64, 75}} {
		bv := v.Backends[i]
		if len(bv.Measured) != 1 {
			t.Fatalf("backend %s: %d measurements, want one for the one switch", bv.Name, len(bv.Measured))
		}
		m := bv.Measured[0]
		if m.DPID != "0000000000000001" || m.Unit != "connections" || m.MeasuredShare == nil || *m.MeasuredShare != want.share ||
			m.MeasuredNewConnections == nil || *m.MeasuredNewConnections != want.count || m.MeasuredPackets != nil || m.Total != 100 ||
			m.PlannedShare != want.planned || math.Abs(m.SamplingError-math.Sqrt(want.planned*(1-want.planned)/100)) > 1e-12 || m.WindowSeconds < 2 {
			t.Errorf("backend %s measured %+v (share %v, count %v); want share %v of 100, planned %v", bv.Name, m,
				deref(m.MeasuredShare), deref(m.MeasuredNewConnections), want.share, want.planned)
		}
	}

	mfs := scrape(t, b)
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "flowweight_backend_measured_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"flowweight_backend_measured_share_ratio{backend=be1,dpid=0000000000000001,service=web}":           0.25,
		"flowweight_backend_measured_share_ratio{backend=be2,dpid=0000000000000001,service=web}":           0.75,
		"flowweight_backend_measured_new_connections_total{backend=be1,dpid=0000000000000001,service=web}": 25,
		"flowweight_backend_measured_new_connections_total{backend=be2,dpid=0000000000000001,service=web}": 75,
	}
	if len(got) != len(want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
