package weights

import (
	"fmt"
	"math"
	"slices"
	"time"

	"flowweight/internal/apportion"
	"flowweight/internal/fraction"
)

// Status is a backend's health as the collector sees it. Only Up and Warming backends carry
// traffic; the others get weight 0 (unless the panic rule applies).
type Status uint8

const (
	StatusUnknown Status = iota // configured, no report yet
	StatusWarming               // new or recovered, ramping up
	StatusUp                    // healthy
	StatusDown                  // failed fail_threshold consecutive health checks
	StatusStale                 // no report for stale_after
	StatusDrained               // the operator asked for no new traffic
)

var statusNames = [...]string{"unknown", "warming", "up", "down", "stale", "drained"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "invalid"
}

// Live reports whether a backend in this status should receive new connections.
func (s Status) Live() bool { return s == StatusUp || s == StatusWarming }

// Backend is what Compute needs to know about one backend. Utilisations are smoothed by the
// caller (see EWMA). The Prev* and Learned fields carry state from the previous Result, so
// that this package stays pure: copy them from that Result's Explanation (PrevWarmup as its
// field says).
type Backend struct {
	Name   string
	Status Status
	// WarmupElapsed is how long ago the backend last began warming, while it is warming or
	// up (the collector's State.WarmupElapsed): a watched ramp may outlast the timer.
	WarmupElapsed time.Duration
	HasMetrics    bool    // false until the first report; load then counts as the pool mean
	CPU, Mem, Net float64 // smoothed utilisations in [0,1]
	Conns         float64 // smoothed established connections
	CPUCount      float64 // cores (may be fractional under a quota); 0 = unknown
	MemBytes      float64 // memory capacity; 0 = unknown
	Factor        float64 // operator's capacity factor; 0 means 1
	// Throughput is the work the backend did in the last period, in any unit that is the
	// same for the whole pool (the controller uses per-backend switch counters); <= 0 when
	// unknown. Used only to learn capacity.
	Throughput float64
	// ServiceCPU is the smoothed CPU the service's own processes use, as a fraction of
	// CPUCount, when HasServiceCPU; CPU then also holds everyone else's use of the same CPUs
	// (a neighbour in the cgroup or on the host), and the headroom policy tells them apart.
	ServiceCPU    float64
	HasServiceCPU bool
	// CPUPressure is the smoothed fraction of time in which some task waited for a CPU of
	// the backend (PSI "some": the cgroup's own on cgroup v2, the host's otherwise), when
	// HasPressure. The headroom policy discounts the capacity it counts as available by it
	// (Tuning.Pressure): a CPU others queue for is not one our requests can have at once.
	CPUPressure float64
	HasPressure bool
	// Slow says the backend's health checks time out while it is busy (the collector's
	// "busy is not dead"): it keeps serving, at Tuning.SlowShare of its policy's target share,
	// unless half or more of the live pool is slow too (then it is the pool's load).
	Slow bool
	// PrevWarmup and PrevWarmupElapsed carry a watched warm-up (Tuning.WarmupMode "watch")
	// from the previous periodic Result: its Explanation.Warmup and this Backend's
	// WarmupElapsed then, carried only while that Result's WarmupTimer was set (the backend
	// ramped); 0: no ramp under way, and a new one starts at a few connections.
	PrevWarmup        float64
	PrevWarmupElapsed time.Duration
	// ServedWeight is the weight the switch served the backend with over the last period,
	// which its CPU answers to, when it is not PrevWeight (a shadow policy's computation,
	// whose PrevWeight is its own); 0: PrevWeight.
	ServedWeight uint16
	Learned      float64 // learned capacity factor from the previous Result; 0 means 1
	PrevShare    float64 // Explanation.Full of the previous Result; 0 when it had none
	PrevWeight   uint16  // weight applied last time; used by the panic rule
}

// Explanation says how one backend's weight came about. Shares sum to 1 over live backends.
type Explanation struct {
	Name    string  `json:"name"`
	Status  string  `json:"status"`
	LS      float64 `json:"ls"`      // composite load in [0,1]
	C       float64 `json:"c"`       // capacity, normalised to a pool mean of 1
	AL      float64 `json:"al"`      // LS / C
	Learned float64 `json:"learned"` // learned capacity factor after this update
	Target  float64 `json:"target"`  // share from the policy alone
	Damped  float64 `json:"damped"`  // after damping toward the previous share
	Full    float64 `json:"full"`    // after the step limit: the share before warm-up and floor
	Warmup  float64 `json:"warmup"`  // warm-up multiplier: [warmup_start, 1] on the timer, down to 0.05 watched
	Final   float64 `json:"final"`   // after warm-up, floor and rounding
	Weight  uint16  `json:"weight"`
	Note    string  `json:"note,omitempty"`
	// Clamp is set when the backend claimed more CPU or memory than max_capacity_ratio allows
	// and the bound was used in C instead. Compute does not log; the caller does, once per
	// backend when clamping starts.
	Clamp Clamp `json:"clamp,omitzero"`
	// The headroom policy's terms (docs/weights.md, "The headroom policy"): Own is the CPU
	// the service used as a fraction of its CPUs, Avail the fraction nobody else used (1 −
	// neighbour), Headroom C·(Avail − Own), the spare capacity in pool-mean units, and Used
	// the signals it had ("service_cpu", or "cpu" when the service's own CPU is unknown and
	// all of the CPU's use counts as the service's).
	Own      float64 `json:"own,omitempty"`
	Avail    float64 `json:"avail,omitempty"`
	Headroom float64 `json:"headroom,omitempty"`
	// Pressure is the CPU pressure the available capacity was discounted by, after
	// Tuning.Pressure; absent when the report carried none.
	Pressure float64 `json:"pressure,omitempty"`
	Used     string  `json:"used,omitempty"`
	// Slow is set when the target share was cut to Tuning.SlowShare for late health answers.
	Slow bool `json:"slow,omitempty"`
	// WarmupTimer is the ramp fraction the timer alone would give while the backend ramps,
	// and WarmupWatch the watched ramp's verdict this update ("ramp", "hold: …", "back off:
	// …"; Tuning.WarmupMode "watch"): why Warmup is below WarmupTimer.
	WarmupTimer float64 `json:"warmup_timer,omitempty"`
	WarmupWatch string  `json:"warmup_watch,omitempty"`
	// rampMoved: a watched ramp that is not holding, whose weight Worth writes however
	// little it moved (worth.go).
	rampMoved bool
}

// Clamp records a self-reported capacity that was bounded (docs/weights.md, "Bounded
// capacity claims"). Zero fields: that resource was not clamped.
type Clamp struct {
	CPUCount float64 `json:"cpu_count,omitempty"` // CPU count the backend reported
	CPUUsed  float64 `json:"cpu_used,omitempty"`  // the bound used instead
	MemBytes float64 `json:"mem_bytes,omitempty"` // memory the backend reported
	MemUsed  float64 `json:"mem_used,omitempty"`  // the bound used instead
}

// CPU reports whether the CPU count was clamped.
func (c Clamp) CPU() bool { return c.CPUUsed > 0 }

// Mem reports whether the memory size was clamped.
func (c Clamp) Mem() bool { return c.MemUsed > 0 }

// Result is the outcome of Compute. Reuse one Result across calls: Compute overwrites it and
// keeps its buffers, so steady-state updates do not allocate.
type Result struct {
	Backends []Explanation
	Total    int  // sum of the weights; Tuning.Total, raised to the live count if smaller
	Panic    bool // no live backend: weights come from the panic rule
	Stepped  bool // the step limit held some share back
	// Fallback is how many live backends lacked the service's own CPU when the headroom
	// policy therefore ran as 1/AL; 0 when it did not fall back (see FallbackReason).
	Fallback int
	live     int

	w     []work // per-backend arithmetic, compact so the passes stay in cache
	clamp []Clamp
	ramps []ramp    // while a backend ramps: the timer's fraction and the watch's verdict
	ratio []float64 // scratch for the capacity bound's median
	rem   []apportion.Remainder
	rank  apportion.Ranker
}

// work is one backend's arithmetic. Compute makes a dozen passes over the pool; doing them
// over this 104-byte struct instead of the Backend and Explanation structs (about 300 bytes
// together) is what keeps 10,000 backends within the 2 ms budget.
type work struct {
	ls, c, target, damped, full, final, warm, learned, prev float64
	own, avail                                              float64 // headroom policy: the service's CPU, 1 − neighbour
	press                                                   float64 // headroom policy: Tuning.Pressure × CPU pressure
	weight                                                  uint16
	live, ramp, metrics, svc, slow                          bool
	note                                                    uint8
}

const (
	noteNone uint8 = iota
	noteNoMetrics
	noteAllWarming
	noteClamped
)

var notes = [...]string{"", "no metrics yet: load taken as the pool mean", "every live backend is warming: shares kept",
	"reported capacity above max_capacity_ratio × the pool's: clamped (see clamp)"}

// FallbackReason says why the headroom policy ran as 1/AL, or "" when it did not.
func (r *Result) FallbackReason() string {
	if r.Fallback == 0 {
		return ""
	}
	return fmt.Sprintf("headroom needs the service's own CPU and %d of %d live backends do not report it: 1/AL used", r.Fallback, r.live)
}

// Compute derives one weight per backend, in input order. It never returns an all-zero
// vector while in is not empty: with no live backend the panic rule spreads traffic evenly.
//
// It is the pipeline every policy shares: which backends are live, their bounded capacity
// claims and load, the policy's raw target shares (Policy), the slow cut, damping, the step
// limit, the floor, warm-up, rounding, and an explanation per backend.
func Compute(in []Backend, t Tuning, out *Result) {
	n := len(in)
	out.Backends = slices.Grow(out.Backends[:0], n)[:n]
	out.w = slices.Grow(out.w[:0], n)[:n]
	out.clamp = slices.Grow(out.clamp[:0], n)[:n]
	out.ramps = slices.Grow(out.ramps[:0], n)[:n]
	clear(out.clamp)
	out.Panic, out.Stepped = false, false
	w := out.w
	live, anyRamp := 0, false
	for i := range in {
		b := &in[i]
		w[i] = work{learned: orOne(b.Learned), warm: 1, live: b.Status.Live(),
			metrics: b.HasMetrics, prev: b.PrevShare, slow: b.Slow}
		if w[i].live {
			live++
			w[i].ramp = ramping(b, t)
			anyRamp = anyRamp || w[i].ramp
		}
	}
	cl := out.claims(in, w, t)
	total := t.Total
	if total < n {
		total = min(n, math.MaxUint16)
	}
	out.Total = total
	if n == 0 {
		return
	}
	if live == 0 {
		for i := range in {
			out.Backends[i] = Explanation{Name: in[i].Name, Status: in[i].Status.String(), Learned: w[i].learned, Warmup: 1}
		}
		panicWeights(in, t, out)
		return
	}
	out.measure(in, w, t, cl, live)

	// The policy configured, and the one that runs in its place when it falls back (headroom
	// without the service's own CPU). The adaptive policies learn capacity and are damped.
	out.Fallback, out.live = 0, live
	asked := t.Policy.Policy()
	run := asked
	if p := asked.prepare(in, w, t, out); p != nil {
		run = p
	}
	adaptive := run.Adaptive()
	if adaptive && t.Learn.Enabled {
		learn(in, t, w, run)
	}

	// C normalised to a pool mean of 1 (by the policy's shares), with the learned factor for
	// the adaptive policies.
	var sumC float64
	for i := range w {
		if !w[i].live {
			continue
		}
		if adaptive {
			w[i].c *= w[i].learned
		}
		sumC += w[i].c
	}
	sumS := run.shares(in, w, t, sumC/float64(live))
	slowdown(in, w, live, sumS, t.SlowShare)

	sumD := damp(w, t, adaptive && t.Gain < 1, sumS)
	stepLimit(w, t, out, sumD)
	units(w, t, total, live)
	warmup(in, t, w, out.clamp, out.ramps, anyRamp)
	round(w, out)
	out.explain(in, asked)
}

// claimed is what the live backends claim in total: CPU counts and memory sizes, after the
// bound, and how many claimed each.
type claimed struct {
	sumP, sumM float64
	nP, nM     int
}

// claims bounds each live backend's self-reported capacity before it is averaged (see
// capacityBound), recording the clamps, and sums the claims.
func (r *Result) claims(in []Backend, w []work, t Tuning) (cl claimed) {
	boundP := r.capacityBound(in, w, t.MaxCapacityRatio, cpuCount)
	boundM := r.capacityBound(in, w, t.MaxCapacityRatio, memBytes)
	for i := range in {
		b := &in[i]
		if !w[i].live {
			continue
		}
		if b.CPUCount > 0 {
			p := b.CPUCount
			if lim := boundP * orOne(b.Factor); p > lim {
				r.clamp[i].CPUCount, r.clamp[i].CPUUsed, p = p, lim, lim
			}
			cl.sumP += p
			cl.nP++
		}
		if b.MemBytes > 0 {
			m := b.MemBytes
			if lim := boundM * orOne(b.Factor); m > lim {
				r.clamp[i].MemBytes, r.clamp[i].MemUsed, m = m, lim, lim
			}
			cl.sumM += m
			cl.nM++
		}
	}
	return cl
}

// measure sets each live backend's declared capacity C (CPU count and memory normalised
// across the live pool so units cancel, times the operator's factor) and its composite load
// LS; a backend without metrics yet takes the pool's mean load.
func (r *Result) measure(in []Backend, w []work, t Tuning, cl claimed, live int) {
	meanP, meanM := safeMean(cl.sumP, cl.nP), safeMean(cl.sumM, cl.nM)
	var sumLS float64
	nLS := 0
	for i := range in {
		if !w[i].live {
			continue
		}
		b := &in[i]
		p, m := 1.0, 1.0
		if b.CPUCount > 0 {
			p = b.CPUCount / meanP
			if c := r.clamp[i]; c.CPU() {
				p = c.CPUUsed / meanP
			}
		}
		if b.MemBytes > 0 {
			m = b.MemBytes / meanM
			if c := r.clamp[i]; c.Mem() {
				m = c.MemUsed / meanM
			}
		}
		if r.clamp[i] != (Clamp{}) {
			w[i].note = noteClamped
		}
		w[i].c = (t.Capacity.CPU*p + t.Capacity.Mem*m) * orOne(b.Factor) // declared; learned factor later
		if b.HasMetrics {
			ls := fraction.Clamp(t.Load.CPU*fraction.Clamp(b.CPU) + t.Load.Mem*fraction.Clamp(b.Mem) +
				t.Load.Conn*fraction.Clamp(b.Conns/t.MaxConns) + t.Load.Net*fraction.Clamp(b.Net))
			w[i].ls = ls
			sumLS += ls
			nLS++
		}
	}
	if nLS < live {
		meanLS := t.MinLoad
		if nLS > 0 {
			meanLS = sumLS / float64(nLS)
		}
		for i := range w {
			if w[i].live && !w[i].metrics {
				w[i].ls, w[i].note = meanLS, noteNoMetrics
			}
		}
	}
}

// explain writes each backend's explanation from its arithmetic; the policy asked for adds
// its own terms.
func (r *Result) explain(in []Backend, asked Policy) {
	exp := r.Backends
	for i := range in {
		x := &r.w[i]
		e := Explanation{Name: in[i].Name, Status: in[i].Status.String(), Learned: x.learned, Warmup: x.warm, Weight: x.weight}
		if x.live {
			e.LS, e.C, e.AL = x.ls, x.c, x.ls/x.c
			e.Target, e.Damped, e.Full = x.target, x.damped, x.full
			e.Final = float64(x.weight) / float64(r.Total)
			e.Note = notes[x.note]
			e.Slow = x.slow
			e.Clamp = r.clamp[i]
			if x.ramp {
				rp := r.ramps[i]
				e.WarmupTimer, e.WarmupWatch = rp.timer, watchNames[rp.watch]
				e.rampMoved = rp.watch != watchNone && rp.watch != watchHold && rp.watch != watchHoldCost && rp.watch != watchHoldPressure
			}
		}
		exp[i] = e
		if x.live {
			asked.explain(&exp[i], x, r) // in place: a pointer to e would escape to the heap
		}
	}
}

// Weights returns the weights of r in input order, appended to dst.
func (r *Result) Weights(dst []uint16) []uint16 {
	for _, e := range r.Backends {
		dst = append(dst, e.Weight)
	}
	return dst
}

func orOne(v float64) float64 {
	if v > 0 && !math.IsInf(v, 0) {
		return v
	}
	return 1
}

func safeMean(sum float64, n int) float64 {
	if n == 0 || sum <= 0 {
		return 1
	}
	return sum / float64(n)
}
