package balancer

import (
	"context"
	"flowweight/controller/arp"
	"flowweight/internal/testutil"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// withSwitch fakes a connected switch of the given version with both backends located, and
// applied weights w: the view then reports what that switch's slot table realises.
func withSwitch(t *testing.T, v dataplane.OVSVersion, w ...uint16) *Balancer {
	t.Helper()
	b, err := New(testConfig(t, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.switches[1] = switchsync.New(switchsync.Config{OVS: v})
	for _, s := range b.services {
		s.applied = w
		for i, be := range s.cfg.Backends {
			b.nb.Learner().Adopt(1, be.ParsedIP(), arp.Location{MAC: net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)}, Port: uint32(i + 1)})
		}
	}
	publishLocked(b)
	return b
}

func TestServicesShowRealisedShares(t *testing.T) {
	cases := []struct {
		name  string
		v     dataplane.OVSVersion
		w     []uint16
		table int
		slots []int
	}{
		{"3.1.0: 256 slots", dataplane.OVSVersion{Major: 3, Minor: 1}, []uint16{700, 300}, 256, []int{179, 77}},
		{"unknown switch: 64 slots", dataplane.OVSVersion{}, []uint16{700, 300}, 64, []int{45, 19}},
		{"a drained backend has no slot", dataplane.OVSVersion{Major: 3, Minor: 1}, []uint16{1000, 0}, 16, []int{16, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := withSwitch(t, c.v, c.w...)
			v := b.View().Services()[0]
			if v.SlotTable != c.table || v.SlotFallback {
				t.Fatalf("slot table %d (fallback %v), want %d", v.SlotTable, v.SlotFallback, c.table)
			}
			for j, bv := range v.Backends {
				share := float64(c.w[j]) / 1000
				if bv.Slots != c.slots[j] || math.Abs(bv.Share-share) > 1e-9 ||
					math.Abs(bv.RealisedShare-float64(c.slots[j])/float64(c.table)) > 1e-9 {
					t.Errorf("backend %s: share %.4f slots %d realised %.4f; want %.4f, %d, %d/%d",
						bv.Name, bv.Share, bv.Slots, bv.RealisedShare, share, c.slots[j], c.slots[j], c.table)
				}
			}
		})
	}
}

func TestSharesWithoutSwitch(t *testing.T) {
	b := withSwitch(t, dataplane.OVSVersion{}, 600, 400)
	b.mu.Lock()
	delete(b.switches, 1)
	publishLocked(b)
	b.mu.Unlock()
	v := b.View().Services()[0]
	if v.SlotTable != 0 || v.Backends[0].Slots != 0 || v.Backends[0].RealisedShare != 0 || math.Abs(v.Backends[0].Share-0.6) > 1e-9 {
		t.Errorf("no switch: table %d, backend a %+v; want no slots and share 0.6", v.SlotTable, v.Backends[0])
	}
}

func TestShareMetrics(t *testing.T) {
	b := withSwitch(t, dataplane.OVSVersion{Major: 3, Minor: 1}, 700, 300)
	mfs := scrape(t, b)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"flowweight_backend_realised_share_ratio{backend=a,dpid=0000000000000001,service=web}": 179.0 / 256,
		"flowweight_backend_realised_share_ratio{backend=b,dpid=0000000000000001,service=web}": 77.0 / 256,
		"flowweight_backend_share_ratio{backend=a,service=web}":                                0.7,
		"flowweight_backend_share_ratio{backend=b,service=web}":                                0.3,
		"flowweight_group_slots{dpid=0000000000000001,service=web}":                            256,
	}
	if len(got) != len(want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
}

// TestSwitchViewsSayWhoIsBehind: the switch that stopped answering shows how many updates it
// is behind; the one in step shows none.
func TestSwitchViewsSayWhoIsBehind(t *testing.T) {
	b, err := New(testConfig(t, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fast, stalled := switchsync.NewFakeConn(1), switchsync.NewFakeConn(2)
	stalled.Stall(true)
	for _, c := range []*switchsync.FakeConn{fast, stalled} {
		sy := switchsync.New(switchsync.Config{Conn: c, Neighbours: b.nb})
		b.mu.Lock()
		b.switches[c.DPID] = sy
		publishLocked(b)
		b.mu.Unlock()
		go sy.Run(ctx)
	}
	for range 3 {
		b.update(ctx, false)
	}
	testutil.Until(t, 10*time.Second, func() bool {
		v := b.View().SwitchViews()
		return len(v) == 2 && v[0].Known && v[0].Behind == 0 && v[0].Intent == b.latest.Load().Seq
	}, "switch 1 in step")
	v := b.View().SwitchViews()
	if v[0].DPID != "0000000000000001" || v[1].DPID != "0000000000000002" {
		t.Fatalf("views not by datapath id: %+v", v)
	}
	if v[1].Known || v[1].Intent != 0 || v[1].Behind != b.latest.Load().Seq {
		t.Errorf("stalled switch %+v, want unknown, at no intent, %d behind", v[1], b.latest.Load().Seq)
	}
}

// scrape gathers what the published snapshot gives a Prometheus scrape.
func scrape(t *testing.T, b *Balancer) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	for _, c := range b.View().Collectors() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}
