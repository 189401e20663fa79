package switchsync

import (
	"sync"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/internal/testutil"

	"github.com/netrack/openflow/ofp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fakeLead is an election a test moves by hand.
type fakeLead struct {
	mu        sync.Mutex
	term      uint64 // the observed leader's term
	leading   bool
	contested []uint64
}

func (l *fakeLead) Leading() (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term, l.leading
}

func (l *fakeLead) Term() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term
}

func (l *fakeLead) Contested(term uint64, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.contested = append(l.contested, term)
}

func (l *fakeLead) contests() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.contested...)
}

func (l *fakeLead) set(term uint64, leading bool) {
	l.mu.Lock()
	l.term, l.leading = term, leading
	l.mu.Unlock()
}

// TestStandbyNeverWritesAndSeedsFromTheSwitch: a standby holds SLAVE, never applies, and
// publishes the switch's weights as seeds whenever the leader changed them.
func TestStandbyNeverWritesAndSeedsFromTheSwitch(t *testing.T) {
	conn := NewFakeConn(1)
	leaderIn := intentOf(1, 1, time.Hour, web("web", 5, nil, 700, 300))
	conn.Edit(func(sw *dataplane.FakeSwitch) { // what the leader wrote
		if err := sw.ApplyPlan(dataplane.Plan(want(leaderIn, 1), dataplane.State{})); err != nil {
			t.Fatal(err)
		}
	})
	lead := &fakeLead{term: 7}
	s := start(t, conn, Config{Lead: lead})
	for seq := uint64(1); seq <= 3; seq++ {
		sv := web("web", 5, nil, 500, 500)
		sv.WantSeed = true
		s.Offer(intentOf(seq, seq, time.Hour, sv))
		testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := len(s.Status().Seeds["web"]); return v, v == 2 }, "standby read back")
	}
	if conn.Applies() != 0 {
		t.Fatalf("standby applied %d times", conn.Applies())
	}
	if st := s.Status(); st.Role != "slave" || st.Term != 7 {
		t.Fatalf("standby role %q term %d, want slave 7", st.Role, st.Term)
	}
	seeds := s.Status().Seeds["web"]
	if seeds[0] <= seeds[1] {
		t.Fatalf("seeds %v do not follow the switch's 700/300", seeds)
	}
}

// TestTakeoverConfirmsByBarrier: when the election makes us leader, the syncer asks for
// MASTER with the term and confirms by barrier even when the switch needs no change.
func TestTakeoverConfirmsByBarrier(t *testing.T) {
	conn := NewFakeConn(1)
	in := intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500))
	conn.Edit(func(sw *dataplane.FakeSwitch) {
		if err := sw.ApplyPlan(dataplane.Plan(want(in, 1), dataplane.State{})); err != nil {
			t.Fatal(err)
		}
	})
	lead := &fakeLead{term: 3}
	s := start(t, conn, Config{Lead: lead})
	s.Offer(in)
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Role; return v, v == "slave" }, "slave")
	lead.set(9, true)
	s.Offer(intentOf(2, 2, time.Hour, web("web", 5, nil, 500, 500)))
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Confirmed; return v, !v.IsZero() }, "confirmed master")
	st := s.Status()
	if st.Role != "master" || st.Term != 9 || conn.Role().Role != ofp.ControllerRoleMaster || conn.Role().GenerationID != 9 {
		t.Fatalf("status %q/%d, switch %+v: want master in term 9", st.Role, st.Term, conn.Role())
	}
	if conn.Applies() != 1 {
		t.Fatalf("%d applies, want the one barrier", conn.Applies())
	}
	if !conn.State().Equal(want(in, 1)) {
		t.Fatal("the switch changed though it held the intent")
	}
}

// TestSwitchClaimsDoNotDepose: whatever one switch claims about the roles (a stale reply to
// our MASTER request, a role status making us SLAVE, an IS_SLAVE error on a write, a MASTER
// request answered with SLAVE), the syncer stops writing to that switch, counts the claim and
// asks the election; it never deposes the leader itself. Before, each of these made the
// leader step down, so one fake switch on an unused datapath id deposed every new leader.
func TestSwitchClaimsDoNotDepose(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		before       func(c *FakeConn) // before the syncer runs
		after        func(c *FakeConn) // once it is confirmed master
	}{
		{name: "stale role reply", reason: ContestStale, before: func(c *FakeConn) { c.Takeover(10) }},
		{name: "role status slave", reason: ContestStatus, after: func(c *FakeConn) { c.Takeover(5) }},
		{name: "IS_SLAVE on a write", reason: ContestIsSlave, after: func(c *FakeConn) { c.SetLie(Lie{RefuseWrites: true}) }},
		{name: "master request answered with slave", reason: ContestOtherRole,
			before: func(c *FakeConn) { c.SetLie(Lie{AnswerRole: ofp.ControllerRoleSlave}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := NewFakeConn(1)
			if tc.before != nil {
				tc.before(conn)
			}
			lead := &fakeLead{term: 4, leading: true}
			contested := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contested"}, []string{"reason"})
			s := start(t, conn, Config{Lead: lead, Metrics: Metrics{Contested: contested}})
			s.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))
			if tc.after != nil {
				testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Confirmed; return v, !v.IsZero() }, "master")
				tc.after(conn)
				s.Offer(intentOf(2, 2, time.Hour, web("web", 5, nil, 600, 400)))
			}
			testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := len(lead.contests()); return v, v > 0 }, "the claim reported to the election")
			if got := lead.contests(); got[0] != 4 {
				t.Fatalf("contested in term %v, want 4", got)
			}
			var m dto.Metric
			if err := contested.WithLabelValues(tc.reason).Write(&m); err != nil {
				t.Fatal(err)
			}
			if n := m.GetCounter().GetValue(); n != 1 {
				t.Fatalf("contested{reason=%q} = %v, want 1", tc.reason, n)
			}
			st := s.Status()
			if st.Contested == "" || !st.Confirmed.IsZero() {
				t.Fatalf("status after the claim: contested %q, confirmed %v", st.Contested, st.Confirmed)
			}
			// Until its next read-back, the switch gets neither a write nor another request.
			applies, requests, state := conn.Applies(), conn.RoleRequests(), conn.State()
			s.Offer(intentOf(3, 3, time.Hour, web("web", 5, nil, 900, 100)))
			testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == 3 }, "intent 3 taken")
			if conn.Applies() != applies || conn.RoleRequests() != requests || !conn.State().Equal(state) {
				t.Fatalf("the contested switch was written to: %d applies (before %d), %d role requests (before %d)",
					conn.Applies(), applies, conn.RoleRequests(), requests)
			}
		})
	}
}

// TestContestedSwitchRetriedAtReadBack: a switch that contested our role while the election
// still says we lead is asked for MASTER again at its next read-back, and written to when it
// grants it.
func TestContestedSwitchRetriedAtReadBack(t *testing.T) {
	conn := NewFakeConn(1)
	conn.SetLie(Lie{RefuseWrites: true})
	lead := &fakeLead{term: 4, leading: true}
	s := start(t, conn, Config{Lead: lead})
	s.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Contested; return v, v != "" }, "contested")
	conn.SetLie(Lie{})
	in := intentOf(2, 2, 20*time.Millisecond, web("web", 5, nil, 700, 300))
	s.Offer(in)
	testutil.Until(t, 20*time.Second, func() bool { return conn.State().Equal(want(in, 1)) }, "the switch written after its read-back")
	if st := s.Status(); st.Contested != "" || st.Role != "master" {
		t.Fatalf("after the retry: role %q, contested %q", st.Role, st.Contested)
	}
}

// TestDeposedLeaderWritesNothing: a newer leader takes the switch; once the election deposes
// us too, the syncer asks for SLAVE with the newer term and writes nothing.
func TestDeposedLeaderWritesNothing(t *testing.T) {
	conn := NewFakeConn(1)
	lead := &fakeLead{term: 4, leading: true}
	s := start(t, conn, Config{Lead: lead})
	s.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Confirmed; return v, !v.IsZero() }, "master")
	before, applies := conn.State(), conn.Applies()
	conn.Takeover(5)
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := len(lead.contests()); return v, v == 1 }, "the claim reported")
	lead.set(5, false) // the election confirms a newer leader
	s.Offer(intentOf(2, 2, time.Hour, web("web", 5, nil, 900, 100)))
	testutil.Until(t, 20*time.Second, func() bool { st := s.Status(); return st.Role == "slave" && st.Term == 5 }, "slave in term 5")
	if !conn.State().Equal(before) || conn.Applies() != applies {
		t.Fatal("a deposed leader changed the switch")
	}
}

// TestStepsDownToSlaveWithoutALeaderKnown: when etcd goes away the leader stops leading and
// no leader is known (term 0); the syncer still makes itself SLAVE on the switch, with the
// newest term it saw. Before, its request carried 0, the switch refused it as stale, and the
// ex-leader stayed MASTER there.
func TestStepsDownToSlaveWithoutALeaderKnown(t *testing.T) {
	conn := NewFakeConn(1)
	lead := &fakeLead{term: 4, leading: true}
	s := start(t, conn, Config{Lead: lead})
	s.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Confirmed; return v, !v.IsZero() }, "master")
	lead.set(0, false)
	s.Offer(intentOf(2, 2, time.Hour, web("web", 5, nil, 900, 100)))
	testutil.Eventually(t, 20*time.Second, func() (any, bool) { v := s.Status().Seq; return v, v == 2 }, "intent 2 taken")
	if r := conn.Role(); r.Role != ofp.ControllerRoleSlave || r.GenerationID != 4 {
		t.Fatalf("the switch holds us as %s in generation %d, want SLAVE in 4", roleName(r.Role), r.GenerationID)
	}
	if st := s.Status(); st.Role != "slave" {
		t.Fatalf("status role %q, want slave", st.Role)
	}
}
