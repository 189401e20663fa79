package switchsync

import (
	"net"
	"net/netip"
	"testing"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
)

// TestPlansSharedOnlyBetweenLikeSwitches: switches that must hold the same state share one
// plan; a different slot table, location or placement plans its own, and every result equals
// planning alone.
func TestPlansSharedOnlyBetweenLikeSwitches(t *testing.T) {
	in := &intent.Intent{Gen: 1, Normal: true, Services: []intent.Service{web("all", 1, nil, 600, 400), web("two", 2, []uint64{2}, 500, 500)}}
	in.Build()
	new31 := dataplane.OVSVersion{Major: 3, Minor: 1}
	movedPort := func(ip netip.Addr) (dataplane.Location, bool) {
		loc, ok := locateAll(ip)
		if ip == in.Services[0].Backends[1].IP {
			loc.Port = 77
		}
		return loc, ok
	}
	otherMAC := func(ip netip.Addr) (dataplane.Location, bool) {
		loc, ok := locateAll(ip)
		loc.MAC = net.HardwareAddr{2, 9, 9, 9, 9, 9}
		return loc, ok
	}
	p := NewPlans()
	cases := []struct {
		name   string
		dpid   uint64
		ovs    dataplane.OVSVersion
		locate Locator
		hit    bool
	}{
		{"first switch plans", 1, new31, locateAll, false},
		{"a like switch shares", 3, new31, locateAll, true},
		{"64-slot switch plans its own", 4, dataplane.OVSVersion{}, locateAll, false},
		{"and a like one shares that", 5, dataplane.OVSVersion{}, locateAll, true},
		{"a backend on another port", 6, new31, movedPort, false},
		{"backends at other MACs", 7, new31, otherMAC, false},
		{"another placement", 2, new31, locateAll, false},
		{"nobody located", 8, new31, nil, false},
	}
	for _, c := range cases {
		got, _, hit := p.Desired(in, c.dpid, c.ovs, c.locate)
		want, _ := Desired(in, c.dpid, c.ovs, c.locate)
		if hit != c.hit {
			t.Errorf("%s: shared %v, want %v", c.name, hit, c.hit)
		}
		if !got.Equal(want) {
			t.Errorf("%s: the plan differs from planning alone", c.name)
		}
	}
	// A canary switch plans other weights; a switch that cannot hash UDP per flow plans a UDP
	// service otherwise than one of the same slot table that can (unknown and 2.16 both lay
	// groups out for 64 slots).
	udp := web("dns", 3, nil, 600, 400)
	udp.Protocol = "udp"
	canary := web("canary", 4, nil, 600, 400)
	canary.Canary, canary.CanaryWeights = []uint64{12}, []uint16{500, 500}
	in3 := &intent.Intent{Gen: 3, Normal: true, Services: []intent.Service{udp, canary}}
	in3.Build()
	for _, c := range []struct {
		name string
		dpid uint64
		ovs  dataplane.OVSVersion
		hit  bool
	}{
		{"2.16 plans", 10, dataplane.OVSVersion{Major: 2, Minor: 16}, false},
		{"unknown does not share 2.16's per-flow plan", 11, dataplane.OVSVersion{}, false},
		{"the canary does not share", 12, dataplane.OVSVersion{Major: 2, Minor: 16}, false},
		{"a like 2.16 switch shares", 13, dataplane.OVSVersion{Major: 2, Minor: 16}, true},
	} {
		got, _, hit := p.Desired(in3, c.dpid, c.ovs, locateAll)
		want, _ := Desired(in3, c.dpid, c.ovs, locateAll)
		if hit != c.hit || !got.Equal(want) {
			t.Errorf("%s: shared %v (want %v), equal to planning alone %v", c.name, hit, c.hit, got.Equal(want))
		}
	}

	// A new generation forgets the old plans.
	next := &intent.Intent{Gen: 4, Normal: true, Services: []intent.Service{web("all", 1, nil, 100, 900)}}
	next.Build()
	if _, _, hit := p.Desired(next, 1, new31, locateAll); hit {
		t.Error("a new generation reused an old plan")
	}
	want, _ := Desired(in, 1, new31, locateAll)
	if got, _, hit := p.Desired(in, 1, new31, locateAll); hit || !got.Equal(want) {
		t.Errorf("a lagging syncer's older intent: shared %v, equal %v", hit, got.Equal(want))
	}
}
