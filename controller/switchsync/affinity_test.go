package switchsync

import (
	"net/netip"
	"slices"
	"testing"

	"flowweight/controller/dataplane"
)

func TestAffinityEnds(t *testing.T) {
	svc := func(timeout uint16, mut func([]dataplane.Backend)) dataplane.Service {
		bs := []dataplane.Backend{
			{Name: "a", Index: 0, IP: netip.MustParseAddr("10.0.0.1"), Weight: 100},
			{Name: "b", Index: 1, IP: netip.MustParseAddr("10.0.0.2"), Weight: 50},
			{Name: "c", Index: 2, IP: netip.MustParseAddr("10.0.0.3"), Weight: 30},
		}
		if mut != nil {
			mut(bs)
		}
		return dataplane.Service{Name: "web", Index: 1, AffinityTimeout: timeout, Backends: bs}
	}
	out := func(i int) func([]dataplane.Backend) {
		return func(bs []dataplane.Backend) { bs[i].Weight, bs[i].OutOfService = 0, true }
	}
	cases := []struct {
		name       string
		prev, now  []dataplane.Service
		deletedFor []uint16 // backend indexes of service 1
	}{
		{"steady", []dataplane.Service{svc(3, nil)}, []dataplane.Service{svc(3, nil)}, nil},
		{"reweight", []dataplane.Service{svc(3, nil)}, []dataplane.Service{svc(3, func(bs []dataplane.Backend) { bs[0].Weight = 10 })}, nil},
		{"computed weight 0 keeps affinities", []dataplane.Service{svc(3, nil)}, []dataplane.Service{svc(3, func(bs []dataplane.Backend) { bs[1].Weight = 0 })}, nil},
		{"drained or evicted", []dataplane.Service{svc(3, nil)}, []dataplane.Service{svc(3, out(1))}, []uint16{1}},
		{"still out: once only", []dataplane.Service{svc(3, out(1))}, []dataplane.Service{svc(3, out(1))}, nil},
		{"back in service", []dataplane.Service{svc(3, out(1))}, []dataplane.Service{svc(3, nil)}, nil},
		{"out at start", nil, []dataplane.Service{svc(3, out(2))}, []uint16{2}},
		{"removed", []dataplane.Service{svc(3, nil)}, []dataplane.Service{svc(3, nil)}, nil},
		{"affinity turned off", []dataplane.Service{svc(3, nil)}, []dataplane.Service{svc(0, nil)}, []uint16{0, 1, 2}},
		{"service removed", []dataplane.Service{svc(3, nil)}, []dataplane.Service{}, []uint16{0, 1, 2}},
		{"no affinity", []dataplane.Service{svc(0, nil)}, []dataplane.Service{svc(0, out(0))}, nil},
	}
	// A backend taken out of the configuration.
	cases[7].now[0].Backends = cases[7].now[0].Backends[:2]
	cases[7].deletedFor = []uint16{2}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []uint16
			for _, m := range AffinityEnds(tc.prev, tc.now) {
				fm, ok := m.Body.(*dataplane.FlowMod)
				svc, b, kind, ours := dataplane.ParseCookie(fm.Flow.Cookie)
				if !ok || !ours || kind != dataplane.KindAffinity || svc != 1 || fm.CookieMask != ^uint64(0) || fm.Flow.Table != dataplane.TableAffinity {
					t.Fatalf("message %q is not a delete of service 1's learned flows by exact cookie", m.Desc)
				}
				got = append(got, b)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.deletedFor) {
				t.Fatalf("deletes for backends %v, want %v", got, tc.deletedFor)
			}
		})
	}
}
