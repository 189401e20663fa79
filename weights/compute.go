package weights

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

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
// that this package stays pure: copy them from that Result's Explanation.
type Backend struct {
	Name          string
	Status        Status
	WarmupElapsed time.Duration // how long the backend has been warming (StatusWarming only)
	HasMetrics    bool          // false until the first report; load then counts as the pool mean
	CPU, Mem, Net float64       // smoothed utilisations in [0,1]
	Conns         float64       // smoothed established connections
	CPUCount      float64       // cores (may be fractional under a quota); 0 = unknown
	MemBytes      float64       // memory capacity; 0 = unknown
	Factor        float64       // operator's capacity factor; 0 means 1
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
	// "busy is not dead"): it keeps serving, at SlowShare of its policy's target share,
	// unless half or more of the live pool is slow too (then it is the pool's load).
	Slow       bool
	Learned    float64 // learned capacity factor from the previous Result; 0 means 1
	PrevShare  float64 // Explanation.Full of the previous Result; 0 when it had none
	PrevWeight uint16  // weight applied last time; used by the panic rule
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
	Warmup  float64 `json:"warmup"`  // warm-up multiplier in [warmup_start, 1]
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
	// Slow is set when the target share was cut to SlowShare for late health answers.
	Slow bool `json:"slow,omitempty"`
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

	w       []work // per-backend arithmetic, compact so the passes stay in cache
	clamp   []Clamp
	ratio   []float64 // scratch for the capacity bound's median
	rem     []remainder
	edge    []remainder
	buckets [remBuckets]int32
}

// work is one backend's arithmetic. Compute makes a dozen passes over the pool; doing them
// over this 80-byte struct instead of the Backend and Explanation structs (about 300 bytes
// together) is what keeps 10,000 backends within the 2 ms budget.
type work struct {
	ls, c, target, damped, full, final, warm, learned, prev float64
	own, avail                                              float64 // headroom policy: the service's CPU, 1 − neighbour
	press                                                   float64 // headroom policy: Tuning.Pressure × CPU pressure
	weight                                                  uint16
	live, warming, metrics, svc, slow                       bool
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

type remainder struct {
	frac float64
	idx  int32
}

// FallbackReason says why the headroom policy ran as 1/AL, or "" when it did not.
func (r *Result) FallbackReason() string {
	if r.Fallback == 0 {
		return ""
	}
	return fmt.Sprintf("headroom needs the service's own CPU and %d of %d live backends do not report it: 1/AL used", r.Fallback, r.live)
}

// Compute derives one weight per backend, in input order. It never returns an all-zero
// vector while in is not empty: with no live backend the panic rule spreads traffic evenly.
func Compute(in []Backend, t Tuning, out *Result) {
	n := len(in)
	out.Backends = slices.Grow(out.Backends[:0], n)[:n]
	out.w = slices.Grow(out.w[:0], n)[:n]
	out.clamp = slices.Grow(out.clamp[:0], n)[:n]
	clear(out.clamp)
	out.Panic, out.Stepped = false, false
	w := out.w
	live := 0
	for i := range in {
		b := &in[i]
		w[i] = work{learned: orOne(b.Learned), warm: 1, live: b.Status.Live(), warming: b.Status == StatusWarming,
			metrics: b.HasMetrics, prev: b.PrevShare, slow: b.Slow}
		if w[i].live {
			live++
		}
	}
	// Self-reported capacity is bounded before it is averaged (see capacityBound).
	boundP := out.capacityBound(in, w, t.MaxCapacityRatio, cpuCount)
	boundM := out.capacityBound(in, w, t.MaxCapacityRatio, memBytes)
	var sumP, sumM float64
	var nP, nM int
	for i := range in {
		b := &in[i]
		if !w[i].live {
			continue
		}
		if b.CPUCount > 0 {
			p := b.CPUCount
			if lim := boundP * orOne(b.Factor); p > lim {
				out.clamp[i].CPUCount, out.clamp[i].CPUUsed, p = p, lim, lim
			}
			sumP += p
			nP++
		}
		if b.MemBytes > 0 {
			m := b.MemBytes
			if lim := boundM * orOne(b.Factor); m > lim {
				out.clamp[i].MemBytes, out.clamp[i].MemUsed, m = m, lim, lim
			}
			sumM += m
			nM++
		}
	}
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

	// Capacity: normalise CPU count and memory across the live pool so units cancel; load.
	meanP, meanM := safeMean(sumP, nP), safeMean(sumM, nM)
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
			if c := out.clamp[i]; c.CPU() {
				p = c.CPUUsed / meanP
			}
		}
		if b.MemBytes > 0 {
			m = b.MemBytes / meanM
			if c := out.clamp[i]; c.Mem() {
				m = c.MemUsed / meanM
			}
		}
		if out.clamp[i] != (Clamp{}) {
			w[i].note = noteClamped
		}
		w[i].c = (t.Capacity.CPU*p + t.Capacity.Mem*m) * orOne(b.Factor) // declared; learned factor below
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
	// The adaptive policies learn capacity and are damped; the headroom policy learns speed
	// from the CPU the service itself used, so a neighbour's use does not read as slowness.
	out.Fallback, out.live = 0, live
	asked := t.Policy == PolicyHeadroom
	if asked {
		if missing := cpuSplit(in, w, t.Pressure); missing > 0 {
			// Without the service's own CPU a neighbour's use reads as the service's, and the
			// spare capacity the policy shares out is wrong in both directions (4× the
			// oracle's p99 in the simulator); 1/AL copes with it, so the pool falls back.
			t.Policy = PolicyDynamic
			out.Fallback = missing
		}
	}
	dynamic := t.Policy == PolicyDynamic || t.Policy == PolicyHeadroom
	if dynamic && t.Learn.Enabled {
		learn(in, t, w)
	}

	// C normalised to a pool mean of 1, with the learned factor for the dynamic policy.
	var sumC float64
	for i := range w {
		if !w[i].live {
			continue
		}
		if dynamic {
			w[i].c *= w[i].learned
		}
		sumC += w[i].c
	}
	meanC := sumC / float64(live)

	// Target shares from the policy.
	var sumS float64
	if t.Policy == PolicyHeadroom {
		sumS = headroom(w, t)
	}
	for i := range w {
		if !w[i].live {
			continue
		}
		x := &w[i]
		x.c /= meanC
		var s float64
		switch t.Policy {
		case PolicyStatic:
			s = x.c // no learning was applied: declared capacity
		case PolicyEqual:
			s = 1
		case PolicyLeastConn:
			s = x.c / (max(in[i].Conns, 0) + 1)
		case PolicyHeadroom:
			continue // headroom set the target and its sum
		default:
			s = x.c / max(x.ls, t.MinLoad)
		}
		x.target = s
		sumS += s
	}

	sumS = slowdown(w, live, sumS)

	// Damping: move from the previous share toward the target by Gain, in log space.
	damp := dynamic && t.Gain < 1
	sumD := 0.0
	for i := range w {
		if !w[i].live {
			continue
		}
		x := &w[i]
		x.target /= sumS
		x.damped = x.target
		if damp && x.prev > 0 {
			if t.Gain == 0.5 { // the default: a geometric mean, one instruction instead of exp+2 log
				x.damped = math.Sqrt(x.prev * x.target)
			} else {
				x.damped = math.Exp((1-t.Gain)*math.Log(x.prev) + t.Gain*math.Log(x.target))
			}
		}
		sumD += x.damped
	}

	stepLimit(w, t, out, sumD)
	units(w, t, total, live)
	warmup(in, t, w)
	round(w, out)

	exp := out.Backends
	for i := range in {
		x := &w[i]
		e := Explanation{Name: in[i].Name, Status: in[i].Status.String(), Learned: x.learned, Warmup: x.warm, Weight: x.weight}
		if x.live {
			e.LS, e.C, e.AL = x.ls, x.c, x.ls/x.c
			e.Target, e.Damped, e.Full = x.target, x.damped, x.full
			e.Final = float64(x.weight) / float64(total)
			e.Note = notes[x.note]
			e.Slow = x.slow
			e.Clamp = out.clamp[i]
			if asked {
				e.Used = "cpu"
				if x.svc {
					e.Used, e.Own = "service_cpu", x.own // shown even when the pool fell back
				}
			}
			if t.Policy == PolicyHeadroom {
				e.Own, e.Avail, e.Pressure = x.own, x.avail, x.press
				e.Headroom = max(x.supply()-x.c*x.own, 0)
			}
		}
		exp[i] = e
	}
}

type resource uint8

const (
	cpuCount resource = iota
	memBytes
)

func (r resource) of(b *Backend) float64 {
	if r == cpuCount {
		return b.CPUCount
	}
	return b.MemBytes
}

// capacityBound returns how much of a resource a live backend may claim per unit of declared
// capacity: ratio × the lower median, over the live backends reporting it, of reported ÷
// declared factor; +Inf when no claim exceeds it. A backend's CPU count and memory are its own
// claims (a probe or an snmpd anyone with the host can change), and C is relative, so one
// claim of 200,000 cores would take nearly every unit. The mean is no reference (the liar
// moves it: with three backends 200,000 cores is only 3× the mean); the lower median is moved
// by none of up to half the pool (with two backends, by neither: it is the smaller one).
// Dividing by the declared factor keeps heterogeneous pools right: a backend declared twice
// as big may report twice the cores. Under-claiming needs no bound: it only costs the
// claimant its own share.
func (r *Result) capacityBound(in []Backend, w []work, ratio float64, res resource) float64 {
	if !(ratio >= 1) {
		return math.Inf(1)
	}
	lo, hi := math.Inf(1), 0.0
	k := 0
	for i := range in {
		if v := res.of(&in[i]); w[i].live && v > 0 {
			x := v / orOne(in[i].Factor)
			lo, hi = min(lo, x), max(hi, x)
			k++
		}
	}
	if k < 2 || hi <= ratio*lo { // the common case: nothing can exceed ratio × the median
		return math.Inf(1)
	}
	r.ratio = r.ratio[:0]
	for i := range in {
		if v := res.of(&in[i]); w[i].live && v > 0 {
			r.ratio = append(r.ratio, v/orOne(in[i].Factor))
		}
	}
	return ratio * Nth(r.ratio, (k-1)/2)
}

// Nth returns the k-th smallest of v (0-based, reordering v) by quickselect: O(n), where
// sorting 10,000 claims twice per update was a fifth of Compute's budget. Claims come from
// backends, so a pivot sequence crafted to go quadratic is cut off after 2·log2(n) rounds by a
// sort. The simulator's quantiles use it too.
func Nth(v []float64, k int) float64 {
	lo, hi := 0, len(v)-1
	for budget := 2 * bits.Len(uint(len(v))); lo < hi; budget-- {
		if budget == 0 {
			slices.Sort(v[lo : hi+1])
			return v[k]
		}
		// Median of three as the pivot, then a Hoare partition.
		m := lo + (hi-lo)/2
		if v[m] < v[lo] {
			v[m], v[lo] = v[lo], v[m]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[hi] < v[m] {
			v[hi], v[m] = v[m], v[hi]
		}
		p := v[m]
		i, j := lo, hi
		for i <= j {
			for v[i] < p {
				i++
			}
			for v[j] > p {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return v[k]
		}
	}
	return v[k]
}

// learn moves each measured backend's capacity factor toward throughput per unit of load,
// relative to the pool, divided by its declared capacity. The declared capacity is the prior;
// the factor corrects it slowly (Rate) and within bounds (MaxFactor), so one noisy period
// cannot swing the pool.
func learn(in []Backend, t Tuning, w []work) {
	measured := func(i int) bool {
		return w[i].live && w[i].metrics && in[i].Throughput > 0 && w[i].util(t) >= t.Learn.MinLoad
	}
	var sumSpeed, sumPrior float64
	k := 0
	for i := range in {
		if measured(i) {
			sumSpeed += in[i].Throughput / w[i].util(t)
			sumPrior += w[i].c
			k++
		}
	}
	if k < 2 { // one backend alone has nothing to be compared with
		return
	}
	meanSpeed, meanPrior := sumSpeed/float64(k), sumPrior/float64(k)
	lo, hi := math.Log(1/t.Learn.MaxFactor), math.Log(t.Learn.MaxFactor)
	for i := range in {
		if !measured(i) {
			continue
		}
		est := (in[i].Throughput / w[i].util(t)) / meanSpeed
		prior := w[i].c / meanPrior
		lf := math.Log(w[i].learned)
		lf += t.Learn.Rate * (math.Log(est/prior) - lf)
		w[i].learned = math.Exp(min(max(lf, lo), hi))
	}
}

// stepLimit normalises the damped shares and bounds how far any share moves per update by
// interpolating between the previous shares and the damped ones: interpolation keeps the sum
// at 1 and keeps the order of the moves. It applies only when the live set is unchanged: an
// eviction must take effect at once, and a newcomer is ramped by warm-up instead.
func stepLimit(w []work, t Tuning, out *Result, sumD float64) {
	same := true
	var sumPrev float64
	for i := range w {
		x := &w[i]
		if x.live {
			x.damped /= sumD
			sumPrev += x.prev
		}
		if x.live != (x.prev > 0) {
			same = false
		}
	}
	k := 1.0
	if same && t.MaxStep < 1 && sumPrev > 0 {
		var worst float64
		for i := range w {
			if w[i].live {
				worst = max(worst, math.Abs(w[i].damped-w[i].prev/sumPrev))
			}
		}
		if worst > t.MaxStep {
			k = t.MaxStep / worst
			out.Stepped = true
		}
	}
	for i := range w {
		x := &w[i]
		if !x.live {
			continue
		}
		x.full = x.damped
		if k < 1 {
			p := x.prev / sumPrev
			x.full = p + k*(x.damped-p)
		}
	}
}

// units turns shares into exact (fractional) weight units with a floor: a live backend whose
// share of the total is below the floor gets the floor, and the others share what is left in
// proportion. The floor is a minimum, not an addition: adding it to every share biased the
// smallest backends upward (the simulator showed the slowest of 1:2:4 near saturation at 95%
// load because of it).
func units(w []work, t Tuning, total, live int) {
	floor := math.Round(t.Floor * float64(total))
	if floor*float64(live) > float64(total) {
		floor = float64(total / live)
	}
	T := float64(total)
	for i := range w {
		if w[i].live {
			w[i].final = T * w[i].full
		}
	}
	if floor <= 0 {
		return
	}
	// Raising some backends to the floor lowers the others, which may bring more of them
	// below it: repeat until nobody new falls under (at most live times, usually once).
	for range live {
		var pinned, free float64
		for i := range w {
			if !w[i].live {
				continue
			}
			if w[i].final <= floor {
				pinned++
			} else {
				free += w[i].final
			}
		}
		if pinned == 0 || free == 0 {
			return
		}
		scale := (T - pinned*floor) / free
		changed := false
		for i := range w {
			x := &w[i]
			if !x.live {
				continue
			}
			if x.final <= floor {
				x.final = floor
				continue
			}
			x.final *= scale
			if x.final < floor {
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}

// warmup gives a warming backend its ramp fraction of its computed weight (in units, after
// the floor) and hands what it gives up to the backends that are not warming, so a newcomer's
// first weight is exactly that fraction of what it would otherwise get, up to rounding. When
// every live backend is warming there is no one to hand it to, and the shares stay as they were.
func warmup(in []Backend, t Tuning, w []work) {
	if t.Warmup <= 0 {
		return
	}
	var freed, rest float64
	for i := range w {
		x := &w[i]
		if !x.live {
			continue
		}
		if x.warming {
			x.warm = max(t.WarmupStart+(1-t.WarmupStart)*min(float64(in[i].WarmupElapsed)/float64(t.Warmup), 1), t.WarmupStart)
		}
		if x.warm < 1 {
			freed += x.final * (1 - x.warm)
		} else {
			rest += x.final
		}
	}
	if freed == 0 {
		return
	}
	if rest == 0 {
		for i := range w {
			if w[i].live {
				w[i].note = noteAllWarming
			}
		}
		return
	}
	for i := range w {
		x := &w[i]
		if !x.live {
			continue
		}
		if x.warm < 1 {
			x.final *= x.warm
		} else {
			x.final += freed * x.final / rest
		}
	}
}

// round turns exact units into integers by the largest remainder method, so live weights sum
// exactly to the total; every live backend keeps at least 1 (Open vSwitch never selects a
// bucket of weight 0), taken from the largest weight when needed.
func round(w []work, out *Result) {
	out.rem = out.rem[:0]
	assigned, zeros := 0, false
	for i := range w {
		x := &w[i]
		if !x.live {
			continue
		}
		u := int(x.final)
		x.weight = uint16(u)
		assigned += u
		out.rem = append(out.rem, remainder{frac: x.final - float64(u), idx: int32(i)})
	}
	if left := out.Total - assigned; left > 0 {
		out.topRemainders(left)
	}
	for i := range w {
		if w[i].live && w[i].weight == 0 {
			zeros = true
		}
	}
	if !zeros {
		return
	}
	maxIdx := -1
	for i := range w {
		if w[i].live && (maxIdx < 0 || w[i].weight > w[maxIdx].weight) {
			maxIdx = i
		}
	}
	for i := range w {
		if w[i].live && w[i].weight == 0 && w[maxIdx].weight > 1 {
			w[i].weight++
			w[maxIdx].weight--
		}
	}
}

const remBuckets = 1024

// topRemainders gives one more unit to the `left` backends with the largest remainders (ties
// to the lower index). A full sort of 10,000 remainders was most of Compute's time; bucketing
// by the leading bits of the fraction needs one pass, and only the boundary bucket is sorted.
func (r *Result) topRemainders(left int) {
	clear(r.buckets[:])
	for _, x := range r.rem {
		r.buckets[bucketOf(x.frac)]++
	}
	b := remBuckets - 1
	for ; b >= 0; b-- {
		if int(r.buckets[b]) >= left {
			break
		}
		left -= int(r.buckets[b])
	}
	// Every remainder above bucket b gets a unit; bucket b is sorted and gives `left` more.
	r.edge = r.edge[:0]
	for _, x := range r.rem {
		switch k := bucketOf(x.frac); {
		case k > b:
			r.w[x.idx].weight++
		case k == b:
			r.edge = append(r.edge, x)
		}
	}
	slices.SortFunc(r.edge, byRemainder)
	for j := 0; j < left && j < len(r.edge); j++ {
		r.w[r.edge[j].idx].weight++
	}
}

func bucketOf(frac float64) int { return min(max(int(frac*remBuckets), 0), remBuckets-1) }

func byRemainder(a, b remainder) int {
	switch {
	case a.frac > b.frac:
		return -1
	case a.frac < b.frac:
		return 1
	}
	return int(a.idx - b.idx)
}

// panicWeights spreads the total evenly when no backend is live: a select group with no
// usable bucket drops every new connection, which is worse than sending some to a backend
// that may be overloaded or whose reports merely stopped.
func panicWeights(in []Backend, t Tuning, out *Result) {
	exp := out.Backends
	out.Panic = true
	pick := func(keep func(b *Backend) bool) int {
		c := 0
		for i := range in {
			if keep(&in[i]) {
				c++
			}
		}
		return c
	}
	chosen := func(b *Backend) bool { return false }
	note := ""
	if t.Panic == PanicLastGood {
		chosen = func(b *Backend) bool { return b.PrevWeight > 0 && b.Status != StatusDrained }
		note = "panic: no live backend, serving evenly over the last-known-good set"
	}
	if pick(chosen) == 0 {
		chosen = func(b *Backend) bool { return b.Status != StatusDrained }
		note = "panic: no live backend, serving evenly over every backend not drained"
	}
	if pick(chosen) == 0 {
		chosen = func(*Backend) bool { return true }
		note = "panic: every backend is drained, serving evenly over all of them"
	}
	k := pick(chosen)
	each, extra := out.Total/k, out.Total%k
	for i := range in {
		if !chosen(&in[i]) {
			continue
		}
		w := each
		if extra > 0 {
			w++
			extra--
		}
		exp[i].Weight = uint16(w)
		exp[i].Final = float64(w) / float64(out.Total)
		exp[i].Note = note
	}
}

// Worth reports whether next differs enough from the weights last applied (prev, in the
// same order) to rewrite the switch: a backend gaining or losing all weight always counts;
// otherwise some bucket must move by more than DeadBand of the total. The dead-band is there
// for noisy measurements; the static and equal policies have none, so for them any change is
// worth a rewrite (otherwise the step limit's last small step toward their exact target would
// never be applied).
//
// Under the headroom policy a move inside the dead-band also counts when it would change some
// backend's spare CPU by more than spareBand of what it has. Near saturation the dead-band's
// 2 % of the total is most of a big backend's spare capacity: in the simulator at 95 % load a
// fast backend held 1.2 points above its target ran at 0.988 utilisation for hours, and the p99
// went to 1.9× the oracle's, because the move back was below the dead-band.
func Worth(prev []uint16, next *Result, t Tuning) bool {
	if len(prev) != len(next.Backends) {
		return true
	}
	limit := t.DeadBand * float64(next.Total)
	if t.Policy == PolicyStatic || t.Policy == PolicyEqual {
		limit = 0
	}
	spare := t.Policy == PolicyHeadroom && next.Fallback == 0
	for i, e := range next.Backends {
		if (prev[i] == 0) != (e.Weight == 0) {
			return true
		}
		if math.Abs(float64(e.Weight)-float64(prev[i])) > limit {
			return true
		}
		if spare && prev[i] > 0 && spareMoves(e, float64(e.Weight)/float64(prev[i])) {
			return true
		}
	}
	return false
}

// spareBand is the part of a backend's spare CPU a reweight must move for the headroom policy
// to rewrite inside the dead-band; minSpare stands in for a spare capacity measured at or near
// zero, so that a one-unit change to a saturated backend is not a rewrite by itself.
const (
	spareBand = 0.5
	minSpare  = 0.02
)

// spareMoves reports whether scaling a backend's traffic by ratio changes its spare CPU by
// more than spareBand of the smaller of before and after. Spare now is Avail − Own (1 − the
// CPU's whole use); the service's own CPU Own scales with its traffic.
func spareMoves(e Explanation, ratio float64) bool {
	now := max(e.Avail-e.Own, 0)
	after := max(now-e.Own*(ratio-1), 0)
	return math.Abs(after-now) > spareBand*max(min(now, after), minSpare)
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
