package switchsync

import (
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/controller/ofswitch"
	"flowweight/controller/ofwire"
	"flowweight/internal/testutil"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
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
				fm, ok := m.Body.(*ofwire.FlowMod)
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

// learnedOn is a flow as a switch's learn action writes it: client → backend b of service svc.
func learnedOn(svc, b uint16, client byte) dataplane.Flow {
	// eth_type=0x0800, ipv4_src=10.9.0.client: enough of a learned flow's match for the fake.
	match := []byte{0x80, 0x00, 0x0a, 0x02, 0x08, 0x00, 0x80, 0x00, 0x16, 0x04, 10, 9, 0, client}
	return dataplane.Flow{Table: dataplane.TableAffinity, Priority: dataplane.PriorityAffinity, IdleTimeout: 3,
		Cookie: dataplane.MakeCookie(svc, b, dataplane.KindAffinity), Match: string(match)}
}

func learnedIn(st dataplane.State) map[uint16]int {
	out := map[uint16]int{}
	for _, f := range st.Flows {
		if dataplane.IsLearned(f) {
			_, b, _, _ := dataplane.ParseCookie(f.Cookie)
			out[b]++
		}
	}
	return out
}

// TestSyncerEndsAffinities: through a syncer, learned flows survive read-back (no drift) and
// reweights; a backend going out of service loses its own, once, and no other backend's.
func TestSyncerEndsAffinities(t *testing.T) {
	conn := NewFakeConn(1)
	var drift atomic.Int32
	s := start(t, conn, Config{Up: eventFunc(func(kind, _, _ string) {
		if kind == "drift" {
			drift.Add(1)
		}
	})})
	svc := func(wb uint16, out bool) intent.Service {
		sv := web("web", 5, nil, 500, wb)
		sv.AffinityTimeout = 3
		sv.Backends[1].OutOfService = out
		return sv
	}
	learn := func(b uint16, clients ...byte) {
		conn.Edit(func(sw *dataplane.FakeSwitch) {
			var msgs []ofswitch.Message
			for _, c := range clients {
				msgs = append(msgs, ofswitch.Message{Type: of.TypeFlowMod, Body: &ofwire.FlowMod{Command: ofp.FlowAdd, Flow: ofwire.Flow(learnedOn(5, b, c))}})
			}
			if err := sw.Apply(msgs); err != nil {
				t.Error(err)
			}
		})
	}
	in := intentOf(1, 1, 5*time.Millisecond, svc(500, false))
	s.Offer(in)
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == 1 }, "intent applied")
	learn(0, 1, 2)
	learn(1, 3, 4)
	// Read-backs every 5 ms: give the syncer several, then check nothing was taken for drift.
	start := conn.Applies()
	testutil.Until(t, 20*time.Second, func() bool {
		in = intentOf(in.Seq+1, in.Gen+1, 5*time.Millisecond, svc(uint16(100+in.Seq), false))
		s.Offer(in)
		return conn.Applies() >= start+5 && s.Status().Seq == in.Seq
	}, "learned flows kept across reweights")
	if got := learnedIn(conn.State()); got[0] != 2 || got[1] != 2 {
		t.Fatalf("learned flows after reweights: %v, want 2 and 2", got)
	}
	if n := drift.Load(); n != 0 {
		t.Fatalf("%d drift events with learned flows on the switch", n)
	}
	// b drained (weight 0, out of service): its affinities go, a's stay.
	in = intentOf(in.Seq+1, in.Gen+1, 5*time.Millisecond, svc(0, true))
	s.Offer(in)
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := learnedIn(conn.State())[1]; return v, v == 0 }, "b's affinities deleted")
	if got := learnedIn(conn.State()); got[0] != 2 {
		t.Fatalf("a's learned flows: %v, want 2", got)
	}
	// Still out: a flow learned meanwhile is not deleted again at every update.
	learn(1, 5)
	in = intentOf(in.Seq+1, in.Gen+1, 5*time.Millisecond, svc(0, true))
	s.Offer(in)
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == in.Seq }, "next intent applied")
	if got := learnedIn(conn.State()); got[1] != 1 {
		t.Fatalf("b's learned flows after a second out-of-service intent: %v, want the 1 learned meanwhile", got)
	}
}

// TestAffinityEndsFreeWithoutAffinity: every syncer asks at every step, and most services have
// no affinity. Before, each call indexed every backend of every service in four maps: a sixth
// of the fleet benchmark's CPU per weight change (100 switches, 10 services × 4 backends).
func TestAffinityEndsFreeWithoutAffinity(t *testing.T) {
	var svcs []dataplane.Service
	for i := range 10 {
		s := dataplane.Service{Name: fmt.Sprintf("svc%d", i), Index: uint16(i)}
		for j := range 4 {
			s.Backends = append(s.Backends, dataplane.Backend{Name: fmt.Sprintf("be%d", j), Index: uint16(j), OutOfService: j == 0})
		}
		svcs = append(svcs, s)
	}
	if allocs := testing.AllocsPerRun(100, func() { AffinityEnds(svcs, svcs) }); allocs != 0 {
		t.Errorf("AffinityEnds without affinity allocates %.0f times per call, want 0", allocs)
	}
	if ends := AffinityEnds(nil, svcs); len(ends) != 0 {
		t.Errorf("AffinityEnds without affinity = %v, want none", ends)
	}
}
