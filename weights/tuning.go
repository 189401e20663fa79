package weights

import (
	"fmt"
	"math"
	"time"
)

// PanicMode says what to serve when every backend would get weight 0.
type PanicMode string

const (
	// PanicLastGood spreads traffic evenly over the backends that had weight in the
	// previous result; when there is none, over every configured backend that is not drained.
	PanicLastGood PanicMode = "last_good"
	// PanicAll spreads traffic evenly over every configured backend that is not drained.
	PanicAll PanicMode = "all"
)

// Load holds the coefficients of the composite load LS; they must sum to 1 so that LS stays
// a utilisation in [0,1].
type Load struct {
	CPU  float64 `toml:"cpu"`  // weight of CPU utilisation; default 0.6
	Mem  float64 `toml:"mem"`  // weight of memory utilisation; default 0.3
	Conn float64 `toml:"conn"` // weight of conns/max_conns; default 0.1
	Net  float64 `toml:"net"`  // weight of NIC utilisation; default 0
}

// Capacity holds the coefficients of the capacity C; they must sum to 1.
//
// The default counts CPUs alone. Memory size does not make a server answer faster, and near
// saturation, where the headroom policy splits by capacity, a memory term the same on every
// backend hands the small ones more than their CPUs: in one lab set (quotas 1:2:4,
// 2026-12-07) the default of 0.7 CPU + 0.3 memory gave p99 80.4 ms at 80 % load and 230.7 ms
// at 95 %, CPU alone 54.5 and 170.9 ms, lower in each of six paired runs, and in a second set
// with the runs' order reversed 60.2 against 79.8 ms at 80 % (docs/weights.md, "The
// formula"). The learned factor corrects such a term only slowly and partly.
type Capacity struct {
	CPU float64 `toml:"cpu"` // weight of CPU count relative to the pool mean; default 1
	Mem float64 `toml:"mem"` // weight of memory size relative to the pool mean; default 0
}

// Learn tunes the slow correction of declared capacity from measured throughput.
type Learn struct {
	Enabled bool `toml:"enabled"` // default true
	// Rate is the fraction (in log space) by which the learned factor moves toward the
	// measured one per update, in (0,1]; default 0.2. Small values ignore noise, large ones
	// follow noisy neighbours quickly.
	Rate float64 `toml:"rate"`
	// MinLoad is the composite load below which a backend's throughput says little about its
	// speed (idle machines have huge throughput per unit of load); default 0.05.
	MinLoad float64 `toml:"min_load"`
	// MaxFactor bounds the learned factor to [1/MaxFactor, MaxFactor]; default 8.
	MaxFactor float64 `toml:"max_factor"`
}

// Tuning holds every knob of the weighting. The zero value is not valid; start from
// DefaultTuning, which is the single place where defaults are defined.
type Tuning struct {
	Policy   PolicyName `toml:"policy"`   // headroom | dynamic | static | equal | least_conn; default headroom
	Load     Load       `toml:"load"`     // LS coefficients
	Capacity Capacity   `toml:"capacity"` // C coefficients
	Learn    Learn      `toml:"learn"`    // learned capacity
	// Alpha is the EWMA smoothing factor the collector applies to samples, in (0,1]; default 0.3.
	Alpha float64 `toml:"alpha"`
	// MaxConns is the connection count at which the connection term is saturated; default 1000.
	MaxConns float64 `toml:"max_conns"`
	// MinLoad is the floor of LS in 1/AL, so an idle backend does not get infinite weight;
	// default 0.02.
	MinLoad float64 `toml:"min_load"`
	// Gain is how far (in log space) a dynamic share moves from the previous share toward the
	// 1/AL target per update, in (0,1]; default 0.5. 1 is the seeds' formula undamped; 0.5 is
	// the contraction that makes the 1/AL feedback settle instead of alternating, since a
	// backend's load answers inversely to its weight.
	Gain float64 `toml:"gain"`
	// Total is the sum of the weights of live backends, at most 65535; default 1000.
	Total int `toml:"total"`
	// Floor is the smallest share a live backend gets, as a fraction of Total, so no healthy
	// backend starves and its metrics keep meaning something; default 0.01.
	Floor float64 `toml:"floor"`
	// Warmup is how long a new or recovered backend ramps from WarmupStart to full weight;
	// default 60s; 0 disables warm-up.
	Warmup time.Duration `toml:"warmup"`
	// WarmupStart is the fraction of its computed weight a warming backend starts at; default 0.5.
	WarmupStart float64 `toml:"warmup_start"`
	// WarmupMode is how the ramp advances: "watch" (default) from a few connections, by the
	// timer's step or ×1.25 a second, only while the newcomer's CPU per unit of weight, CPU,
	// CPU pressure and health answers stay within bounds of the pool's, holding or backing off
	// otherwise, never ahead of the timer's line; "timer" on the clock alone.
	// See docs/weights.md, "Warm-up that watches".
	WarmupMode WarmupMode `toml:"warmup_mode"`
	// DeadBand: a new weight vector is worth a switch rewrite only if some bucket moves by more
	// than this fraction of Total (or a backend joins or leaves); default 0.01. Damping
	// approaches a target from one side and stops inside the band, so the split sits up to a
	// band short of its target: 0.02 cost 1 % of p99 in the simulator's noisy-neighbour
	// scenario at 80 % load, for 2 rewrites an hour instead of 27 (docs/benchmarks.md).
	DeadBand float64 `toml:"dead_band"`
	// MaxStep is the largest change of any backend's share per update, as a fraction of 1;
	// default 0.2; 1 disables the limit. Joins and evictions are never delayed by it.
	MaxStep float64 `toml:"max_step"`
	// Panic is what to do when every backend would get 0; default last_good.
	Panic PanicMode `toml:"panic"`
	// MaxCapacityRatio bounds self-reported capacity: a backend's CPU count (and memory), per
	// unit of its declared capacity factor, may count for at most this many times the pool's
	// lower median of the same; more is clamped and shown in the explanation. In [1,1000];
	// default 4. See docs/weights.md, "Bounded capacity claims".
	MaxCapacityRatio float64 `toml:"max_capacity_ratio"`
	// PlanLoad is the pool load the headroom policy plans for when the measured load is
	// lower, in (0,1]; default 0.8. Spreading spare capacity evenly at a light load would send
	// nearly everything to the biggest backend, and a surge would then meet that split.
	PlanLoad float64 `toml:"plan_load"`
	// PlanMargin is the fraction of the measured spare capacity the headroom policy plans as
	// if it were already used, in [0,1); default 0.25. Near saturation the spare capacity is
	// a small difference of noisy sums, and taking all of it at face value overloads the
	// biggest backend whenever the demand was measured low.
	PlanMargin float64 `toml:"plan_margin"`
	// Pressure is how much of a backend's CPU pressure (PSI "some", when its report carries
	// it) the headroom policy takes off the capacity it counts as available, in [0,1]:
	// S = C·(1 − (b − u))·(1 − Pressure·p). Default 1; 0 ignores pressure. See
	// docs/weights.md, "CPU pressure".
	Pressure float64 `toml:"pressure"`
	// InFlightPeriod is the fast loop's period: this often the controller corrects the
	// weights of the adaptive policies (headroom, dynamic, least_conn) by each backend's work
	// in flight, from the probes' in-flight reports (FollowInFlight). Default 0: off: in the
	// lab at 80 % it has not beaten the slow loop, at 50 ms or at 20 ms, because each
	// correction is a group rewrite after which Open vSwitch revalidates every datapath flow
	// (3-4 ms of its CPU each in the lab, and the packets it forwards wait); the simulator,
	// which has no such cost, puts it at 0.82x per-request least connections at 20 ms and
	// headroom alone at 1.36x (docs/weights.md, "The fast loop"); otherwise [10ms, 1s].
	// Static and equal stay fixed splits.
	InFlightPeriod time.Duration `toml:"in_flight_period"`
	// InFlightDeadBand is the fast loop's dead-band, as a fraction of Total: its corrected
	// weights are written only when some backend moved by more than this since the last
	// written ones (or gained or lost all weight). Every write is a group rewrite, and Open
	// vSwitch revalidates its datapath flows after each: at 50 ms with no band the lab's
	// ovs-vswitchd used 0.10 cores more (docs/results/fast-loop.md). Default 0: every change
	// is written; [0, 0.5].
	InFlightDeadBand float64 `toml:"in_flight_dead_band"`
	// InFlightReference is what the fast loop compares a backend's count with.
	// InFlightPool (the default): the other backends' counts, weighted least connections
	// spread over the next period. InFlightOwn: the backend's own moving average of its
	// counts (InFlightTracker), so a steady split stays the slow loop's and only a queue
	// building now moves share. Against the pool a steady state evens the queues out, which
	// undoes the headroom policy's tilt; in the simulator "own" is better for it (0.77x
	// against 0.87x per-request least connections at 80 %), but in the lab's one set it was
	// worse (126.2 ms against 84.8 ms), so the default stays (docs/results/fast-loop.md,
	// "The simulator against the lab").
	InFlightReference string `toml:"in_flight_reference"`
	// SlowShare is the fraction of its target share a slow backend keeps: one whose health
	// checks time out while it is busy ("busy is not dead", docs/weights.md). Default 0.5;
	// (0, 1]. 1 never cuts: a static split then stays the split it was given under any load,
	// as a fixed split written with ovs-ofctl would (the lab's fixed-split peer).
	SlowShare float64 `toml:"slow_share"`
}

// DefaultTuning returns the defaults, drawn from the seeds: LS from CPU and memory with a
// little connection pressure, smoothing 0.3, warm-up from 50% over a minute.
func DefaultTuning() Tuning {
	return Tuning{
		Policy:      PolicyHeadroom,
		Load:        Load{CPU: 0.6, Mem: 0.3, Conn: 0.1, Net: 0},
		Capacity:    Capacity{CPU: 1, Mem: 0},
		Learn:       Learn{Enabled: true, Rate: 0.2, MinLoad: 0.05, MaxFactor: 8},
		Alpha:       0.3,
		MaxConns:    1000,
		MinLoad:     0.02,
		Gain:        0.5,
		Total:       1000,
		Floor:       0.01,
		Warmup:      60 * time.Second,
		WarmupStart: 0.5,
		WarmupMode:  WarmupWatch,
		DeadBand:    0.01,
		MaxStep:     0.2,
		Panic:       PanicLastGood,

		MaxCapacityRatio: 4,
		PlanLoad:         0.8,
		PlanMargin:       0.25,
		Pressure:         1,
		SlowShare:        DefaultSlowShare,

		InFlightReference: InFlightPool,
	}
}

// Values of Tuning.InFlightReference.
const (
	InFlightOwn  = "own"
	InFlightPool = "pool"
)

// Bounds of Tuning.InFlightPeriod when it is not 0.
const (
	MinInFlightPeriod = 10 * time.Millisecond
	MaxInFlightPeriod = time.Second
)

// FollowsInFlight reports whether the fast loop runs for this tuning: a period is set and the
// policy adapts to load (static and equal are fixed splits by choice).
func (t Tuning) FollowsInFlight() bool {
	return t.InFlightPeriod > 0 && !t.Policy.Policy().Fixed()
}

// Validate reports every problem at once; each error starts with the key it is about,
// relative to the tuning table (e.g. "load", "alpha"), so a config loader can prefix it.
func (t Tuning) Validate() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if err := t.Policy.Validate(); err != nil {
		bad("policy", "%v", err)
	}
	const eps = 1e-9
	for _, c := range []struct {
		key string
		v   float64
	}{{"load.cpu", t.Load.CPU}, {"load.mem", t.Load.Mem}, {"load.conn", t.Load.Conn}, {"load.net", t.Load.Net},
		{"capacity.cpu", t.Capacity.CPU}, {"capacity.mem", t.Capacity.Mem}} {
		if !(c.v >= 0 && c.v <= 1) {
			bad(c.key, "coefficient %v outside [0,1]", c.v)
		}
	}
	if s := t.Load.CPU + t.Load.Mem + t.Load.Conn + t.Load.Net; math.Abs(s-1) > eps {
		bad("load", "coefficients cpu+mem+conn+net sum to %g, want 1", s)
	}
	if s := t.Capacity.CPU + t.Capacity.Mem; math.Abs(s-1) > eps {
		bad("capacity", "coefficients cpu+mem sum to %g, want 1", s)
	}
	inUnit := func(key string, v float64) {
		if !(v > 0 && v <= 1) {
			bad(key, "%v outside (0,1]", v)
		}
	}
	inUnit("alpha", t.Alpha)
	inUnit("gain", t.Gain)
	inUnit("max_step", t.MaxStep)
	if t.Learn.Enabled {
		inUnit("learn.rate", t.Learn.Rate)
		if !(t.Learn.MinLoad >= 0 && t.Learn.MinLoad < 1) {
			bad("learn.min_load", "%v outside [0,1)", t.Learn.MinLoad)
		}
		if !(t.Learn.MaxFactor >= 1 && t.Learn.MaxFactor <= 1000) {
			bad("learn.max_factor", "%v outside [1,1000]", t.Learn.MaxFactor)
		}
	}
	if !(t.MaxConns > 0) || math.IsInf(t.MaxConns, 0) {
		bad("max_conns", "%v must be a positive number", t.MaxConns)
	}
	if !(t.MinLoad > 0 && t.MinLoad < 1) {
		bad("min_load", "%v outside (0,1)", t.MinLoad)
	}
	if t.Total < 1 || t.Total > math.MaxUint16 {
		bad("total", "%d outside [1,65535] (OpenFlow bucket weights are 16-bit)", t.Total)
	}
	if !(t.Floor >= 0 && t.Floor < 1) {
		bad("floor", "%v outside [0,1)", t.Floor)
	}
	if t.Warmup < 0 {
		bad("warmup", "%v is negative", t.Warmup)
	}
	if !(t.WarmupStart > 0 && t.WarmupStart <= 1) {
		bad("warmup_start", "%v outside (0,1]", t.WarmupStart)
	}
	if err := t.WarmupMode.Validate(); err != nil {
		bad("warmup_mode", "%v", err)
	}
	if !(t.DeadBand >= 0 && t.DeadBand < 1) {
		bad("dead_band", "%v outside [0,1)", t.DeadBand)
	}
	if !(t.PlanLoad > 0 && t.PlanLoad <= 1) {
		bad("plan_load", "%v outside (0,1]", t.PlanLoad)
	}
	if !(t.PlanMargin >= 0 && t.PlanMargin < 1) {
		bad("plan_margin", "%v outside [0,1)", t.PlanMargin)
	}
	if !(t.Pressure >= 0 && t.Pressure <= 1) {
		bad("pressure", "%v outside [0,1]", t.Pressure)
	}
	if !(t.MaxCapacityRatio >= 1 && t.MaxCapacityRatio <= 1000) {
		bad("max_capacity_ratio", "%v outside [1,1000]", t.MaxCapacityRatio)
	}
	if !(t.SlowShare > 0 && t.SlowShare <= 1) {
		bad("slow_share", "%v outside (0,1]", t.SlowShare)
	}
	if !(t.InFlightDeadBand >= 0 && t.InFlightDeadBand <= 0.5) {
		bad("in_flight_dead_band", "%v outside [0,0.5]", t.InFlightDeadBand)
	}
	if t.InFlightReference != InFlightOwn && t.InFlightReference != InFlightPool {
		bad("in_flight_reference", "%q: want %q or %q", t.InFlightReference, InFlightOwn, InFlightPool)
	}
	if t.InFlightPeriod != 0 && (t.InFlightPeriod < MinInFlightPeriod || t.InFlightPeriod > MaxInFlightPeriod) {
		bad("in_flight_period", "%v: want 0 (off) or %v..%v", t.InFlightPeriod, MinInFlightPeriod, MaxInFlightPeriod)
	}
	switch t.Panic {
	case PanicLastGood, PanicAll:
	default:
		bad("panic", "%q is not one of last_good, all", t.Panic)
	}
	return errs
}
