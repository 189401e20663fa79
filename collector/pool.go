package collector

import (
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"flowweight/internal/report"
	"flowweight/weights"

	"flowweight/internal/fraction"
	"flowweight/internal/health"
)

// Config tunes the state machine; see controller.toml's [collector] for the defaults.
type Config struct {
	FailThreshold int           // consecutive failed health checks -> down
	RiseThreshold int           // consecutive good checks to leave down or stale, into warm-up
	StaleAfter    time.Duration // no report for this long -> stale
	Warmup        time.Duration // warming -> up after this long
	Alpha         float64       // EWMA factor for utilisations and connections
	Now           func() time.Time
	Logger        *slog.Logger
	// OnTransition, if set, sees every state change (metrics, the dashboard's event list),
	// with Quiet set on those over the backend's log budget (TransitionBurst), and the
	// catch-up lines that end a quiet run (Catchup). It runs with the pool locked: it must not
	// call back into the Pool.
	OnTransition func(Transition)
	// SlowEvictAfter is how long a busy backend may go on answering every health check late
	// before it is taken out anyway, and then only while fewer than half of the live
	// backends are slow (an outlier, not the pool's load); default DefaultSlowEvictAfter.
	// See check: a late answer from a busy backend is load, not death.
	SlowEvictAfter time.Duration
	// TombstoneGrace is how long SetBackends keeps a removed backend's whole state (health
	// machine, EWMAs, drain) so that a backend put back by a later reload resumes where it was
	// instead of starting unknown; default DefaultTombstoneGrace. At most MaxTombstones are kept.
	TombstoneGrace time.Duration
}

// Bounds on removed backends' kept state: a file that flaps between two versions keeps its
// backends warm, and a long run of renames cannot grow memory without limit.
const (
	DefaultSlowEvictAfter = 30 * time.Second
	DefaultTombstoneGrace = 10 * time.Minute
	MaxTombstones         = 1024
)

// tombstone is a removed backend's state, kept for TombstoneGrace.
type tombstone struct {
	b  *backend
	at time.Time
}

// Transition is one state change of one backend, logged once unless Quiet.
type Transition struct {
	Time     time.Time
	Backend  string
	From, To weights.Status
	Reason   string
	// Quiet: the backend's log budget (TransitionBurst, TransitionEvery) is spent; the change
	// is not logged, and should be counted rather than listed or acted on at once.
	Quiet bool
	// Suppressed is how many quiet changes of the backend came before this logged one.
	Suppressed uint64
	// Catchup: not a change but the end of a quiet run: From is the state last logged, To
	// the state now (possibly the same).
	Catchup bool
}

// Sample is one measurement of a backend from any source.
type Sample struct {
	CPUUtil, MemUtil, NetUtil float64
	Conns                     float64
	CPUCount                  float64
	MemBytes                  float64
	HasCPU                    bool // false when the source could not measure CPU this time
	Signals                   Signals
}

// Signals are the optional load signals of a sample (push protocol version 2). Each is
// meaningful only with its Has flag: absent is not zero.
type Signals struct {
	// ServiceCPU is the CPU the service's own processes used, as a fraction of CPUCount.
	ServiceCPU    float64
	HasServiceCPU bool
	// CPUPressure is the fraction of the interval in which some task waited for a CPU (PSI
	// "some"), smoothed in State; PressureCgroup says it is the cgroup's own rather than the
	// host's.
	CPUPressure    float64
	HasPressure    bool
	PressureCgroup bool
	// Throttled is the fraction of CFS periods in which the cgroup hit its quota.
	Throttled    float64
	HasThrottled bool
	// HasHealthLatency says Health.Latency is a measured check time.
	HasHealthLatency bool
	// ConnsStale says Sample.Conns is not a count (report.SignalConnsStale): the source could
	// not count for a while and sent 0. It is smoothed as before, but never becomes
	// LastConns, so a drain cannot take it for no connections.
	ConnsStale bool
}

// SignalsOf takes the optional signals of a push report (version 1 carries at most the
// health-check latency).
func SignalsOf(r *report.Report) Signals {
	has := func(s report.Signals) bool { return r.Signals&s != 0 }
	sig := Signals{HasServiceCPU: has(report.SignalServiceCPU), HasPressure: has(report.SignalCPUPressure),
		PressureCgroup: has(report.SignalPressureCgroup), HasThrottled: has(report.SignalThrottled),
		HasHealthLatency: has(report.SignalHealthLatency), ConnsStale: has(report.SignalConnsStale)}
	if sig.HasServiceCPU {
		sig.ServiceCPU = r.ServiceCPU
	}
	if sig.HasPressure {
		sig.CPUPressure = r.CPUPressure
	}
	if sig.HasThrottled {
		sig.Throttled = r.Throttled
	}
	return sig
}

// Names lists the signals present, comma-separated in a fixed order ("service_cpu,cpu_pressure");
// "none" when none is.
func (s Signals) Names() string {
	var names []string
	for _, x := range []struct {
		on   bool
		name string
	}{{s.HasServiceCPU, "service_cpu"}, {s.HasPressure, "cpu_pressure"}, {s.HasThrottled, "throttled"}, {s.HasHealthLatency, "health_latency"}, {s.ConnsStale, "conns_stale"}} {
		if x.on {
			names = append(names, x.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// Health is one health-check result.
type Health struct {
	OK      bool
	Status  int           // HTTP status, 0 when there was no response
	Latency time.Duration // of the check
	Err     string        // why it failed, empty when OK
	// Timeout says the service did not answer within the check's timeout (health.TimedOut
	// of Err, for both the probe's checks and the collector's own): on a busy backend that
	// is load, which the weights answer, not death, which eviction answers.
	Timeout bool
}

// State is the immutable view of one backend that Snapshot returns.
type State struct {
	Name          string
	Status        weights.Status
	Since         time.Time     // when Status was entered
	WarmupElapsed time.Duration // since the backend last began warming, while warming or up; for weights
	HasMetrics    bool
	CPU, Mem, Net float64 // smoothed
	Conns         float64 // smoothed
	CPUCount      float64
	MemBytes      float64
	// Signals holds the optional signals of the latest sample, ServiceCPU smoothed like CPU.
	// A signal the latest sample lacked is absent, whatever earlier ones said: a stale
	// pidfile must not leave the weighting on a value from before.
	Signals    Signals
	LastReport time.Time // zero when none yet
	LastHealth Health
	ConsecFail int
	ConsecOK   int
	// Slow says the backend's health checks time out while it is busy: it stays in service
	// (its weight answers its load) until RiseThreshold checks in a row pass again.
	// ConsecSlow counts those late checks in a row, since SlowSince.
	Slow          bool
	ConsecSlow    int
	SlowSince     time.Time
	ProbeDrain    bool // the backend itself asked to be drained
	OperatorDrain bool // drained through the API
	// DrainedAt is when OperatorDrain last went on (zero while it is off): a connection count
	// reported soon after may have been counted before it (a probe reuses a count for its
	// conns_interval), so a drain waits for one reported later (view.Decide).
	DrainedAt   time.Time
	Reports     uint64
	LateReports uint64         // push reports that arrived after a newer one of the same boot, counted only
	From        netip.AddrPort // where the last push report came from
	// InFlight is the work in flight (connections on the service ports) of the latest
	// in-flight report (report.SignalInFlight), counted at InFlightAt; zero time: none yet.
	// It is not smoothed: the fast loop wants the queue as it is now (weights.FollowInFlight).
	InFlight   float64
	InFlightAt time.Time
	// LastConns is the connection count of the latest sample from any source (a full push
	// report, an in-flight report, an SNMP poll) as reported, not smoothed, taken at
	// LastConnsAt (zero: none yet). Conns, smoothed, never reaches 0 after a drain; this does,
	// and a drain waits for it (controller drain -wait, GET /api/v1/backends/NAME/drained).
	LastConns   float64
	LastConnsAt time.Time
}

type backend struct {
	st       State
	health   weights.Status // unknown, warming, up or down: the health machine alone
	warmFrom time.Time
	stale    bool
	cpu      weights.EWMA
	mem      weights.EWMA
	net      weights.EWMA
	conns    weights.EWMA
	svcCPU   weights.EWMA
	pressure weights.EWMA
	// The newest push report applied: a report of the same boot with a
	// lower seq arrived late (UDP reordering) and must not undo it.
	applied      bool
	appliedNonce uint64
	appliedSeq   uint64
	budget       transitionBudget // of logged state changes (translog.go)
}

// Pool holds every configured backend's state. Its methods are safe for concurrent use.
type Pool struct {
	mu       sync.Mutex
	cfg      Config
	backends map[string]*backend
	// sorted is backends' values by name, kept by SetBackends: Snapshot copies in this order
	// instead of sorting 10,000 states under the lock the ingest path takes.
	sorted []*backend
	tombs  map[string]tombstone // removed backends, by name
	// startupUntil is the pool's start plus StaleAfter, fixed when the pool is made (a reload
	// that changes StaleAfter later must not open the window again): a backend whose first
	// check is good and comes before it was serving before the controller started (check).
	startupUntil time.Time
}

// NewPool returns an empty pool; add backends with SetBackends.
func NewPool(cfg Config) *Pool {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TombstoneGrace <= 0 {
		cfg.TombstoneGrace = DefaultTombstoneGrace
	}
	if cfg.SlowEvictAfter <= 0 {
		cfg.SlowEvictAfter = DefaultSlowEvictAfter
	}
	return &Pool{cfg: cfg, backends: map[string]*backend{}, tombs: map[string]tombstone{},
		startupUntil: cfg.Now().Add(cfg.StaleAfter)}
}

// Reconfigure changes the thresholds (a config reload); states are kept.
func (p *Pool) Reconfigure(cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg.Now, cfg.Logger, cfg.OnTransition = p.cfg.Now, p.cfg.Logger, p.cfg.OnTransition
	if cfg.TombstoneGrace <= 0 {
		cfg.TombstoneGrace = DefaultTombstoneGrace
	}
	if cfg.SlowEvictAfter <= 0 {
		cfg.SlowEvictAfter = DefaultSlowEvictAfter
	}
	p.cfg = cfg
}

// SetBackends makes the pool hold exactly these backends: new ones start unknown, the others
// keep their state. A removed backend's state is kept aside for TombstoneGrace: one added
// back within it resumes with its health, smoothed metrics and drain as they were.
func (p *Pool) SetBackends(names []string) (added, removed []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	p.expireTombs(now)
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
		if _, ok := p.backends[n]; !ok {
			if t, ok := p.tombs[n]; ok {
				delete(p.tombs, n)
				p.backends[n] = t.b
				added = append(added, n)
				continue
			}
			b := &backend{st: State{Name: n, Status: weights.StatusUnknown, Since: now}}
			p.resetMetrics(b)
			p.backends[n] = b
			added = append(added, n)
		}
	}
	for n, b := range p.backends {
		if !want[n] {
			delete(p.backends, n)
			p.tombs[n] = tombstone{b: b, at: now}
			removed = append(removed, n)
		}
	}
	p.expireTombs(now)
	p.sorted = p.sorted[:0]
	for _, b := range p.backends {
		p.sorted = append(p.sorted, b)
	}
	slices.SortFunc(p.sorted, func(a, b *backend) int { return strings.Compare(a.st.Name, b.st.Name) })
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// Remembers reports whether the pool holds name's state: configured, or removed less than
// TombstoneGrace ago. The push server keeps a backend's replay state exactly as long, so a
// backend put back within the grace is not open to replays of its captured reports.
func (p *Pool) Remembers(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireTombs(p.cfg.Now())
	_, live := p.backends[name]
	_, tomb := p.tombs[name]
	return live || tomb
}

// expireTombs drops tombstones older than the grace, then the oldest beyond MaxTombstones.
func (p *Pool) expireTombs(now time.Time) {
	for n, t := range p.tombs {
		if now.Sub(t.at) >= p.cfg.TombstoneGrace {
			delete(p.tombs, n)
		}
	}
	for len(p.tombs) > MaxTombstones {
		oldest := ""
		for n, t := range p.tombs {
			if o, ok := p.tombs[oldest]; !ok || t.at.Before(o.at) || (t.at.Equal(o.at) && n < oldest) {
				oldest = n
			}
		}
		delete(p.tombs, oldest)
	}
}

func (p *Pool) resetMetrics(b *backend) {
	b.cpu, b.mem, b.net, b.conns = weights.NewEWMA(p.cfg.Alpha), weights.NewEWMA(p.cfg.Alpha), weights.NewEWMA(p.cfg.Alpha), weights.NewEWMA(p.cfg.Alpha)
	b.svcCPU, b.pressure = weights.NewEWMA(p.cfg.Alpha), weights.NewEWMA(p.cfg.Alpha)
	b.st.HasMetrics = false
}

// Known reports whether name is a configured backend (the push server's unknown-id check).
func (p *Pool) Known(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.backends[name]
	return ok
}

// Accept ingests one verified probe report; it implements the push server's Sink.
//
// Reports are ordered by (BootNonce, Seq): one of the boot last applied with a lower Seq is a
// late, reordered report (the replay guard accepts each once inside its reorder window). It
// counts in Reports but changes nothing else, so seq 6 arriving after seq 7 cannot undo seq 7's
// drain, health, leaving or load. A report of another boot is that boot's newest: the guard
// (report.Guard) accepts a superseded boot only with a report above everything it sent, and
// with an accepted new boot the probe restarted.
func (p *Pool) Accept(r *report.Report, from netip.AddrPort) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.backends[r.BackendID]
	if !ok {
		return
	}
	if b.applied && r.BootNonce == b.appliedNonce && r.Seq < b.appliedSeq {
		b.st.Reports++
		b.st.LateReports++
		return
	}
	b.applied, b.appliedNonce, b.appliedSeq = true, r.BootNonce, r.Seq
	now := p.cfg.Now()
	b.st.From = from
	b.st.ProbeDrain = r.Flags&report.FlagDrain != 0
	if r.Signals&report.SignalInFlight != 0 && r.Flags&report.FlagLeaving == 0 {
		// Between full reports: only the count is new. It proves the probe alive, and it
		// carries the drain flag as it is now; health and load wait for the next full report.
		b.st.LastReport = now
		b.st.Reports++
		b.st.InFlight, b.st.InFlightAt = float64(r.Conns), now
		b.st.LastConns, b.st.LastConnsAt = float64(r.Conns), now
		// A stale backend stays stale: only a full report (its health) brings it back.
		p.settle(b, now, "")
		return
	}
	if r.Flags&report.FlagLeaving != 0 {
		// A clean shutdown: stop sending new connections now rather than after stale_after.
		b.st.LastReport = now
		b.st.Reports++
		b.stale = true
		p.settle(b, now, "probe is leaving (clean shutdown)")
		return
	}
	p.observe(b, now, Sample{CPUUtil: r.CPUUtil, MemUtil: r.MemUtil, NetUtil: r.NetUtil, Conns: float64(r.Conns),
		CPUCount: r.CPUCount, MemBytes: float64(r.MemBytes), HasCPU: true, Signals: SignalsOf(r)})
	h := Health{OK: r.Flags&report.FlagHealthOK != 0, Status: int(r.HealthStatus), Latency: r.HealthLatency, Err: r.HealthError}
	h.Timeout = !h.OK && h.Status == 0 && health.TimedOut(h.Err)
	p.check(b, now, h)
}

// ReadInFlight appends, for each of names, its latest in-flight count if it is younger than
// maxAge (OK false otherwise, and for unknown names) to dst: the fast loop's read, one lock
// for the whole pool instead of a Snapshot's copy of every state.
func (p *Pool) ReadInFlight(dst []weights.InFlight, names []string, maxAge time.Duration) []weights.InFlight {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	for _, n := range names {
		var f weights.InFlight
		if b, ok := p.backends[n]; ok && !b.st.InFlightAt.IsZero() {
			if age := now.Sub(b.st.InFlightAt); age >= 0 && age <= maxAge {
				f = weights.InFlight{N: b.st.InFlight, OK: true, At: b.st.InFlightAt, Failing: b.st.ConsecFail > 0}
			}
		}
		dst = append(dst, f)
	}
	return dst
}

// Observe ingests metrics from a source without health (an SNMP poll).
func (p *Pool) Observe(name string, s Sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.backends[name]; ok {
		now := p.cfg.Now()
		p.observe(b, now, s)
		p.settle(b, now, "metrics arrived")
	}
}

// CheckResult ingests a health-check result made by the collector itself (SNMP backends, or a
// failed poll, which counts as a failed check).
func (p *Pool) CheckResult(name string, h Health) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.backends[name]; ok {
		p.check(b, p.cfg.Now(), h)
	}
}

// Drain sets or clears the operator's drain of a backend; false if it is not configured.
func (p *Pool) Drain(name string, drained bool) bool {
	reason := "undrained by operator"
	if drained {
		reason = "drained by operator"
	}
	return p.SetOperatorDrain(name, drained, reason)
}

// SetOperatorDrain is Drain with the reason the transition logs (a drain restored from the
// state file says so).
func (p *Pool) SetOperatorDrain(name string, drained bool, reason string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.backends[name]
	if !ok {
		return false
	}
	now := p.cfg.Now()
	switch {
	case !drained:
		b.st.DrainedAt = time.Time{}
	case !b.st.OperatorDrain:
		b.st.DrainedAt = now
	}
	b.st.OperatorDrain = drained
	p.settle(b, now, reason)
	return true
}

func (p *Pool) observe(b *backend, now time.Time, s Sample) {
	b.st.LastReport = now
	b.st.Reports++
	if b.stale {
		// Reports are flowing again; the health machine decides when it may carry traffic.
		b.stale = false
		if b.health != weights.StatusDown {
			b.health = weights.StatusDown
			b.st.ConsecOK, b.st.ConsecFail = 0, p.cfg.FailThreshold
		}
	}
	if s.HasCPU {
		b.st.CPU = b.cpu.Add(fraction.Clamp(s.CPUUtil))
	}
	b.st.Mem = b.mem.Add(fraction.Clamp(s.MemUtil))
	b.st.Net = b.net.Add(fraction.Clamp(s.NetUtil))
	b.st.Conns = b.conns.Add(max(s.Conns, 0))
	if !math.IsNaN(s.Conns) && !math.IsInf(s.Conns, 0) && !s.Signals.ConnsStale {
		b.st.LastConns, b.st.LastConnsAt = max(s.Conns, 0), now
	}
	sig := s.Signals
	if sig.HasServiceCPU {
		sig.ServiceCPU = b.svcCPU.Add(fraction.Clamp(sig.ServiceCPU))
	} else {
		b.svcCPU.Reset()
	}
	// Pressure is smoothed like the CPU it discounts (the headroom policy's available
	// capacity, docs/weights.md); a report without it starts the average afresh.
	if sig.HasPressure {
		sig.CPUPressure = b.pressure.Add(fraction.Clamp(sig.CPUPressure))
	} else {
		b.pressure.Reset()
	}
	sig.Throttled = fraction.Clamp(sig.Throttled)
	b.st.Signals = sig
	if s.CPUCount > 0 {
		b.st.CPUCount = s.CPUCount
	}
	if s.MemBytes > 0 {
		b.st.MemBytes = s.MemBytes
	}
	b.st.HasMetrics = true
}

// check runs the health machine: unknown -> up on a first check that is good and comes in
// the start-up window, unknown -> warming on the first good check otherwise; fail_threshold
// failures in a row -> down; rise_threshold successes in a row -> warming again.
//
// Start-up is not a recovery. A backend whose first check is good and comes within
// stale_after of the pool's start (the controller's start-up hold, when every running
// backend reports at least once) goes straight to up: it was serving before the controller
// started, and there is no settled pool to protect from it. Ramping every backend at once changes no share
// (weights hands a ramp's weight only to backends that are not ramping) but leaves the whole
// pool "warming" for the warm-up (60 s by default) after every controller restart or
// failover to a fresh standby. HAProxy's slowstart makes the same choice ("it never applies
// when HAProxy starts"). A backend first seen later (added by a reload), or whose checks
// failed before its first good one, still warms up.
//
// Busy is not dead. A check that timed out on a backend that is carrying load (busy) queued
// behind real work: it is a load signal, and counting it as a failure evicts a healthy
// backend exactly when the pool needs it, moves its traffic onto the others, and makes them
// late too (the cascade measured at 80 % load, docs/weights.md "Busy is not dead"). Such a
// check marks the backend Slow and counts neither way; what proves death still evicts in
// fail_threshold checks: a refused or reset connection, a bad status or body, a check that
// times out on an idle backend, and a probe gone (stale). A backend that answers no check
// at all for SlowEvictAfter while busy is taken out only as an outlier: while fewer than
// half of the live backends are slow, since a pool that is slow everywhere is overloaded,
// and evicting from it only concentrates the load (Envoy's ejection cap, for the same reason).
func (p *Pool) check(b *backend, now time.Time, h Health) {
	b.st.LastHealth = h
	clean := b.health == weights.StatusUnknown && b.st.ConsecFail == 0 // no failed check yet
	slow := !h.OK && h.Timeout && busy(&b.st, now)
	switch {
	case h.OK:
		b.st.ConsecOK++
		b.st.ConsecFail, b.st.ConsecSlow = 0, 0
		if b.st.Slow && b.st.ConsecOK >= p.cfg.RiseThreshold {
			b.st.Slow = false
		}
	case slow:
		if b.st.ConsecSlow == 0 {
			b.st.SlowSince = now
		}
		b.st.ConsecSlow++
		b.st.ConsecOK = 0
		b.st.Slow = true
	default:
		b.st.ConsecFail++
		b.st.ConsecOK, b.st.ConsecSlow = 0, 0
	}
	reason := ""
	if slow && b.health.Live() && now.Sub(b.st.SlowSince) >= p.cfg.SlowEvictAfter && p.slowOutlier() {
		b.health = weights.StatusDown
		b.st.ConsecFail = p.cfg.FailThreshold
		reason = "no health check answered for " + now.Sub(b.st.SlowSince).Round(time.Millisecond).String() +
			" while busy, and most of the pool is not slow: " + h.Err
		p.settle(b, now, reason)
		return
	}
	switch b.health {
	case weights.StatusUnknown:
		if h.OK && clean && now.Before(p.startupUntil) {
			b.health, b.warmFrom = weights.StatusUp, now
			reason = "first healthy report at start-up: up without warm-up"
		} else if h.OK {
			b.health, b.warmFrom = weights.StatusWarming, now
			reason = "first healthy report"
		} else if b.st.ConsecFail >= p.cfg.FailThreshold {
			b.health = weights.StatusDown
			reason = "health check failed " + strconv.Itoa(b.st.ConsecFail) + " times: " + h.Err
		}
	case weights.StatusWarming, weights.StatusUp:
		if b.st.ConsecFail >= p.cfg.FailThreshold {
			b.health = weights.StatusDown
			reason = "health check failed " + strconv.Itoa(b.st.ConsecFail) + " times: " + h.Err
		}
	case weights.StatusDown:
		if b.st.ConsecOK >= p.cfg.RiseThreshold {
			b.health, b.warmFrom = weights.StatusWarming, now
			p.resetMetricsKeepLast(b)
			reason = "recovered after " + strconv.Itoa(b.st.ConsecOK) + " good checks"
		}
	}
	p.settle(b, now, reason)
}

// Busy thresholds: a backend is carrying load, so that a late health answer may be queueing
// behind its work, when any of these holds in its smoothed signals. They are low on purpose:
// the cost of calling an idle hung service busy is SlowEvictAfter instead of fail_threshold
// checks before it goes, while calling a loaded backend idle evicts it under load.
const (
	busyCPU         = 0.5  // of its CPUs (or of the service's own CPU, when reported)
	busyThrottled   = 0.05 // of CFS periods at the quota
	busyPressure    = 0.25 // PSI "some"
	busyConnections = 1    // established connections on the service port
)

// busyInFlightAge is how fresh an in-flight count must be to say a backend is busy.
const busyInFlightAge = time.Second

// busy reports whether st's latest signals show load: its smoothed load, or a fresh
// in-flight count (at a load step the smoothed load lags; the count does not).
func busy(st *State, now time.Time) bool {
	if !st.InFlightAt.IsZero() && now.Sub(st.InFlightAt) <= busyInFlightAge && st.InFlight >= busyConnections {
		return true
	}
	if !st.HasMetrics {
		return false
	}
	s := st.Signals
	return st.CPU >= busyCPU || st.Conns >= busyConnections ||
		(s.HasServiceCPU && s.ServiceCPU >= busyCPU) ||
		(s.HasThrottled && s.Throttled >= busyThrottled) ||
		(s.HasPressure && s.CPUPressure >= busyPressure)
}

// slowOutlier reports whether fewer than half of the live backends are slow, so that taking
// one of them out for slowness is removing an outlier, not shedding the pool's load.
func (p *Pool) slowOutlier() bool {
	live, slow := 0, 0
	for _, b := range p.sorted {
		if b.health.Live() && !b.stale {
			live++
			if b.st.Slow {
				slow++
			}
		}
	}
	return 2*slow < live
}

// resetMetricsKeepLast forgets the smoothed history of a recovering backend (its old load says
// nothing about the new process) but keeps the latest sample as the new starting point.
func (p *Pool) resetMetricsKeepLast(b *backend) {
	cpu, mem, net, conns, sig := b.st.CPU, b.st.Mem, b.st.Net, b.st.Conns, b.st.Signals
	p.resetMetrics(b)
	if sig.HasServiceCPU {
		b.svcCPU.Add(sig.ServiceCPU)
	}
	if sig.HasPressure {
		b.pressure.Add(sig.CPUPressure)
	}
	b.cpu.Add(cpu)
	b.mem.Add(mem)
	b.net.Add(net)
	b.conns.Add(conns)
	b.st.HasMetrics = true
}

// Tick applies what time alone changes: staleness and the end of warm-up. Call it before
// Snapshot on every update period (Snapshot calls it too).
func (p *Pool) Tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tick(p.cfg.Now())
}

func (p *Pool) tick(now time.Time) {
	for _, b := range p.backends {
		if !b.stale && b.st.Reports > 0 && now.Sub(b.st.LastReport) >= p.cfg.StaleAfter {
			b.stale = true
			p.settle(b, now, "no report for "+now.Sub(b.st.LastReport).Round(time.Millisecond).String())
			continue
		}
		if !b.stale && b.st.Reports == 0 && b.health == weights.StatusUnknown && now.Sub(b.st.Since) >= p.cfg.StaleAfter && b.st.Status != weights.StatusStale {
			b.stale = true
			p.settle(b, now, "no report since configured")
			continue
		}
		p.settle(b, now, "")
		p.catchUp(b, now)
	}
}

// settle derives the effective status from the health machine and the stale and drain flags,
// and logs a transition once when it changes. Precedence: stale, down, drained, health.
func (p *Pool) settle(b *backend, now time.Time, reason string) {
	if b.health == weights.StatusWarming && now.Sub(b.warmFrom) >= p.cfg.Warmup {
		b.health = weights.StatusUp
		if reason == "" {
			reason = "warm-up complete"
		}
	}
	next := b.health
	switch {
	case b.stale:
		next = weights.StatusStale
	case b.health == weights.StatusDown:
	case b.st.ProbeDrain || b.st.OperatorDrain:
		next = weights.StatusDrained
	}
	if next == weights.StatusWarming || next == weights.StatusUp {
		// While up too: a watched ramp may outlast the timer (weights, "watch").
		b.st.WarmupElapsed = now.Sub(b.warmFrom)
	} else {
		b.st.WarmupElapsed = 0
	}
	if next == b.st.Status {
		return
	}
	t := Transition{Time: now, Backend: b.st.Name, From: b.st.Status, To: next, Reason: reason}
	b.st.Status, b.st.Since = next, now
	p.emit(b, t)
}

// Snapshot applies Tick and returns every backend's state, sorted by name, appended to dst.
func (p *Pool) Snapshot(dst []State) []State {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tick(p.cfg.Now())
	for _, b := range p.sorted {
		dst = append(dst, b.st)
	}
	return dst
}

// StaleAfter is the configured stale_after: how old a backend's last report may be before it
// is stale, and so how old a connection count may be and still be believed.
func (p *Pool) StaleAfter() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.StaleAfter
}

// Get returns one backend's state.
func (p *Pool) Get(name string) (State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.backends[name]
	if !ok {
		return State{}, false
	}
	return b.st, true
}
