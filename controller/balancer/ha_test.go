package balancer

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"flowweight/controller/ha"
	"flowweight/controller/state"
	"flowweight/controller/switchsync"
	"flowweight/internal/testutil"
)

// fakeElector is an election and an etcd a test moves by hand.
type fakeElector struct {
	mu       sync.Mutex
	cur      ha.Leadership
	changes  chan struct{}
	drains   map[string]bool
	doc      []byte
	saves    int
	failPuts error
	fp       string
	watch    func(map[string]bool)
	// etcdTerm is the term etcd holds the election in (0: the leader's own), what Verify
	// reads; verified lists the terms Verify was asked about, stepDowns those given up.
	etcdTerm  uint64
	verified  []uint64
	stepDowns []uint64
}

func newFakeElector() *fakeElector {
	return &fakeElector{changes: make(chan struct{}, 1), drains: map[string]bool{}}
}

func (f *fakeElector) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (f *fakeElector) Current() ha.Leadership {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}
func (f *fakeElector) Changes() <-chan struct{} { return f.changes }
func (f *fakeElector) SetFingerprint(fp string) {
	f.mu.Lock()
	f.fp = fp
	f.mu.Unlock()
}
func (f *fakeElector) Leading() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur.Term, f.cur.Leader
}
func (f *fakeElector) StepDown(term uint64, _ string) {
	f.mu.Lock()
	f.stepDowns = append(f.stepDowns, term)
	f.mu.Unlock()
	f.set(ha.Leadership{})
}

// Verify steps down only when "etcd" holds the election in another term, as ha.Elector does.
func (f *fakeElector) Verify(term uint64, _ string) {
	f.mu.Lock()
	f.verified = append(f.verified, term)
	newer := f.etcdTerm != 0 && f.etcdTerm != term
	f.mu.Unlock()
	if newer {
		f.StepDown(term, "etcd has a newer leader")
	}
}
func (f *fakeElector) SetDrain(_ context.Context, name string, on bool) error {
	f.mu.Lock()
	if f.failPuts != nil {
		f.mu.Unlock()
		return f.failPuts
	}
	f.drains[name] = on
	snap := map[string]bool{}
	for k, v := range f.drains {
		if v {
			snap[k] = true
		}
	}
	w := f.watch
	f.mu.Unlock()
	if w != nil {
		w(snap)
	}
	return nil
}
func (f *fakeElector) WatchDrains(ctx context.Context, apply func(map[string]bool)) error {
	f.mu.Lock()
	f.watch = apply
	f.mu.Unlock()
	<-ctx.Done()
	return nil
}
func (f *fakeElector) SaveState(_ context.Context, doc []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.cur.Leader {
		return errors.New("not leader")
	}
	f.doc = append([]byte(nil), doc...)
	f.saves++
	return nil
}
func (f *fakeElector) LoadState(context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.doc, nil
}
func (f *fakeElector) set(l ha.Leadership) {
	f.mu.Lock()
	f.cur = l
	f.mu.Unlock()
	select {
	case f.changes <- struct{}{}:
	default:
	}
}

func startHA(t *testing.T, e *fakeElector) *Balancer {
	t.Helper()
	cfg := testConfig(t, "")
	b, err := New(cfg, Options{Elector: e, Logger: slog.New(slog.DiscardHandler), StatePath: t.TempDir() + "/unused.state"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b.runHA(ctx)
	testutil.Until(t, 10*time.Second, func() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.watch != nil }, "drain watch")
	return b
}

// TestHADrainGoesThroughEtcd: a drain is stored in etcd before it is made; when etcd refuses
// it, the API gets the error and nothing changes. A drain another controller stored arrives
// through the watch.
func TestHADrainGoesThroughEtcd(t *testing.T) {
	e := newFakeElector()
	b := startHA(t, e)
	name := b.Config().Services[0].Backends[0].Name
	e.mu.Lock()
	e.failPuts = errors.New("etcdserver: request timed out")
	e.mu.Unlock()
	err := b.Drain(name, true)
	if err == nil || !strings.Contains(err.Error(), "not stored in etcd") || !strings.Contains(err.Error(), name) {
		t.Fatalf("drain with etcd failing: %v", err)
	}
	if operatorDrained(t, b, name) {
		t.Fatal("drained although etcd refused the drain")
	}
	if err := b.Drain("nobody", true); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("unknown backend: %v", err)
	}
	e.mu.Lock()
	e.failPuts = nil
	e.mu.Unlock()
	// Another controller's drain, seen through the watch.
	if err := e.SetDrain(context.Background(), name, true); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 10*time.Second, func() bool { return operatorDrained(t, b, name) }, "drain from etcd applied")
	if err := b.Drain(name, false); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 10*time.Second, func() bool { return !operatorDrained(t, b, name) }, "undrain applied")
}

// TestHAStateOnlyFromTheLeader: a standby writes no shared state; a leader writes it to etcd
// (never to the state file), and a new leader adopts the learned capacity written there.
func TestHAStateOnlyFromTheLeader(t *testing.T) {
	e := newFakeElector()
	e.set(ha.Leadership{Term: 3, LeaderName: "other"})
	b := startHA(t, e)
	b.saveState()
	if e.saves != 0 {
		t.Fatalf("a standby wrote the shared state %d times", e.saves)
	}
	if v := b.View().HA(); v.Role != "standby" || v.Leader != "other" || v.Term != 3 {
		t.Fatalf("standby view %+v", v)
	}
	s := b.services[0]
	be := s.cfg.Backends[0].Name
	doc, err := state.Encode(&state.File{Version: state.Version, Backends: map[string]state.Backend{be: {Service: s.cfg.Name, LearnedCapacity: 2.5}}})
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.doc = doc
	e.mu.Unlock()
	e.set(ha.Leadership{Leader: true, Term: 4, LeaderName: "me", TTL: time.Second, ValidUntil: time.Now().Add(time.Hour)})
	testutil.Until(t, 10*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return s.books[0].learned == 2.5
	}, "learned capacity adopted")
	if v := b.View().HA(); v.Role != "leader" || v.Term != 4 || v.LeaseRemaining <= 0 {
		t.Fatalf("leader view %+v", v)
	}
	b.saveState()
	e.mu.Lock()
	saved := e.saves
	e.mu.Unlock()
	if saved != 1 {
		t.Fatalf("the leader wrote the shared state %d times, want 1", saved)
	}
	// A reload tells the election the new fingerprint.
	next := testConfig(t, "")
	next.Services[0].Backends[0].Capacity = 3
	if err := b.Reload(next); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	fp := e.fp
	e.mu.Unlock()
	if fp != next.Fingerprint() {
		t.Fatalf("election fingerprint %q after the reload, want %q", fp, next.Fingerprint())
	}
}

// TestHAOneSwitchCannotDepose: a fake switch on an unused datapath id that claims another
// controller is master (here a role status with a newer generation id) makes the leader stop
// writing to that switch and ask the election, which still shows it leading: it stays
// leader. Only when etcd shows a newer term does a claim depose it. Before, the claim alone
// made the leader step down, and the same switch could do it to every new leader.
func TestHAOneSwitchCannotDepose(t *testing.T) {
	e := newFakeElector()
	e.set(ha.Leadership{Leader: true, Term: 4, LeaderName: "me", TTL: time.Second, ValidUntil: time.Now().Add(time.Hour)})
	b := startHA(t, e)
	claim := func(dpid uint64) *switchsync.Syncer {
		conn := switchsync.NewFakeConn(dpid)
		sy := switchsync.New(switchsync.Config{Conn: conn, Lead: b.lead.Syncer(), Neighbours: b.nb})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { sy.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		sy.Offer(b.board.Latest().Intent)
		testutil.Until(t, 10*time.Second, func() bool { return sy.Status().Role == "master" }, "master on the fake switch")
		e.mu.Lock()
		heard := len(e.verified) + len(e.stepDowns)
		e.mu.Unlock()
		conn.Takeover(1 << 40) // "another controller is master", from a switch nobody else uses
		testutil.Until(t, 10*time.Second, func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return len(e.verified)+len(e.stepDowns) > heard
		}, "the claim reaching the election")
		return sy
	}
	claim(0xfa4e)
	if v := b.View().HA(); v.Role != "leader" || v.Term != 4 {
		t.Fatalf("one switch's claim deposed the leader: %+v (stepped down in %v)", v, e.stepDowns)
	}
	// A real takeover: etcd holds the election in term 5 by now.
	e.mu.Lock()
	e.etcdTerm = 5
	e.mu.Unlock()
	claim(0xfa4f)
	testutil.Until(t, 10*time.Second, func() bool { return b.View().HA().Role == "standby" }, "stepped down")
}
