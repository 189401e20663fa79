package balancer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"flowweight/controller/ha"
	"flowweight/controller/switchsync"
	"flowweight/controller/view"
)

// Elector is the controllers' election and shared state on etcd (ha.Elector; a fake in
// tests). With one, the balancer computes as always but writes to switches only while it
// leads, and keeps drains and learned capacity in etcd instead of the state file
// (docs/ha.md).
type Elector interface {
	Run(ctx context.Context) error
	Current() ha.Leadership
	Changes() <-chan struct{}
	Leading() (term uint64, ok bool)
	// Verify asks the election whether we still lead in term, since a switch said another
	// controller is master; it steps down only if etcd shows a newer leader (ha.Elector.Verify).
	Verify(term uint64, reason string)
	SetDrain(ctx context.Context, backend string, drained bool) error
	WatchDrains(ctx context.Context, apply func(map[string]bool)) error
	SaveState(ctx context.Context, doc []byte) error
	LoadState(ctx context.Context) ([]byte, error)
	// SetFingerprint follows a reload (config.Config.Fingerprint).
	SetFingerprint(fp string)
}

// Lead is whether this controller may write to switches, as the balancer asks it. A
// controller alone is a solo Lead: always leading, term 0, nothing to fence. With HA it is
// the election (elected). Nothing else in the balancer asks whether HA is on.
type Lead interface {
	// Leading reports the term and whether this controller leads (and may write, packet-outs
	// included).
	Leading() (term uint64, ok bool)
	// Run runs the election until ctx ends; Changes signals its changes (solo: never).
	Run(ctx context.Context) error
	Changes() <-chan struct{}
	Current() ha.Leadership
	// SetFingerprint follows a reload (config.Config.Fingerprint).
	SetFingerprint(fp string)
	// Syncer is the election as a syncer sees it: nil for a solo controller, which sends no
	// role requests (switchsync.Config.Lead).
	Syncer() switchsync.Lead
	// View is the election for the API and the metrics (view.Board.HA).
	View(now time.Time) view.HAView
}

// ErrNoBackend: the backend named is not configured (view.ErrNoBackend, which the API
// checks).
var ErrNoBackend = view.ErrNoBackend

// DefaultHAStateEvery is how often a leader writes learned capacity to etcd: a standby that
// takes over starts from what the leader learned at most this long ago.
const DefaultHAStateEvery = 5 * time.Second

// haTimeout bounds one etcd request made for the API or at start; haShutdownTimeout the last
// state write when the controller stops.
const (
	haTimeout         = 5 * time.Second
	haShutdownTimeout = time.Second
)

// solo is the Lead of a controller alone.
type solo struct{}

func (solo) Leading() (uint64, bool)       { return 0, true }
func (solo) Run(ctx context.Context) error { return nil }
func (solo) Changes() <-chan struct{}      { return nil }
func (solo) Current() ha.Leadership        { return ha.Leadership{Leader: true} }
func (solo) SetFingerprint(string)         {}
func (solo) Syncer() switchsync.Lead       { return nil }
func (solo) View(time.Time) view.HAView    { return view.HAView{Role: "single"} }

// elected is the Lead of a controller in an HA pool: the election on etcd.
type elected struct{ e Elector }

func (l elected) Leading() (uint64, bool)       { return l.e.Leading() }
func (l elected) Run(ctx context.Context) error { return l.e.Run(ctx) }
func (l elected) Changes() <-chan struct{}      { return l.e.Changes() }
func (l elected) Current() ha.Leadership        { return l.e.Current() }
func (l elected) SetFingerprint(fp string)      { l.e.SetFingerprint(fp) }
func (l elected) Syncer() switchsync.Lead       { return electorLead(l) }

// View is the election's state; the board adds each switch's role.
func (l elected) View(now time.Time) view.HAView {
	cur := l.e.Current()
	v := view.HAView{Enabled: true, Role: "standby", Leader: cur.LeaderName, Term: cur.Term, LeaseTTL: cur.TTL.Seconds(), Error: cur.Err}
	if _, ok := l.e.Leading(); ok {
		v.Role = "leader"
		v.LeaseRemaining = max(0, cur.ValidUntil.Sub(now).Seconds())
	}
	return v
}

// electorLead is the election as syncers see it (switchsync.Lead).
type electorLead struct{ e Elector }

func (l electorLead) Leading() (uint64, bool)              { return l.e.Leading() }
func (l electorLead) Term() uint64                         { return l.e.Current().Term }
func (l electorLead) Contested(term uint64, reason string) { l.e.Verify(term, reason) }

// leading reports whether l lets this controller write now.
func leading(l Lead) bool {
	_, ok := l.Leading()
	return ok
}

// runLead runs the election and follows it until ctx ends: each change becomes a call of
// changed (a new leader must program the switches at once; a deposed one must stop) and an
// event. A solo Lead never changes.
func runLead(ctx context.Context, l Lead, log *slog.Logger, events *view.Log, now func() time.Time, changed func(cur ha.Leadership, took bool)) {
	go func() {
		if err := l.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("election stopped; this controller will not write to switches", "err", err)
		}
	}()
	go func() {
		var last ha.Leadership
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.Changes():
			}
			cur := l.Current()
			took := false
			switch {
			case cur.Leader && (!last.Leader || cur.Term != last.Term):
				log.Info("elected leader: taking the switches", "term", cur.Term, "lease", cur.TTL)
				events.Add(view.Event{Time: now(), Kind: "role", Text: fmt.Sprintf("leader in term %d", cur.Term)})
				took = true
			case !cur.Leader && last.Leader:
				log.Warn("no longer leader: not writing to switches", "term", last.Term, "leader", cur.LeaderName, "why", cur.Err)
				events.Add(view.Event{Time: now(), Kind: "role", Text: fmt.Sprintf("standby; leader %q in term %d", cur.LeaderName, cur.Term)})
			case cur.Err != last.Err && cur.Err != "":
				log.Warn("not campaigning", "why", cur.Err)
				events.Add(view.Event{Time: now(), Kind: "error", Text: "election: " + cur.Err})
			}
			last = cur
			changed(cur, took)
		}
	}()
}

// runHA follows the Lead and the store's drains until ctx ends (a solo Lead and the file
// store have nothing to follow). A new term plans again everywhere and, for a new leader,
// takes the learned capacity its predecessor wrote: learning must not fork between
// controllers, or a takeover would move weights by what the two learned differently.
func (b *Balancer) runHA(ctx context.Context) {
	runLead(ctx, b.lead, b.log, b.events, b.now, func(_ ha.Leadership, took bool) {
		if took {
			if f := b.st.takeOver(ctx, b.Config()); f != nil {
				b.mu.Lock()
				n := adoptLearned(b.services, f)
				b.mu.Unlock()
				b.log.Info("learned capacity taken over from etcd", "backends", n, "written", f.Written)
			}
		}
		b.mu.Lock()
		b.dirty = true
		b.mu.Unlock()
		b.Kick()
	})
	go b.drains.watch(ctx, b.log)
}
