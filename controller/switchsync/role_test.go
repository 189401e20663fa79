package switchsync

import (
	"sync"
	"testing"
	"time"

	"flowweight/controller/dataplane"

	"github.com/netrack/openflow/ofp"
)

// fakeLead is an election a test moves by hand.
type fakeLead struct {
	mu       sync.Mutex
	term     uint64 // the observed leader's term
	leading  bool
	stepDown []uint64
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

func (l *fakeLead) StepDown(term uint64, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stepDown = append(l.stepDown, term)
	if l.term == term {
		l.leading = false
	}
}

func (l *fakeLead) set(term uint64, leading bool) {
	l.mu.Lock()
	l.term, l.leading = term, leading
	l.mu.Unlock()
}

func (l *fakeLead) stepDowns() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.stepDown...)
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
		waitFor(t, "standby read back", func() bool { return len(s.Status().Seeds["web"]) == 2 })
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
	waitFor(t, "slave", func() bool { return s.Status().Role == "slave" })
	lead.set(9, true)
	s.Offer(intentOf(2, 2, time.Hour, web("web", 5, nil, 500, 500)))
	waitFor(t, "confirmed master", func() bool { return !s.Status().Confirmed.IsZero() })
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

// TestDeposedLeaderStepsDown: another controller takes MASTER with a newer term: the syncer
// hears the role change, steps down, and its next write attempt is refused by the switch.
func TestDeposedLeaderStepsDown(t *testing.T) {
	conn := NewFakeConn(1)
	lead := &fakeLead{term: 4, leading: true}
	s := start(t, conn, Config{Lead: lead})
	s.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))
	waitFor(t, "master", func() bool { return !s.Status().Confirmed.IsZero() })
	before := conn.State()
	conn.Takeover(5)
	waitFor(t, "step-down on role status", func() bool { return len(lead.stepDowns()) == 1 })
	if got := lead.stepDowns()[0]; got != 4 {
		t.Fatalf("stepped down in term %d, want 4", got)
	}
	// Still believing it leads term 4 (a lease that has not run out locally): its role
	// request is stale, and it writes nothing.
	lead.set(4, true)
	s.Offer(intentOf(2, 2, time.Hour, web("web", 5, nil, 900, 100)))
	waitFor(t, "stale role request", func() bool { return len(lead.stepDowns()) == 2 })
	if !conn.State().Equal(before) {
		t.Fatal("a deposed leader changed the switch")
	}
}

// TestStaleTermNeverWrites: a leader whose term the switch already saw superseded gets a
// stale error for its MASTER request and writes nothing.
func TestStaleTermNeverWrites(t *testing.T) {
	conn := NewFakeConn(1)
	if _, err := conn.RequestRole(t.Context(), ofp.ControllerRoleMaster, 10); err != nil {
		t.Fatal(err)
	}
	conn.Takeover(10) // someone else holds term 10; we are slave
	lead := &fakeLead{term: 8, leading: true}
	s := start(t, conn, Config{Lead: lead})
	s.Offer(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500)))
	waitFor(t, "step-down", func() bool { return len(lead.stepDowns()) > 0 })
	if conn.Applies() != 0 || len(conn.State().Groups) != 0 {
		t.Fatalf("a stale leader wrote: %d applies", conn.Applies())
	}
}
