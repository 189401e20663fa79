package switchsync

import (
	"fmt"
	"testing"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
)

// fleetIntent is services × backends with every backend located, as a large controller's.
func fleetIntent(services, backends int) *intent.Intent {
	in := &intent.Intent{Normal: true, Owned: map[uint32]bool{}}
	for i := range services {
		w := make([]uint16, backends)
		for j := range w {
			w[j] = uint16(1000 / backends)
		}
		s := web(fmt.Sprintf("svc%d", i), uint32(i+1), nil, w...)
		in.Owned[s.GroupID] = true
		in.Services = append(in.Services, s)
	}
	return in.Build()
}

// BenchmarkPlan is what a syncer does per switch when the weights changed: the desired state,
// the hold, the slot-keeping and the diff against what the switch holds (one backend drained).
func BenchmarkPlan(b *testing.B) {
	for _, c := range []struct{ services, backends int }{{10, 4}, {1000, 10}, {10, 1000}} {
		b.Run(fmt.Sprintf("%dx%d", c.services, c.backends), func(b *testing.B) {
			in := fleetIntent(c.services, c.backends)
			current, _ := Desired(in, 1, dataplane.OVSVersion{Major: 3, Minor: 1}, locateAll)
			in.Services[0].Backends[0].Weight = 0 // a drain: its slots move
			b.ReportAllocs()
			for b.Loop() {
				desired, _ := Desired(in, 1, dataplane.OVSVersion{Major: 3, Minor: 1}, locateAll)
				desired = Hold(desired, current, in)
				desired = dataplane.KeepSlots(desired, current)
				if plan := dataplane.Plan(desired, current); len(plan) == 0 {
					b.Fatal("no plan for a moved weight")
				}
			}
		})
	}
}

// BenchmarkPlanShared is the same for the second and later switches of a fleet whose
// backends are located alike: the desired state comes from Plans.
func BenchmarkPlanShared(b *testing.B) {
	for _, c := range []struct{ services, backends int }{{10, 4}, {1000, 10}, {10, 1000}} {
		b.Run(fmt.Sprintf("%dx%d", c.services, c.backends), func(b *testing.B) {
			in := fleetIntent(c.services, c.backends)
			in.Gen = 1
			ovs := dataplane.OVSVersion{Major: 3, Minor: 1}
			current, _ := Desired(in, 1, ovs, locateAll)
			in.Services[0].Backends[0].Weight = 0
			p := NewPlans()
			p.Desired(in, 1, ovs, locateAll)
			b.ReportAllocs()
			for b.Loop() {
				desired, _, hit := p.Desired(in, 2, ovs, locateAll)
				if !hit {
					b.Fatal("not shared")
				}
				desired = Hold(desired, current, in)
				desired = dataplane.KeepSlots(desired, current)
				if plan := dataplane.Plan(desired, current); len(plan) == 0 {
					b.Fatal("no plan for a moved weight")
				}
			}
		})
	}
}
