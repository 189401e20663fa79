package balancer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"flowweight/collector"
	"flowweight/collector/poll"
	"flowweight/collector/push"
	"flowweight/controller/arp"
	"flowweight/controller/config"
	"flowweight/controller/dispatch"
	"flowweight/controller/intent"
	"flowweight/controller/ofswitch"
	"flowweight/controller/ratelog"
	"flowweight/controller/state"
	"flowweight/controller/switchsync"
	"flowweight/controller/view"
	"flowweight/internal/report"
)

// Options are the parts of a Balancer that do not come from the config file.
type Options struct {
	Logger  *slog.Logger
	Now     func() time.Time
	Metrics *Metrics // nil: metrics are kept but not registered anywhere; its board is where the views read
	// StatePath is the state file that keeps operator drains, learned capacity and replay
	// marks across restarts (see docs/operations.md); "" keeps nothing.
	StatePath string
	// StateEvery bounds how often learned capacity alone is written; default
	// DefaultStateEvery (DefaultHAStateEvery with an Elector). Drains are written when they
	// change.
	StateEvery time.Duration
	// Elector is the HA election (docs/ha.md); nil runs one controller alone. With it the
	// shared state lives in etcd and StatePath is not used. New makes the choice once: an
	// Elector gives an elected Lead and the etcd Store, none a solo Lead and the file Store.
	Elector Elector
}

// Balancer is the running controller. Create it with New, start it with Run.
type Balancer struct {
	log     *slog.Logger
	plog    *ratelog.Limiter // per-packet-in lines: at most one per reason per ratelog.Every
	now     func() time.Time
	metrics *Metrics
	pool    *collector.Pool
	events  *view.Log     // the controller's and its peers' events (own lock)
	hist    *view.History // recent weights per backend: the update writes, the views read (own lock)
	board   *view.Board   // where the update publishes what views and metrics read
	lead    Lead          // whether this controller may write: solo, or the HA election
	st      keeper        // what is saved to, and restored from, the Store
	drains  *drains       // operator drains

	// updating serializes update (the loop's, and any caller's such as a test's) and guards
	// snap, its reused snapshot buffer.
	updating sync.Mutex
	snap     []collector.State

	// kick asks the update loop for an early update (a learned MAC, a reload, a connect).
	kick chan struct{}
	// startupUntil ends the start-up hold: New's time plus the stale_after it started with (a
	// reload that changes stale_after later must not hold the services again).
	startupUntil time.Time

	// mu is the update loop's lock: the running configuration and services, the registry of
	// switches, the update counters. Readers do not take it: they read b.board.
	mu       sync.Mutex
	cfg      *config.Config
	services []*service
	switches map[uint64]*switchsync.Syncer // by datapath id: the registry; each syncer owns its switch
	snmp     *poll.Runner                  // the collector's own polls of snmp backends
	ctx      context.Context
	owned    map[uint32]bool // group ids configured since start
	// seq counts updates; gen changes when what the switches should hold may have (a write,
	// a hold ending, a reload: dirty, a kick). See intent.Intent.
	seq, gen uint64
	dirty    bool

	// latest is the last update's intent (nil before the first). What switches that connect
	// later and packet-ins (ARP for the VIPs) read is the board's: the same intent, or before
	// the first update one built from the running state.
	latest atomic.Pointer[intent.Intent]
	notes  *switchsync.Notes // layout notes, shared by every syncer
	plans  *switchsync.Plans // plans, shared by syncers of like switches

	push pushSide // the push server's keys and configured addresses (ingest.go)

	// tls is the OpenFlow listener's current TLS configuration (nil: plain TCP); a reload
	// replaces it, and the next handshake uses the new one.
	tls atomic.Pointer[tls.Config]

	// nb is where backends are on each switch (the ARP learner, its own lock), shared by the
	// syncers, which send the ARP/ND traffic.
	nb *switchsync.Neighbours
	// dispatch chooses reactive services' backends per connection, shared by the syncers
	// (its own lock); it reads the pool's in-flight counts.
	dispatch *dispatch.Dispatcher
}

// New validates nothing (the config was validated by Load) and starts nothing.
func New(cfg *config.Config, opt Options) (*Balancer, error) {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Metrics == nil {
		opt.Metrics = NewMetrics()
	}
	b := &Balancer{log: opt.Logger, now: opt.Now, metrics: opt.Metrics, events: view.NewLog(200), hist: view.NewHistory(360),
		board: opt.Metrics.board, kick: make(chan struct{}, 1), switches: map[uint64]*switchsync.Syncer{},
		owned: map[uint32]bool{}, startupUntil: opt.Now().Add(cfg.Collector.StaleAfter)}
	b.plog = ratelog.New(b.log, func() time.Time { return b.now() })
	b.nb = newNeighbours(b)
	b.notes = switchsync.NewNotes(b.log)
	b.plans = switchsync.NewPlans()
	b.pool = collector.NewPool(poolConfig(cfg, b.now, b.log, onTransition(b.metrics, b.events, b.kick)))
	b.dispatch = dispatch.New(dispatch.Config{Counts: b.pool.ReadInFlight, Now: b.now})
	b.snmp = poll.New(poll.Config{Sink: b.pool, Logger: b.log, PollFailed: func(name string) { b.metrics.snmpErrors.WithLabelValues(name).Inc() }})
	// The one place that asks whether this controller is one of an HA pool.
	var store Store = fileStore{path: opt.StatePath}
	b.lead = solo{}
	every := DefaultStateEvery
	if opt.Elector != nil {
		store, b.lead, every = etcdStore{opt.Elector}, elected{opt.Elector}, DefaultHAStateEvery
	}
	if opt.StateEvery > 0 {
		every = opt.StateEvery
	}
	b.st = keeper{store: store, every: every, off: opt.Elector == nil && opt.StatePath == "", log: b.log, events: b.events,
		now: b.now, writes: b.metrics.stateWrites}
	b.drains = &drains{pool: b.pool, store: store, kick: b.Kick, save: b.saveState}
	b.board.SetSources(view.Sources{Pool: b.pool, Now: b.now, Events: b.events, History: b.hist, Election: b.lead,
		Locate: b.nb.Locator, Drain: b.Drain, Dispatched: b.dispatch.Stats})
	b.board.PublishSwitches(view.Registry{})
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	b.st.load(ctx, cfg)
	cancel()
	if err := b.install(cfg); err != nil {
		return nil, err
	}
	b.snmp.Set(snmpJobs(cfg)) // recorded now, started by Run; a reload before then replaces them
	return b, nil
}

func poolConfig(cfg *config.Config, now func() time.Time, log *slog.Logger, transition func(collector.Transition)) collector.Config {
	return collector.Config{FailThreshold: cfg.Collector.FailThreshold, RiseThreshold: cfg.Collector.RiseThreshold,
		StaleAfter: cfg.Collector.StaleAfter, Warmup: cfg.Weighting.Warmup, Alpha: cfg.Weighting.Alpha,
		Now: now, Logger: log, OnTransition: transition}
}

// onTransition counts every state change; it lists and kicks an early update only for those
// within the backend's log budget (collector.TransitionBurst): a probe flapping its drain flag
// at report rate must not fill the event list or replan at report rate. A quiet change is
// picked up by the next periodic update.
func onTransition(m *Metrics, events *view.Log, kick chan<- struct{}) func(collector.Transition) {
	return func(t collector.Transition) {
		if !t.Catchup {
			m.transitions.WithLabelValues(t.To.String()).Inc()
		}
		// Every change asks for an early update, logged or not: a backend down, or back, is
		// on the switch within an update, not a period later (docs/design.md, "Failure
		// detection time"). The log budget bounds the lines and events a flapping probe can
		// cause; the update loop bounds the updates (updateLoop's spacing of kicked updates).
		select {
		case kick <- struct{}{}:
		default:
		}
		if t.Quiet {
			return
		}
		text := fmt.Sprintf("%s -> %s: %s", t.From, t.To, t.Reason)
		if t.Suppressed > 0 && !t.Catchup {
			text += fmt.Sprintf(" (%d earlier changes not listed)", t.Suppressed)
		}
		events.Add(view.Event{Time: t.Time, Backend: t.Backend, Kind: "state", Text: text})
	}
}

// install makes cfg the running configuration: keys, services, pool membership. It loads
// every key file first, so a reload with an unreadable key changes nothing.
func (b *Balancer) install(cfg *config.Config) error {
	tc, err := loadTLS(cfg.Controller)
	if err != nil {
		return err
	}
	keys := map[string][]byte{}
	cache := map[string][]byte{}
	load := func(path string) ([]byte, error) {
		if k, ok := cache[path]; ok {
			return k, nil
		}
		k, err := report.LoadKey(path)
		if err == nil {
			cache[path] = k
		}
		return k, err
	}
	var names []string
	addrs := map[string][]netip.Addr{}
	for _, s := range cfg.Services {
		for _, be := range s.Backends {
			names = append(names, be.Name)
			if be.Source != "probe" {
				continue
			}
			k, err := ProbeKey(cfg, &be, load)
			if err != nil {
				return fmt.Errorf("backend %q: %w", be.Name, err)
			}
			keys[be.Name] = k
			if a := be.ParsedIP(); a.IsValid() && !slices.Contains(addrs[be.Name], a) {
				addrs[be.Name] = append(addrs[be.Name], a)
			}
		}
	}
	services := make([]*service, len(cfg.Services))
	drained := operatorDrains(b.pool)
	b.mu.Lock()
	old := map[string]*service{}
	for _, s := range b.services {
		old[s.cfg.Name] = s
	}
	for i := range cfg.Services {
		services[i] = newService(cfg, &cfg.Services[i], i, old[cfg.Services[i].Name])
	}
	configured := map[string]bool{}
	for i := range cfg.Services {
		for _, be := range cfg.Services[i].Backends {
			configured[be.Name] = true
		}
	}
	for name, o := range old {
		for _, be := range o.cfg.Backends {
			if !configured[be.Name] {
				b.metrics.snmpErrors.DeleteLabelValues(be.Name)
			}
		}
		var next *config.Service
		for i := range cfg.Services {
			if cfg.Services[i].Name == name {
				next = &cfg.Services[i]
			}
		}
		if next == nil {
			b.metrics.forgetService(name)
			continue
		}
		for _, be := range o.cfg.Backends {
			if !slices.ContainsFunc(next.Backends, func(n config.Backend) bool { return n.Name == be.Name }) {
				b.metrics.forgetBackend(name, be.Name)
			}
		}
	}
	restoreDrain := b.st.remember(b.services, services, drained)
	b.cfg, b.services = cfg, services
	b.dirty = true
	b.tls.Store(tc)
	live := map[string]bool{}
	for _, s := range services {
		for _, be := range s.cfg.Backends {
			live[s.cfg.Name+"/"+be.Name] = true
		}
	}
	b.hist.Keep(live)
	in := b.latest.Load() // the intent the switches are offered stays the last update's
	if in == nil {
		in = b.intentLocked(false) // before the first update: one built from the running state
	}
	b.board.Publish(snapshotOf(services, in))
	kept := map[string]bool{}
	for _, s := range services {
		kept[s.cfg.Name] = true
	}
	b.notes.Forget(kept)
	b.dispatch.Forget(func(name string) bool { return kept[name] })
	pushsrv := b.push.configure(keys, addrs)
	b.mu.Unlock()
	b.pool.Reconfigure(poolConfig(cfg, b.now, b.log, onTransition(b.metrics, b.events, b.kick)))
	added, removed := b.pool.SetBackends(names)
	for _, n := range restoreDrain {
		b.pool.SetOperatorDrain(n, true, "operator drain restored (state file, or kept while a reload had removed the backend)")
	}
	if pushsrv != nil {
		// A removed backend keeps its replay state while the pool keeps its tombstone: put
		// back within the grace, its captured reports stay refused (a fresh epoch would take
		// them again within the clock window). Past it, the state goes. Only backends that
		// had a key ever have replay state, so this is bounded by the configured names.
		for n := range pushsrv.ReplayMarks() {
			if !b.pool.Remembers(n) {
				pushsrv.Forget(n)
			}
		}
	}
	if len(added)+len(removed) > 0 {
		b.log.Info("backends changed", "added", added, "removed", removed)
	}
	b.drains.sync() // HA: a backend put back keeps the drain etcd holds for it
	return nil
}

// Reload validates and applies a new configuration atomically: an error leaves the running
// configuration untouched. Listen addresses cannot change without a restart, and a file that
// removes too much at once is refused (ReloadFile with AllowRemoval applies it).
func (b *Balancer) Reload(cfg *config.Config) error {
	return b.reload("configuration", cfg, ReloadOptions{})
}

func (b *Balancer) reload(path string, cfg *config.Config, opt ReloadOptions) error {
	b.mu.Lock()
	cur := b.cfg
	b.mu.Unlock()
	if r := config.Compare(cur, cfg); r.NeedsConfirmation(opt.cutShort) && !opt.AllowRemoval {
		_, statePath := b.st.store.Where()
		e := &RemovalRefusedError{File: path, Removal: r, State: statePath}
		if !r.Mass() {
			e.CutShort = opt.cutShort
		}
		return e
	}
	if err := config.RestartNeeded(cur, cfg); err != nil {
		return err
	}
	if err := b.install(cfg); err != nil {
		return err
	}
	b.lead.SetFingerprint(cfg.Fingerprint())
	b.saveState()
	b.snmp.Set(snmpJobs(cfg))
	b.events.Add(view.Event{Time: b.now(), Kind: "config", Text: "configuration reloaded"})
	b.Kick()
	return nil
}

// Config returns the running configuration (do not modify it).
func (b *Balancer) Config() *config.Config {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
}

// Pool gives access to backend states (API, tests).
func (b *Balancer) Pool() *collector.Pool { return b.pool }

// Kick asks for an update as soon as possible.
func (b *Balancer) Kick() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// View is the controller's read side (the API, the dashboard, `controller status`): what
// the update loop last published, never the loop's own state.
func (b *Balancer) View() *view.Board { return b.board }

// Drain drains or undrains a backend by name (the API's call): ErrNoBackend when no backend
// has the name. With HA the drain is stored in etcd first, so every controller applies it and
// it holds after a failover; when etcd does not take it, nothing changes and the error says so.
func (b *Balancer) Drain(name string, drained bool) error {
	return b.drains.Drain(b.context(), name, drained)
}

// saveState writes the state document now if its content changed (keeper.save).
func (b *Balancer) saveState() {
	b.st.save(b.context().Err() != nil, func() *state.File {
		drained := operatorDrains(b.pool)
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.st.build(b.services, drained)
	})
}

// Run listens for switches and probes and runs the update loops until ctx ends.
func (b *Balancer) Run(ctx context.Context, ready func(of, push net.Addr)) error {
	cfg := b.Config()
	ofcfg := ofswitch.Config{Listen: cfg.Controller.Listen, EchoInterval: cfg.Controller.EchoInterval,
		BarrierTimeout: cfg.Controller.BarrierTimeout, Logger: b.log, CertNamesDatapath: cfg.Controller.TLSNamesDPID}
	if b.tls.Load() != nil {
		ofcfg.TLS = listenerTLS(&b.tls)
	}
	ofsrv, err := ofswitch.NewServer(ofcfg, b)
	if err != nil {
		return fmt.Errorf("openflow listener: %w", err)
	}
	pushsrv, err := push.New(push.Config{Listen: cfg.Collector.PushListen, KeyFor: b.push.keyFor,
		ClockSkew: cfg.Collector.ClockSkew, Now: b.now, Logger: b.log}, b.pool)
	if err != nil {
		return fmt.Errorf("push listener: %w", err)
	}
	b.mu.Lock()
	b.ctx = ctx
	b.mu.Unlock()
	b.push.attach(pushsrv)
	b.st.attach(replayStoreOf(pushsrv, b.log))
	b.board.SetServers(ofsrv, pushsrv)
	if ready != nil {
		ready(ofsrv.Addr(), pushsrv.Addr())
	}
	b.log.Info("controller listening", "openflow", ofsrv.Addr().String(), "push", pushsrv.Addr().String())
	errc := make(chan error, 2)
	go func() { errc <- ofsrv.Serve(ctx) }()
	go func() { errc <- pushsrv.Serve(ctx) }()
	b.snmp.Start(ctx) // with the jobs of the configuration installed last (New, reload)
	b.runHA(ctx)
	go b.updateLoop(ctx)
	go b.followLoop(ctx)
	<-ctx.Done()
	err = errors.Join(<-errc, <-errc)
	b.snmp.Wait()
	b.saveState() // learned capacity since the last periodic write
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// Connected implements ofswitch.Handler: the switch gets its own syncer, which reads back
// what it holds and brings it to the latest intent (no duplicates: planning against the
// read-back adds only what is missing and deletes only what is ours and stale).
func (b *Balancer) Connected(sw *ofswitch.Switch) {
	dpid := sw.DatapathID()
	sy := switchsync.New(switchsync.Config{Conn: sw, OVS: switchsync.VersionOf(b.log, sw.String(), sw.Desc()), Logger: b.log, Now: b.now,
		Neighbours: b.nb, Up: upward{b},
		Notes: b.notes,
		Plans: b.plans,
		Lead:  b.lead.Syncer(),
		Dispatch: switchsync.DispatchConfig{Dispatcher: b.dispatch, Limited: b.plog, Metrics: switchsync.DispatchMetrics{
			Dispatched: b.metrics.dispatched, Dropped: b.metrics.dispatchDropped, Seconds: b.metrics.dispatchSeconds}},
		Metrics: switchsync.Metrics{Rewrites: b.metrics.rewrites, RewriteErrors: b.metrics.rewriteErrors,
			Drift: b.metrics.drift, BarrierRTT: b.metrics.barrierRTT, Contested: b.metrics.contested}})
	b.mu.Lock()
	b.switches[dpid] = sy
	b.board.PublishSwitches(maps.Clone(b.switches))
	ctx := b.ctx
	b.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	b.metrics.switchUp.WithLabelValues(sw.String()).Set(1)
	b.events.AddPeer(view.Event{Time: b.now(), Kind: "switch", Text: "switch " + sw.String() + " connected from " + sw.RemoteAddr().String()})
	// Rate-limited per datapath id: a peer reconnecting in a loop cannot flood the log, and
	// distinct switches each get their line (ratelog bounds the ids it tracks).
	b.plog.Log(slog.LevelInfo, "connect "+sw.String(), "switch connected", "dpid", sw.String(), "remote", sw.RemoteAddr().String())
	// The syncer ends with the session (Run watches sw.Done).
	go sy.Run(ctx)
	sy.Offer(b.board.Latest().Intent)
	b.Kick()
}

func (b *Balancer) context() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return context.Background()
	}
	return b.ctx
}

// Disconnected implements ofswitch.Handler. Installed flows stay on a fail-secure switch.
func (b *Balancer) Disconnected(sw *ofswitch.Switch, err error) {
	b.mu.Lock()
	if cur, ok := b.switches[sw.DatapathID()]; ok && cur.Serves(sw) {
		delete(b.switches, sw.DatapathID())
		b.board.PublishSwitches(maps.Clone(b.switches))
	}
	b.mu.Unlock()
	// The series goes with the switch: datapath ids are chosen by whoever connects, and a
	// series per id ever seen would grow without bound. The session table refuses a second
	// live session of an id, so no newer session of this id has set it yet.
	b.metrics.forgetSwitch(sw.String())
	b.events.AddPeer(view.Event{Time: b.now(), Kind: "switch", Text: "switch " + sw.String() + " disconnected"})
	b.plog.Warn("disconnect "+sw.String(), "switch disconnected", "dpid", sw.String(), "err", err)
}

// VIPMAC returns the MAC a service's VIP answers with.
func vipMAC(s *config.Service) net.HardwareAddr {
	if m := s.ParsedVIPMAC(); m != nil {
		return m
	}
	return arp.VIPMAC(s.ParsedVIP())
}

func readFileTrim(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := string(data)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s, nil
}
