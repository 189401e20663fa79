package balancer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"flowweight/controller/config"
	"flowweight/controller/ha"
	"flowweight/controller/state"

	"github.com/prometheus/client_golang/prometheus"
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

// ErrNoBackend: the backend named is not configured.
var ErrNoBackend = errors.New("no such backend")

// DefaultHAStateEvery is how often a leader writes learned capacity to etcd: a standby that
// takes over starts from what the leader learned at most this long ago.
const DefaultHAStateEvery = 5 * time.Second

// haTimeout bounds one etcd request made for the API or at start; haShutdownTimeout the last
// state write when the controller stops.
const (
	haTimeout         = 5 * time.Second
	haShutdownTimeout = time.Second
)

// electorLead is the election as syncers see it (switchsync.Lead).
type electorLead struct{ e Elector }

func (l electorLead) Leading() (uint64, bool)              { return l.e.Leading() }
func (l electorLead) Term() uint64                         { return l.e.Current().Term }
func (l electorLead) Contested(term uint64, reason string) { l.e.Verify(term, reason) }

// writes reports whether this controller may send anything that changes a switch (packet-outs
// included): always without HA, only while leading with it.
func (b *Balancer) writes() bool {
	if b.elector == nil {
		return true
	}
	_, ok := b.elector.Leading()
	return ok
}

// standby reports whether this controller runs with HA and does not lead.
func (b *Balancer) standby() bool { return b.elector != nil && !b.writes() }

// runHA runs the election, follows it and the shared drains until ctx ends.
func (b *Balancer) runHA(ctx context.Context) {
	e := b.elector
	go func() {
		if err := e.Run(ctx); err != nil && ctx.Err() == nil {
			b.log.Error("election stopped; this controller will not write to switches", "err", err)
		}
	}()
	go func() {
		if err := e.WatchDrains(ctx, b.applyDrains); err != nil && ctx.Err() == nil {
			b.log.Error("watching drains in etcd stopped", "err", err)
		}
	}()
	go b.followElection(ctx)
}

// followElection turns each change of the election into an update (a new leader must program
// the switches at once; a deposed one must stop) and an event.
func (b *Balancer) followElection(ctx context.Context) {
	e := b.elector
	var last ha.Leadership
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.Changes():
		}
		cur := e.Current()
		switch {
		case cur.Leader && (!last.Leader || cur.Term != last.Term):
			b.log.Info("elected leader: taking the switches", "term", cur.Term, "lease", cur.TTL)
			b.events.add(Event{Time: b.now(), Kind: "role", Text: fmt.Sprintf("leader in term %d", cur.Term)})
			b.adoptSharedState(ctx)
		case !cur.Leader && last.Leader:
			b.log.Warn("no longer leader: not writing to switches", "term", last.Term, "leader", cur.LeaderName, "why", cur.Err)
			b.events.add(Event{Time: b.now(), Kind: "role", Text: fmt.Sprintf("standby; leader %q in term %d", cur.LeaderName, cur.Term)})
		case cur.Err != last.Err && cur.Err != "":
			b.log.Warn("not campaigning", "why", cur.Err)
			b.events.add(Event{Time: b.now(), Kind: "error", Text: "election: " + cur.Err})
		}
		last = cur
		b.mu.Lock()
		b.dirty = true // a new term plans again everywhere
		b.mu.Unlock()
		b.Kick()
	}
}

// applyDrains makes the operator drains in etcd the pool's: every controller then drains what
// an operator drained through any of them.
func (b *Balancer) applyDrains(drains map[string]bool) {
	b.mu.Lock()
	b.drains = drains
	b.mu.Unlock()
	b.syncDrains()
}

// syncDrains applies the last drain set seen in etcd to the configured backends (after a
// watch event, and after a reload that added backends).
func (b *Balancer) syncDrains() {
	b.mu.Lock()
	drains := b.drains
	b.mu.Unlock()
	if drains == nil {
		return
	}
	changed := false
	for name, on := range b.operatorDrainStates() {
		if drains[name] != on {
			reason := "undrained by operator (etcd)"
			if drains[name] {
				reason = "drained by operator (etcd)"
			}
			b.pool.SetOperatorDrain(name, drains[name], reason)
			changed = true
		}
	}
	if changed {
		b.Kick()
	}
}

// operatorDrainStates is every pool backend's operator drain flag.
func (b *Balancer) operatorDrainStates() map[string]bool {
	out := map[string]bool{}
	for _, st := range b.pool.Snapshot(nil) {
		out[st.Name] = st.OperatorDrain
	}
	return out
}

// loadSharedState is loadState from etcd: the leader's last document of learned capacity and
// replay marks. Drains are not taken from it: they have keys of their own (WatchDrains).
func (b *Balancer) loadSharedState(cfg *config.Config) {
	p := &b.st
	p.remembered = map[string]state.Backend{}
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	f, err := b.sharedState(ctx, cfg)
	switch {
	case err != nil:
		b.log.Warn("shared state in etcd unusable; starting without its learned capacity and replay marks", "err", err)
		b.events.add(Event{Time: b.now(), Kind: "error", Text: "shared state in etcd unusable: " + err.Error()})
		return
	case f == nil:
		b.log.Info("no shared state in etcd yet")
		return
	}
	for name, e := range f.Backends {
		e.OperatorDrain = false
		p.remembered[name] = e
	}
	p.replay = f.Replay
	p.weights, p.weightsFrom = f.Weights, seedFromEtcd
	b.log.Info("shared state loaded from etcd", "backends", len(f.Backends), "replay_marks", len(f.Replay),
		"services_with_weights", len(f.Weights), "written", f.Written)
}

// sharedState reads and checks the document in etcd (nil, nil: none yet) exactly as the
// state file is checked: the same strict decoder, and the same bound on learned capacity.
func (b *Balancer) sharedState(ctx context.Context, cfg *config.Config) (*state.File, error) {
	data, err := b.elector.LoadState(ctx)
	if err != nil || data == nil {
		return nil, err
	}
	f, err := state.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("state document in etcd: %w", err)
	}
	b.boundLearned(f, "state document in etcd", cfg)
	return f, nil
}

// adoptSharedState gives a new leader the learned capacity its predecessor wrote: learning
// must not fork between controllers, or a takeover would move weights by what the two
// learned differently.
func (b *Balancer) adoptSharedState(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, haTimeout)
	defer cancel()
	f, err := b.sharedState(cctx, b.Config())
	if err != nil {
		b.log.Warn("taking over without the previous leader's learned capacity", "err", err)
		return
	}
	if f == nil {
		return
	}
	n := 0
	b.mu.Lock()
	for _, s := range b.services {
		for j, be := range s.cfg.Backends {
			if l := f.Backends[be.Name].LearnedIn(s.cfg.Name); l != 0 {
				s.books[j].learned = l
				n++
			}
		}
	}
	b.mu.Unlock()
	b.log.Info("learned capacity taken over from etcd", "backends", n, "written", f.Written)
}

// saveShared writes the state document to etcd if this controller leads (a standby's learning
// is its own until it takes over). ok false: not written, and not an error worth a log.
func (b *Balancer) saveShared(data []byte) (ok bool, err error) {
	if !b.writes() {
		return false, nil
	}
	timeout := haTimeout
	if b.context().Err() != nil {
		// The last write at shutdown: a controller told to stop must stop, etcd or not.
		timeout = haShutdownTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := b.elector.SaveState(ctx, data); err != nil {
		if !b.writes() {
			return false, nil // deposed meanwhile: the fence refused it, as it should
		}
		return false, err
	}
	return true, nil
}

// HAView is the election as the API and `controller status` show it.
type HAView struct {
	Enabled bool   `json:"enabled"`
	Role    string `json:"role"` // "leader", "standby"; "single" without HA
	Leader  string `json:"leader,omitempty"`
	Term    uint64 `json:"term,omitempty"`
	// LeaseRemaining is, on the leader, how long it may still write without a keep-alive
	// answered (seconds).
	LeaseRemaining float64 `json:"lease_remaining_seconds,omitempty"`
	LeaseTTL       float64 `json:"lease_ttl_seconds,omitempty"`
	Error          string  `json:"error,omitempty"`
	// Switches is each connected switch's role for this controller, by datapath id.
	Switches map[string]string `json:"switches,omitempty"`
}

// HA returns the election's state.
func (b *Balancer) HA() HAView {
	if b.elector == nil {
		return HAView{Role: "single"}
	}
	cur := b.elector.Current()
	v := HAView{Enabled: true, Role: "standby", Leader: cur.LeaderName, Term: cur.Term, LeaseTTL: cur.TTL.Seconds(), Error: cur.Err,
		Switches: map[string]string{}}
	if _, ok := b.elector.Leading(); ok {
		v.Role = "leader"
		v.LeaseRemaining = max(0, cur.ValidUntil.Sub(b.now()).Seconds())
	}
	for _, st := range b.SwitchStatuses() {
		v.Switches[fmt.Sprintf("%016x", st.DPID)] = st.Role
	}
	return v
}

// haCollector exports the election at scrape time; nothing without HA.
type haCollector struct{ p *pushCollector } // shares the Balancer binding

var (
	haLeaderDesc = prometheus.NewDesc("flowweight_ha_leader", "1 while this controller leads (and may write to switches), 0 as a standby.", nil, nil)
	haTermDesc   = prometheus.NewDesc("flowweight_ha_term", "The current leader's term: the generation id in its OpenFlow role requests (0: no leader known).", nil, nil)
	haLeaseDesc  = prometheus.NewDesc("flowweight_ha_lease_remaining_seconds", "On the leader, how long it may still write without a keep-alive answered; 0 on a standby.", nil, nil)
	haInfoDesc   = prometheus.NewDesc("flowweight_ha_info", "1, labelled with this controller's role and the leader's name.", []string{"role", "leader"}, nil)
)

func (c *haCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- haLeaderDesc
	ch <- haTermDesc
	ch <- haLeaseDesc
	ch <- haInfoDesc
}

func (c *haCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.p.b
	if b == nil || b.elector == nil {
		return
	}
	v := b.HA()
	leader := 0.0
	if v.Role == "leader" {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(haLeaderDesc, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(haTermDesc, prometheus.GaugeValue, float64(v.Term))
	ch <- prometheus.MustNewConstMetric(haLeaseDesc, prometheus.GaugeValue, v.LeaseRemaining)
	ch <- prometheus.MustNewConstMetric(haInfoDesc, prometheus.GaugeValue, 1, v.Role, v.Leader)
}
