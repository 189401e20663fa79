package switchsync

import (
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/internal/testutil"
)

func reactive(name string, group uint32, w ...uint16) intent.Service {
	s := web(name, group, nil, w...)
	s.Dispatch = dataplane.DispatchReactive
	return s
}

// TestLeaseRenewal: a leading syncer renews its switch's leased flow every LeaseRefresh (one
// add, which leaves the switch as planned), a switch without a lease gets no renewals, and a
// standby renews nothing whatever its switch holds, so the lease runs out there and the
// switch falls back to the group. The first syncer is the clock: the others' applies are
// compared after it renewed five times.
func TestLeaseRenewal(t *testing.T) {
	const every = 5 * time.Millisecond
	in := intentOf(1, 1, time.Hour, reactive("web", 5, 500, 500))
	leader := NewFakeConn(1)
	ls := start(t, leader, Config{LeaseRefresh: every})
	ls.Offer(in)

	plain := NewFakeConn(2)
	ps := start(t, plain, Config{LeaseRefresh: every})
	ps.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))

	standby := NewFakeConn(3)
	standby.Edit(func(sw *dataplane.FakeSwitch) { // what the leader wrote there
		if err := sw.ApplyPlan(dataplane.Plan(want(in, 3), dataplane.State{})); err != nil {
			t.Fatal(err)
		}
	})
	ss := start(t, standby, Config{LeaseRefresh: every, Lead: &fakeLead{term: 7}})
	ss.Offer(in)

	for _, s := range []*Syncer{ls, ps, ss} {
		testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == 1 }, "intent taken")
	}
	a0, p0 := leader.Applies(), plain.Applies()
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := leader.Applies(); return v, v >= a0+5 }, "five renewals")
	if !leader.State().Equal(want(in, 1)) {
		t.Errorf("the renewals changed the switch:\n%v\nwant\n%v", leader.State(), want(in, 1))
	}
	if n := plain.Applies(); n != p0 {
		t.Errorf("a switch without a leased flow got %d applies after its sync", n-p0)
	}
	if n := standby.Applies(); n != 0 {
		t.Errorf("a standby applied %d times", n)
	}
	leased := 0
	for _, f := range leader.State().Flows {
		if f.HardTimeout != 0 {
			leased++
		}
	}
	if leased != 1 {
		t.Errorf("the switch holds %d leased flows, want the one flow to the controller", leased)
	}
}
