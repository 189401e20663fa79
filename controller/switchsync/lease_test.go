package switchsync

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/internal/testutil"

	"github.com/prometheus/client_golang/prometheus"
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

// stoppedSyncer runs a syncer on conn until it took in (and, with a Lead, is confirmed
// MASTER), then stops its Run: from then on the test owns the syncer's state and calls renew
// itself, one renewal at a time, with no ticker to race.
func stoppedSyncer(t *testing.T, conn *FakeConn, cfg Config, in *intent.Intent) *Syncer {
	t.Helper()
	cfg.Conn, cfg.locate, cfg.LeaseRefresh = conn, locateAll, time.Hour
	s := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	s.Offer(in)
	testutil.Eventually(t, 20*time.Second, func() (any, bool) {
		st := s.Status()
		return st, st.Seq == in.Seq && (cfg.Lead == nil || st.Role == "master")
	}, "intent taken")
	cancel()
	<-done
	return s
}

// TestLeaseRenewalNeedsTheConfirmedTerm: a leader renews while the switch has it as MASTER in
// the term it leads. When the election moves on with no sync in between, it renews nothing
// and asks for no role: in a newer term it leads too, a renewal would write the old term's
// belief before any read-back; in a term it does not lead it must not write at all. Back in
// its term it renews again, until the switch makes another controller MASTER.
func TestLeaseRenewalNeedsTheConfirmedTerm(t *testing.T) {
	conn := NewFakeConn(2)
	lead := &fakeLead{term: 3, leading: true}
	s := stoppedSyncer(t, conn, Config{Lead: lead}, intentOf(1, 1, time.Hour, reactive("web", 5, 500, 500)))
	ctx := context.Background()
	for _, step := range []struct {
		name    string
		edit    func()
		renewed bool
	}{
		{"the confirmed term", func() {}, true},
		{"a newer term we lead too", func() { lead.set(5, true) }, false},
		{"a term we do not lead", func() { lead.set(6, false) }, false},
		{"the confirmed term again", func() { lead.set(3, true) }, true},
		{"another controller made MASTER by the switch", func() { conn.Takeover(9) }, false},
	} {
		step.edit()
		a, roles := conn.Applies(), conn.RoleRequests()
		s.renew(ctx)
		if got := conn.Applies() - a; got != map[bool]int{true: 1}[step.renewed] {
			t.Errorf("%s: %d renewals, want renewed %v", step.name, got, step.renewed)
		}
		if n := conn.RoleRequests() - roles; n != 0 {
			t.Errorf("%s: %d role requests from a renewal", step.name, n)
		}
	}
}

// TestLeaseRenewalFailure: a renewal the switch does not take marks the switch for a
// read-back and wakes the syncer for it at once (a lapse under a live controller costs the
// time the group serves), counts an error, and warns once until a renewal works again; a
// renewal refused as from a slave contests the term the switch confirmed.
func TestLeaseRenewalFailure(t *testing.T) {
	var logs bytes.Buffer
	errs := prometheus.NewCounter(prometheus.CounterOpts{Name: "errs"})
	conn := NewFakeConn(1)
	in := intentOf(1, 1, time.Hour, reactive("web", 5, 500, 500))
	s := stoppedSyncer(t, conn, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: Metrics{RewriteErrors: errs}}, in)
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	conn.Stall(true) // a switch that does not answer: the apply ends with the context
	for range 3 {
		s.resync = false // as after the read-back the wake asks for
		s.renew(dead)
		if !s.resync || len(s.wake) != 1 {
			t.Fatalf("after a failed renewal: resync %v, wake pending %d; want a read-back asked for at once", s.resync, len(s.wake))
		}
	}
	conn.Stall(false)
	s.resync = false
	s.renew(context.Background())
	if n := strings.Count(logs.String(), "lease renewal failed"); n != 1 {
		t.Errorf("%d warnings for three failed renewals, want one:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "lease renewal works again") || s.resync {
		t.Errorf("a renewal after the failures: resync %v, log:\n%s", s.resync, logs.String())
	}
	if n := counterValue(t, errs); n != 3 {
		t.Errorf("%v rewrite errors counted for three failed renewals", n)
	}

	lead := &fakeLead{term: 4, leading: true}
	conn2 := NewFakeConn(2)
	s2 := stoppedSyncer(t, conn2, Config{Lead: lead}, in)
	conn2.SetLie(Lie{RefuseWrites: true})
	lead.set(4, true)
	s2.renew(context.Background())
	if got := lead.contests(); len(got) != 1 || got[0] != 4 {
		t.Errorf("a renewal refused as from a slave contested %v, want term 4", got)
	}
	if s2.Status().Role != "slave" {
		t.Errorf("role %q after IS_SLAVE on a renewal", s2.Status().Role)
	}
}
