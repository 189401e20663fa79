package switchsync

import (
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/internal/testutil"
)

// leaseEvery is the tests' LeaseRefresh.
const leaseEvery = 5 * time.Millisecond

// renewingSwitch starts a syncer without HA renewing in's leases every leaseEvery on a new
// switch, and returns the switch: a clock for the other syncers of a test, counted in its
// applies.
func renewingSwitch(t *testing.T, dpid uint64, in *intent.Intent) (*FakeConn, *Syncer) {
	t.Helper()
	conn := NewFakeConn(dpid)
	s := start(t, conn, Config{LeaseRefresh: leaseEvery})
	s.Offer(in)
	return conn, s
}

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
	in := intentOf(1, 1, time.Hour, reactive("web", 5, 500, 500))
	leader, ls := renewingSwitch(t, 1, in)
	plain, ps := renewingSwitch(t, 2, intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))

	standby := NewFakeConn(3)
	standby.Edit(func(sw *dataplane.FakeSwitch) { // what the leader wrote there
		if err := sw.ApplyPlan(dataplane.Plan(want(in, 3), dataplane.State{})); err != nil {
			t.Fatal(err)
		}
	})
	ss := start(t, standby, Config{LeaseRefresh: leaseEvery, Lead: &fakeLead{term: 7}})
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

// TestLeaseRenewalNeedsTheConfirmedTerm: a leader renews while the switch has it as MASTER in
// its term. When the election moves on with no intent since (no sync has run), it stops
// renewing: in a newer term it leads too, a renewal would write the old term's belief before
// any read-back, and ask for the role on the way; in a term it does not lead it must not write
// at all. The first syncer is the clock; one renewal in flight at the change is allowed.
func TestLeaseRenewalNeedsTheConfirmedTerm(t *testing.T) {
	in := intentOf(1, 1, time.Hour, reactive("web", 5, 500, 500))
	clock, _ := renewingSwitch(t, 1, in)
	conn := NewFakeConn(2)
	lead := &fakeLead{term: 3, leading: true}
	s := start(t, conn, Config{LeaseRefresh: leaseEvery, Lead: lead})
	s.Offer(in)
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { st := s.Status(); return st.Role, st.Seq == 1 && st.Role == "master" }, "master in term 3")
	a := conn.Applies()
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := conn.Applies(); return v, v >= a+3 }, "renewals in term 3")

	for _, step := range []struct {
		name    string
		term    uint64
		leading bool
	}{{"a newer term we lead too", 5, true}, {"a term we do not lead", 6, false}} {
		a, roles := conn.Applies(), conn.RoleRequests()
		lead.set(step.term, step.leading)
		c := clock.Applies()
		testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := clock.Applies(); return v, v >= c+5 }, "five ticks of the clock")
		if n := conn.Applies() - a; n > 1 {
			t.Errorf("%s: %d renewals after the election moved on", step.name, n)
		}
		if n := conn.RoleRequests() - roles; n != 0 {
			t.Errorf("%s: %d role requests from renewals", step.name, n)
		}
	}
}
