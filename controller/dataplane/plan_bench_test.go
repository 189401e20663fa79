package dataplane

import "testing"

// BenchmarkReweightPlan64 is the controller's own share of one reweight of a 64-backend
// service, without the switch: Desired (every flow and bucket encoded), KeepSlots and Plan.
// BenchmarkOVSRewriteLayout64* adds the GROUP_MOD and its barrier to a real Open vSwitch.
func BenchmarkReweightPlan64(b *testing.B) {
	for _, mode := range []Mode{ModeConntrack, ModeStateless} {
		b.Run(string(mode), func(b *testing.B) {
			opt := Options{OVS: OVSVersion{Major: 3, Minor: 1}}
			weights := func(iter int) []uint16 {
				w := make([]uint16, 64)
				for i := range w {
					w[i] = uint16(i + 1)
					if iter%2 == 1 {
						w[i] = uint16(64 - i)
					}
				}
				return w
			}
			group := func(iter int, cur State) State {
				d := Desired([]Service{liveService(mode, weights(iter))}, opt)
				return KeepSlots(State{Groups: d.Groups}, cur)
			}
			cur := group(0, State{})
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				next := group(i+1, cur)
				if plan := Plan(next, cur); len(plan) != 1 || len(plan[0]) != 1 {
					b.Fatalf("plan of %d stages, want one MODIFY", len(plan))
				}
				cur = next
			}
		})
	}
}
