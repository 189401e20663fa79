package dataplane

import (
	"slices"
	"testing"
)

func TestHeldWeights(t *testing.T) {
	for _, c := range []struct {
		mode Mode
		svc  func(Mode) Service
		name string
	}{{ModeConntrack, webService, "conntrack"}, {ModeStateless, webService, "stateless"},
		{ModeConntrack, webService6, "ipv6 conntrack"}, {ModeStateless, webService6, "ipv6 stateless"}} {
		mode := c.mode
		t.Run(c.name, func(t *testing.T) {
			svc := c.svc(mode)
			svc.Backends[2].MAC, svc.Backends[2].SwitchPort = mac("02:00:00:00:00:03"), 3
			group := func(s Service) Group {
				st := Desired([]Service{s}, DefaultOptions())
				return st.Groups[0]
			}
			held := group(svc)

			// The controller restarts knowing nothing of the weights: the service it plans
			// from carries zeros, and the held group must still map to 100/50/30.
			fresh := svc
			fresh.Backends = slices.Clone(svc.Backends)
			for i := range fresh.Backends {
				fresh.Backends[i].Weight = 0
			}
			// The switch holds slots, not the weights (the layout apportions them over its
			// table): the held weights must give each backend its share to within a slot.
			base, ok := HeldWeights(fresh, held)
			if !ok {
				t.Fatalf("the planned group did not map back to its backends")
			}
			closeTo(t, "as planned", base, []uint16{100, 50, 30})
			zero, ok := HeldWeights(fresh, group(withWeights(svc, 0, 70, 30)))
			if !ok || zero[0] != 0 {
				t.Fatalf("a backend at zero: HeldWeights = %v, %v; want no weight for it", zero, ok)
			}
			closeTo(t, "a backend at zero has no bucket", zero, []uint16{0, 70, 30})

			cases := []struct {
				name string
				g    Group
				want []uint16
				ok   bool
			}{
				{"two buckets for one backend add up", Group{ID: held.ID, Type: held.Type,
					Buckets: append(slices.Clone(held.Buckets), Bucket{Weight: 1, Actions: held.Buckets[0].Actions})},
					[]uint16{base[0] + 1, base[1], base[2]}, true},
				{"a bucket of another layout", Group{ID: held.ID, Type: held.Type,
					Buckets: append(slices.Clone(held.Buckets), Bucket{Weight: 5, Actions: "\x00\x00\x00\x10"})}, nil, false},
				{"no weight at all", Group{ID: held.ID, Type: held.Type}, nil, false},
			}
			for _, c := range cases {
				got, ok := HeldWeights(fresh, c.g)
				if ok != c.ok || !slices.Equal(got, c.want) {
					t.Errorf("%s: HeldWeights = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
				}
			}

			// A backend whose MAC the restarted controller does not know yet (stateless
			// buckets carry the MAC) cannot be matched: nothing reliable is said.
			if mode == ModeStateless {
				unknown := fresh
				unknown.Backends = slices.Clone(fresh.Backends)
				unknown.Backends[0].MAC = nil
				if got, ok := HeldWeights(unknown, held); ok {
					t.Errorf("unmatched bucket read as %v", got)
				}
			}
		})
	}
}

func withWeights(s Service, w ...uint16) Service {
	s.Backends = slices.Clone(s.Backends)
	for i := range s.Backends {
		s.Backends[i].Weight = w[i]
	}
	return s
}

// closeTo checks that got gives every backend the share want does, to within one slot of the
// table got sums to.
func closeTo(t *testing.T, what string, got, want []uint16) {
	t.Helper()
	var sg, sw float64
	for i := range got {
		sg += float64(got[i])
		sw += float64(want[i])
	}
	for i := range got {
		if d := float64(got[i])/sg - float64(want[i])/sw; d > 1/sg || d < -1/sg {
			t.Errorf("%s: held %v, shares off %v by more than one slot of %v", what, got, want, sg)
			return
		}
	}
}
