package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"flowweight/weights"
)

// Backend is one simulated server.
type Backend struct {
	Name string
	// Speed is the true speed in work units per second, all servers together.
	Speed float64
	// Declared is the capacity the operator configured (a CPU count); it is what static
	// weights and weights.Compute's CPUCount see, and it may be wrong.
	Declared float64
	// Servers is the number of parallel FCFS servers, each of speed Speed/Servers; 0 means 1.
	Servers int
	// Neighbour is the fraction of the backend's CPU another process keeps busy, in [0,1):
	// the service runs at Speed·(1−Neighbour), and the probe's CPU reading is the neighbour's
	// use plus the service's (docs/results/simulator.md, "The headroom policy and noisy neighbours").
	Neighbour float64
	// CFSPeriod, when > 0, runs the backend like a cgroup with a CPU quota (the lab's
	// backends): in each period it may do Speed·CFSPeriod of work, at Burst while it runs,
	// and is throttled for the rest of the period once that is used up. A job that meets an
	// exhausted quota waits for the next period, which is where a quota's tail latency
	// comes from. One server only, with no neighbour and no steps.
	CFSPeriod time.Duration
	// Burst is the speed while running under CFSPeriod, in work units per second (cores);
	// default 1: one core, as a single-threaded request on an idle host runs.
	Burst float64
}

// effective is the speed the service gets: what the neighbour leaves.
func (b Backend) effective() float64 { return b.Speed * (1 - b.Neighbour) }

// Step changes one backend's true speed at a moment of the run, as a noisy neighbour would.
type Step struct {
	At      time.Duration // simulated time from the start of the run
	Backend int           // index into Config.Backends
	Factor  float64       // the new speed is the old speed times Factor (> 0)
}

// SizeKind is the distribution of job sizes.
type SizeKind string

const (
	SizeExp   SizeKind = "exp"   // exponential: M/M/k queues, the calibration's model
	SizeFixed SizeKind = "fixed" // every job has the mean size: M/D/k
	// SizeH2 is a balanced two-phase hyperexponential with squared coefficient of variation 4:
	// a few jobs are much larger than the rest, as with mixed request types.
	SizeH2 SizeKind = "h2"
)

// Policy is a dispatch policy.
type Policy string

const (
	RoundRobin Policy = "round_robin"       // cyclic, ignores capacity and load
	LeastConn  Policy = "least_connections" // per request: fewest jobs in the system, ties at random
	Static     Policy = "static"            // weighted random ∝ declared capacity
	Oracle     Policy = "oracle"            // weighted random ∝ current true speed
	Fixed      Policy = "fixed"             // weighted random ∝ Config.Fixed: a static split searched for (BestFixed)
	// Dynamic is flowweight: weighted random by weights.Compute's integer weights with
	// Config.Tuning, fed by sampled utilisation, connections and throughput.
	Dynamic Policy = "dynamic"
	// Headroom is flowweight's headroom policy (weights.PolicyHeadroom) in the same pipeline.
	Headroom Policy = "headroom"
	// WeightsEqual, WeightsStatic and WeightsLeastConn run the same pipeline as Dynamic with
	// the tuning's policy set to equal, static and least_conn.
	WeightsEqual     Policy = "weights_equal"
	WeightsStatic    Policy = "weights_static"
	WeightsLeastConn Policy = "weights_least_conn"
)

// Policies lists every policy in the order tables show them.
var Policies = []Policy{RoundRobin, LeastConn, Static, Oracle, Dynamic, Headroom, WeightsEqual, WeightsStatic, WeightsLeastConn}

// weightsPolicy returns the weights.PolicyName a pipeline policy runs, or "" for the others.
func (p Policy) weightsPolicy() weights.PolicyName {
	switch p {
	case Dynamic:
		return weights.PolicyDynamic
	case Headroom:
		return weights.PolicyHeadroom
	case WeightsEqual:
		return weights.PolicyEqual
	case WeightsStatic:
		return weights.PolicyStatic
	case WeightsLeastConn:
		return weights.PolicyLeastConn
	}
	return ""
}

// Config describes one run.
type Config struct {
	Backends []Backend
	// Load is the offered load ρ: arrival rate × mean size / Σ initial true speed (what the
	// neighbours leave of it), in (0, ∞).
	Load float64
	// MeanSize is the mean job size in work units; default 0.1 (so a backend of speed 1
	// serves 10 jobs/s and the calibration's speeds 1:2:4 give its 215 ms oracle mean at ρ=0.8).
	MeanSize float64
	Size     SizeKind // default SizeExp
	Jobs     int      // number of arrivals; the run ends with the last one
	// Warmup is excluded from the statistics: jobs arriving before it and the sample
	// intervals before it are not counted (queues fill, dynamic weights learn capacity).
	// Default 20 minutes of simulated time.
	Warmup time.Duration
	Seed   uint64
	Policy Policy
	// Tuning is what the weights pipeline runs with; its Policy is replaced by the one the
	// sim Policy implies. With Tuning.Policy empty the whole Tuning is weights.DefaultTuning().
	Tuning weights.Tuning
	// MemUtil is the memory utilisation every backend reports (the same for all: memory use
	// of a CPU-bound service does not follow its load); default 0.
	MemUtil float64
	Sample  time.Duration // probe report interval; default 5s (the probe's default)
	// ServiceCPU: the probes also report the service's own CPU (weights.Backend.ServiceCPU),
	// as a probe told the service's pidfile, unit or cgroup does; without it a neighbour's
	// use is indistinguishable from the service's.
	ServiceCPU bool
	// Fixed is the split of policy Fixed, one weight per backend.
	Fixed  []float64
	Update time.Duration // controller update period, a multiple of Sample; default 5s
	// InFlight, when > 0, is the fast loop's period (weights.FollowInFlight): every InFlight
	// the dispatcher's weights become the last update's corrected by each backend's jobs in
	// the system at that moment (the work in flight a probe counts). Weight policies only.
	InFlight time.Duration
	// InFlightReport, when > 0, is the probes' in-flight interval: each backend's count is
	// taken every InFlightReport (the backends' phases spread over the interval, as
	// independent probes are), and the fast loop uses the latest count that has reached it.
	// Zero: the loop reads every backend's count at the moment it runs, as no real loop can.
	InFlightReport time.Duration
	// InFlightDelay is how long a count takes to steer the dispatch: the report's transit,
	// the controller's work and the switch's rewrite. Counts younger than it are not used yet.
	InFlightDelay time.Duration
	// InFlightLinger is how long a connection outlives its job in the count: a probe counts
	// established connections, and the lab's requests hold theirs for the handshake, the
	// answer and the close around the work (single-server backends only).
	InFlightLinger time.Duration
	// InFlightOwn compares each backend's count with its own moving average
	// (weights.InFlightTracker; the controller's weighting.in_flight_reference "own") instead
	// of with the other backends' counts ("pool", the controller's default).
	InFlightOwn bool
	// Health, when its Interval is set, runs the probes' health checks and evicts by them
	// (health.go). Weight policies only.
	Health Health
	// OVSSlots quantises weighted dispatch like Open vSwitch's select group (see slots.go).
	OVSSlots bool
	Steps    []Step
	// Trace records the dispatch shares after every update (Result.Trace), for settling.
	Trace bool
}

// Result is what one run measured over the window from Warmup to the last arrival.
type Result struct {
	Policy   Policy
	Measured int     // jobs that arrived in the window
	Mean     float64 // mean response time of those jobs, seconds
	P99      float64 // 99th percentile of their response times, seconds
	// Throughput is jobs completed within the window per second of the window.
	Throughput float64
	// PeakUtil is the largest busy fraction of any backend over the whole window;
	// PeakIntervalUtil the largest over any single sample interval in the window.
	PeakUtil, PeakIntervalUtil float64
	// Util is each backend's busy fraction over the window.
	Util []float64
	// Rewrites counts weight changes the pipeline applied (weights.Worth true) in the
	// window; RewritesTotal counts them from the start, including the first write.
	Rewrites, RewritesTotal int
	Updates                 int       // weights.Compute calls in the window
	Window                  float64   // seconds
	FinalShares             []float64 // dispatch shares at the end (weights / total); nil for non-weight policies
	// MeanShares is each backend's dispatch share averaged over the time in the window
	// (weight policies only): a final share is one moment of a moving vector.
	MeanShares []float64
	Learned    []float64 // learned capacity factors at the end (Dynamic only)
	// Evictions are the times (seconds) the health checks took a backend out, from the
	// warm-up's end to the last arrival (Config.Health).
	Evictions []float64
	Trace     []Point // with Config.Trace
}

// Point is the dispatch shares in force after one update.
type Point struct {
	T      float64 // seconds
	Shares []float64
}

func (c *Config) defaults() {
	if c.MeanSize == 0 {
		c.MeanSize = 0.1
	}
	if c.Size == "" {
		c.Size = SizeExp
	}
	if c.Warmup == 0 {
		c.Warmup = 20 * time.Minute
	}
	if c.Sample == 0 {
		c.Sample = 5 * time.Second
	}
	if c.Update == 0 {
		c.Update = 5 * time.Second
	}
	if c.Tuning.Policy == "" {
		c.Tuning = weights.DefaultTuning()
	}
	if p := c.Policy.weightsPolicy(); p != "" {
		c.Tuning.Policy = p
	}
}

// Validate reports every problem of the config at once.
func (c Config) Validate() error {
	c.defaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Backends) == 0 {
		bad("backends: none")
	}
	for i, b := range c.Backends {
		if !(b.Speed > 0) || math.IsInf(b.Speed, 0) {
			bad("backends[%d] %q: speed %v must be positive", i, b.Name, b.Speed)
		}
		if !(b.Declared > 0) || math.IsInf(b.Declared, 0) {
			bad("backends[%d] %q: declared capacity %v must be positive", i, b.Name, b.Declared)
		}
		if !(b.Neighbour >= 0 && b.Neighbour < 1) {
			bad("backends[%d] %q: neighbour %v outside [0,1)", i, b.Name, b.Neighbour)
		}
		if b.Servers < 0 {
			bad("backends[%d] %q: servers %d is negative", i, b.Name, b.Servers)
		}
		if b.CFSPeriod < 0 || b.Burst < 0 || math.IsInf(b.Burst, 0) || b.Burst != b.Burst {
			bad("backends[%d] %q: cfs_period %v and burst %v must not be negative", i, b.Name, b.CFSPeriod, b.Burst)
		}
		if b.CFSPeriod > 0 {
			if b.Servers > 1 || b.Neighbour != 0 {
				bad("backends[%d] %q: a CFS quota needs one server and no neighbour", i, b.Name)
			}
			if burst := cmp.Or(b.Burst, 1); burst < b.Speed {
				bad("backends[%d] %q: burst %v below speed %v", i, b.Name, burst, b.Speed)
			}
			for _, st := range c.Steps {
				if st.Backend == i {
					bad("backends[%d] %q: a CFS quota takes no steps", i, b.Name)
				}
			}
		}
	}
	if !(c.Load > 0) || math.IsInf(c.Load, 0) {
		bad("load: %v must be positive", c.Load)
	}
	if !(c.MeanSize > 0) || math.IsInf(c.MeanSize, 0) {
		bad("mean_size: %v must be positive", c.MeanSize)
	}
	switch c.Size {
	case SizeExp, SizeFixed, SizeH2:
	default:
		bad("size: %q is not one of exp, fixed, h2", c.Size)
	}
	if c.Jobs < 1 {
		bad("jobs: %d must be at least 1", c.Jobs)
	}
	if c.Warmup < 0 {
		bad("warmup: %v is negative", c.Warmup)
	}
	if c.Sample <= 0 {
		bad("sample: %v must be positive", c.Sample)
	}
	if c.InFlight < 0 || (c.InFlight > 0 && c.Policy.weightsPolicy() == "") {
		bad("in_flight: %v needs a weights policy and a period >= 0", c.InFlight)
	}
	if c.InFlightReport < 0 || c.InFlightDelay < 0 || (c.InFlightReport > 0 || c.InFlightDelay > 0) && c.InFlight == 0 {
		bad("in_flight_report %v, in_flight_delay %v: need in_flight and must not be negative", c.InFlightReport, c.InFlightDelay)
	}
	if c.InFlightDelay > 0 && c.InFlightReport == 0 {
		// The loop's own count, taken as it runs, could only be used a whole period later.
		bad("in_flight_delay %v: needs in_flight_report (the probes' counts)", c.InFlightDelay)
	}
	if c.InFlightLinger < 0 || c.InFlightLinger > 0 && c.InFlight == 0 {
		bad("in_flight_linger %v: needs in_flight and must not be negative", c.InFlightLinger)
	}
	if c.InFlightLinger > 0 {
		for i, b := range c.Backends {
			if b.Servers > 1 {
				bad("in_flight_linger: backend %d has %d servers: single-server backends only (their jobs finish in arrival order)", i, b.Servers)
			}
		}
	}
	if h := c.Health; h != (Health{}) {
		if h.Interval <= 0 || h.Timeout <= 0 || h.Fails < 1 || h.Rise < 1 || h.BusyNotDead && h.SlowEvictAfter <= 0 {
			bad("health: interval %v and timeout %v must be positive, fails %d and rise %d at least 1, slow_evict_after %v positive with busy_not_dead",
				h.Interval, h.Timeout, h.Fails, h.Rise, h.SlowEvictAfter)
		}
		if c.Policy.weightsPolicy() == "" {
			bad("health: needs a weights policy (evicting means a weight of 0)")
		}
	}
	if c.InFlightOwn && c.InFlight == 0 {
		bad("in_flight_own: needs in_flight")
	}
	if c.Update <= 0 || c.Update%c.Sample != 0 {
		bad("update: %v must be a positive multiple of sample %v", c.Update, c.Sample)
	}
	if c.Policy == Fixed && len(c.Fixed) != len(c.Backends) {
		bad("fixed: %d weights for %d backends", len(c.Fixed), len(c.Backends))
	}
	for i, x := range c.Fixed {
		if !(x >= 0) || math.IsInf(x, 0) {
			bad("fixed[%d]: %v must be a finite weight >= 0", i, x)
		}
	}
	if c.Policy != Fixed && !slices.Contains(Policies, c.Policy) {
		bad("policy: %q is not one of %v", c.Policy, Policies)
	}
	if c.Policy.weightsPolicy() != "" {
		for _, err := range c.Tuning.Validate() {
			bad("tuning: %w", err)
		}
	}
	if !(c.MemUtil >= 0 && c.MemUtil <= 1) {
		bad("mem_util: %v outside [0,1]", c.MemUtil)
	}
	for i, s := range c.Steps {
		if s.Backend < 0 || s.Backend >= len(c.Backends) {
			bad("steps[%d]: backend %d out of range", i, s.Backend)
		}
		if !(s.Factor > 0) || math.IsInf(s.Factor, 0) {
			bad("steps[%d]: factor %v must be positive", i, s.Factor)
		}
		if s.At < 0 {
			bad("steps[%d]: at %v is negative", i, s.At)
		}
	}
	return errors.Join(errs...)
}

// Run simulates one configuration. It is deterministic: the same Config gives the same Result.
func Run(cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("sim config: %w", err)
	}
	cfg.defaults()
	s := newSim(&cfg)
	s.run()
	return s.result(), nil
}

// sim is one run's state.
type sim struct {
	cfg      *Config
	n        int
	bs       []*station
	arrive   *rand.Rand // inter-arrival times and sizes: the same jobs for every policy
	pick     *rand.Rand // dispatch choices
	lambda   float64
	sample   float64
	perUpd   int // samples per update
	warm     float64
	disp     dispatcher
	pipe     *pipeline // nil for policies without weights
	resp     []float64 // response times of measured jobs
	lastT    float64
	nSamples int
	// The fast loop (Config.InFlight): its result, weights and writes in the window.
	fast       weights.Result
	fastW      []uint16 // in force
	fastNext   []uint16
	fastWrites int
	// The probes' counts (Config.InFlightReport): per backend, the next count's time and
	// the counts taken, oldest first, until the loop has used a newer one.
	probeNext []float64
	counts    [][]count
	open      [][]float64 // per backend, with InFlightLinger: when each counted connection closes
	own       weights.InFlightTracker
	// Config.Health: per backend, its checks' state; evictions in the window.
	health    []health
	evictions []float64
}

// inFlight is backend i's count at t: its jobs in the system, or with InFlightLinger its
// connections still open.
func (s *sim) inFlight(i int, t float64) int {
	if s.cfg.InFlightLinger == 0 {
		return s.bs[i].inSystem(t)
	}
	q := s.open[i]
	k := 0
	for k < len(q) && q[k] <= t {
		k++
	}
	s.open[i] = q[k:]
	return len(s.open[i])
}

// count is one probe's in-flight count, taken at t.
type count struct {
	t float64
	n int
}

func newSim(cfg *Config) *sim {
	s := &sim{cfg: cfg, n: len(cfg.Backends), sample: cfg.Sample.Seconds(), warm: cfg.Warmup.Seconds(),
		perUpd: int(cfg.Update / cfg.Sample)}
	total := 0.0
	for i, b := range cfg.Backends {
		s.bs = append(s.bs, newStation(b, cfg.Steps, i, s.sample))
		total += b.effective()
	}
	s.lambda = cfg.Load * total / cfg.MeanSize
	s.arrive = rand.New(rand.NewPCG(cfg.Seed, 0x5eed_a111))
	s.pick = rand.New(rand.NewPCG(cfg.Seed, 0x5eed_d15b))
	s.disp = newDispatcher(cfg, s.bs, s.pick)
	if cfg.Policy.weightsPolicy() != "" {
		s.pipe = newPipeline(cfg, s.bs)
	}
	if cfg.Health.on() {
		s.health = make([]health, s.n)
		for i := range s.health {
			// Up since long before the run, and checked in turn across the interval, as
			// independent probes are.
			s.health[i] = health{status: weights.StatusUp, warmFrom: longAgo,
				next: cfg.Health.Interval.Seconds() * float64(i+1) / float64(s.n)}
		}
	}
	return s
}

func (s *sim) size() float64 {
	m := s.cfg.MeanSize
	switch s.cfg.Size {
	case SizeFixed:
		return m
	case SizeH2:
		// Balanced means: p·(1/μ1) = (1−p)·(1/μ2) = m/2, SCV 4 → p = (1 − √(3/5))/2.
		p := (1 - math.Sqrt(3.0/5.0)) / 2
		if s.arrive.Float64() < p {
			return s.arrive.ExpFloat64() * m / (2 * p)
		}
		return s.arrive.ExpFloat64() * m / (2 * (1 - p))
	}
	return s.arrive.ExpFloat64() * m
}

func (s *sim) run() {
	if s.pipe != nil {
		s.pipe.update(0, s, false)
		s.disp.setWeights(s.pipe.applied)
	}
	s.resp = make([]float64, 0, s.cfg.Jobs)
	t := 0.0
	next := s.sample // end of the current sample interval
	fast := s.cfg.InFlight.Seconds()
	nextFast := math.Inf(1)
	if fast > 0 {
		nextFast = fast
	}
	report := s.cfg.InFlightReport.Seconds()
	s.open = make([][]float64, s.n)
	s.probeNext = make([]float64, s.n)
	s.counts = make([][]count, s.n)
	for i := range s.probeNext {
		s.probeNext[i] = math.Inf(1)
		if report > 0 {
			s.probeNext[i] = report * float64(i+1) / float64(s.n)
		}
	}
	for range s.cfg.Jobs {
		t += s.arrive.ExpFloat64() / s.lambda
		z := s.size()
		for {
			p := 0
			for i := range s.probeNext {
				if s.probeNext[i] < s.probeNext[p] {
					p = i
				}
			}
			probe := s.probeNext[p]
			c, check := 0, math.Inf(1)
			for i := range s.health {
				if e := s.health[i].event(); e < check {
					c, check = i, e
				}
			}
			at := min(next, nextFast, probe, check)
			if at > t {
				break
			}
			switch at {
			case check:
				s.healthEvent(c, check)
			case probe:
				s.counts[p] = append(s.counts[p], count{t: probe, n: s.inFlight(p, probe)})
				s.probeNext[p] += report
			case next:
				s.tick(next)
				next += s.sample
			default:
				s.follow(nextFast)
				nextFast += fast
			}
		}
		i := s.disp.choose(t)
		f := s.bs[i].serve(t, z)
		if s.cfg.InFlightLinger > 0 {
			s.open[i] = append(s.open[i], f+s.cfg.InFlightLinger.Seconds())
		}
		if t >= s.warm {
			s.resp = append(s.resp, f-t)
		}
	}
	s.lastT = t
}

// tick ends sample interval number nSamples at time at: every backend reports, and every
// perUpd samples the controller updates.
func (s *sim) tick(at float64) {
	k := s.nSamples
	s.nSamples++
	if s.pipe == nil {
		return
	}
	s.pipe.sample(k, at)
	if s.nSamples%s.perUpd == 0 {
		if s.pipe.update(at, s, at > s.warm) {
			s.disp.setWeights(s.pipe.applied)
		}
	}
}

// follow is one fast-loop step at time at: the last update's weights corrected by the jobs
// each backend has in the system now.
func (s *sim) follow(at float64) {
	if s.pipe == nil || s.pipe.applied == nil {
		return
	}
	n := make([]weights.InFlight, len(s.bs))
	delay := s.cfg.InFlightDelay.Seconds()
	for i := range s.bs {
		if s.cfg.InFlightReport == 0 { // read as the loop runs (no delay: validated)
			n[i] = weights.InFlight{N: float64(s.inFlight(i, at)), OK: true}
			continue
		}
		// The latest count that has arrived; older ones are dropped.
		cs, k := s.counts[i], -1
		for j := range cs {
			if cs[j].t+delay <= at {
				k = j
			}
		}
		if k >= 0 {
			n[i] = weights.InFlight{N: float64(cs[k].n), OK: true}
			s.counts[i] = append(cs[:0], cs[k:]...)
		}
	}
	if s.cfg.InFlightOwn {
		s.own.Apply(n, time.Unix(0, 0).Add(time.Duration(at*float64(time.Second))))
	}
	weights.FollowInFlight(s.pipe.applied, n, &s.fast)
	w := s.fast.Weights(s.fastNext[:0])
	s.fastNext = w
	if slices.Equal(w, s.fastW) {
		return
	}
	s.fastW = append(s.fastW[:0], w...)
	s.disp.setWeights(s.fastW)
	if at > s.warm {
		s.fastWrites++
	}
}

func (s *sim) result() Result {
	r := Result{Policy: s.cfg.Policy, Measured: len(s.resp)}
	// The window ends at the last complete sample interval before the last arrival.
	endBin := int(s.lastT / s.sample)
	startBin := int(math.Ceil(s.warm / s.sample))
	end := float64(endBin) * s.sample
	start := float64(startBin) * s.sample
	if end > start {
		r.Window = end - start
	}
	if len(s.resp) > 0 {
		sum := 0.0
		for _, x := range s.resp {
			sum += x
		}
		r.Mean = sum / float64(len(s.resp))
		r.P99 = quantile(s.resp, 0.99)
	}
	done := 0
	for _, b := range s.bs {
		u, peak := b.utilisation(startBin, endBin)
		r.Util = append(r.Util, u)
		r.PeakUtil = max(r.PeakUtil, u)
		r.PeakIntervalUtil = max(r.PeakIntervalUtil, peak)
		done += b.completedIn(startBin, endBin)
	}
	if r.Window > 0 {
		r.Throughput = float64(done) / r.Window
	}
	r.Evictions = s.evictions
	if p := s.pipe; p != nil {
		r.Rewrites, r.RewritesTotal, r.Updates = p.rewritesWindow+s.fastWrites, p.rewrites+s.fastWrites, p.updatesWindow
		r.FinalShares = shares(p.applied)
		if p.shareTime != nil {
			r.MeanShares = make([]float64, len(p.shareTime))
			tot := 0.0
			for _, x := range p.shareTime {
				tot += x
			}
			for i, x := range p.shareTime {
				r.MeanShares[i] = x / tot
			}
		}
		if s.cfg.Policy == Dynamic {
			for _, e := range p.res.Backends {
				r.Learned = append(r.Learned, e.Learned)
			}
		}
		r.Trace = p.trace
	}
	return r
}

func shares(w []uint16) []float64 {
	tot := 0.0
	for _, x := range w {
		tot += float64(x)
	}
	out := make([]float64, len(w))
	for i, x := range w {
		out[i] = float64(x) / tot
	}
	return out
}

// quantile returns the q-quantile of xs by the nearest-rank rule (the ⌈q·n⌉-th smallest),
// reordering xs. A selection instead of a full sort: sorting two million response times was
// most of a run's time.
func quantile(xs []float64, q float64) float64 {
	k := min(len(xs)-1, max(0, int(math.Ceil(q*float64(len(xs))))-1))
	return weights.Nth(xs, k)
}
