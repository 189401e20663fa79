package weights

import (
	"math"

	"flowweight/internal/fraction"
)

// The headroom policy (docs/weights.md, "The headroom policy").
//
// 1/AL reads a backend's CPU as its load. A CPU kept busy by someone else (a neighbour in the
// cgroup, a batch job on the host) then reads as load the backend carries, the learned
// capacity reads it as slowness, and both shrink the share of exactly the backends whose
// spare capacity is intact elsewhere: the real lab settled near equal weights with two of
// three backends half taken. The headroom policy works from what a backend can still absorb
// instead. With the service's own CPU u, the CPU's total use b (u plus everyone else's) and
// the capacity C (declared, times the speed learned from throughput per unit of u):
//
//	available  S = C · (1 − (b − u)) · (1 − κ·p)   the part of the backend nobody else uses,
//	                                               less the time a CPU was already queued for
//	demand     D = C · u                           what our traffic uses of it
//	headroom   H = S − D
//
// p is the CPU pressure (PSI "some") when the report carries it, 0 when it does not, and κ is
// Tuning.Pressure.
//
// It then gives each backend the demand that leaves every backend the same headroom:
// D'_i = S_i − H*, with H* = (ΣS − ΣD)/n, water-filled so that nobody gets less than
// nothing. Equal spare capacity, not equal utilisation, is what equalises queueing: a
// server's queue grows with 1/(spare rate), so the backend with the least spare rate sets
// the tail. Proportional shares (the "oracle" of speed) leave the slowest backend with the
// least spare rate; equal headroom gives the slow ones less than their proportion and the
// fast ones more, which is why it beats the best proportional split on p99 in the
// simulator.
//
// Two margins keep it off the knife edge. Near saturation the common headroom is a small
// difference of two measured sums, and an underestimated demand hands the biggest backend
// more than it can take: the demand is planned as the measured one plus PlanMargin of the
// spare capacity (the simulator's p99 at 95 % load swung between 0.8× and 1.35× the oracle
// over seeds without it). At a light load equal headroom would give nearly everything to
// the biggest backend, and a surge would meet that split before the next update: the demand
// is planned for at least PlanLoad of the available capacity.

// cpuSplit sets each live backend's own CPU and the fraction of its CPUs nobody else uses, and
// returns how many live backends with metrics lack the service's own CPU (an SNMP backend, an
// older probe, a probe told no pidfile, unit or cgroup). A backend without metrics yet takes
// the pool mean.
func cpuSplit(in []Backend, w []work, pressure float64) (missing int) {
	var sumOwn, sumAvail, sumPress float64
	k := 0
	for i := range in {
		x := &w[i]
		if !x.live || !x.metrics {
			continue
		}
		busy := fraction.Clamp(in[i].CPU)
		x.own = busy
		if in[i].HasServiceCPU {
			x.own, x.svc = min(fraction.Clamp(in[i].ServiceCPU), busy), true
		} else {
			missing++
		}
		x.avail = 1 - (busy - x.own)
		x.press = 0
		if in[i].HasPressure {
			x.press = pressure * min(fraction.Clamp(in[i].CPUPressure), maxPressure)
		}
		sumOwn += x.own
		sumAvail += x.avail
		sumPress += x.press
		k++
	}
	meanOwn, meanAvail, meanPress := 0.0, 1.0, 0.0
	if k > 0 {
		meanOwn, meanAvail, meanPress = sumOwn/float64(k), sumAvail/float64(k), sumPress/float64(k)
	}
	for i := range w {
		if x := &w[i]; x.live && !x.metrics {
			x.own, x.avail, x.press = meanOwn, meanAvail, meanPress
		}
	}
	return missing
}

// headroomPolicy gives each backend the load that leaves every backend the same spare
// capacity (above). It learns speed from the CPU the service itself used, so a neighbour's
// use does not read as slowness, and is damped like the dynamic policy.
type headroomPolicy struct{}

func (headroomPolicy) Name() PolicyName { return PolicyHeadroom }
func (headroomPolicy) Adaptive() bool   { return true }
func (headroomPolicy) Fixed() bool      { return false }

// prepare splits each backend's CPU into the service's and everyone else's, and falls back
// to 1/AL when some backend cannot tell them apart.
func (headroomPolicy) prepare(in []Backend, w []work, t Tuning, out *Result) Policy {
	if missing := cpuSplit(in, w, t.Pressure); missing > 0 {
		// Without the service's own CPU a neighbour's use reads as the service's, and the
		// spare capacity the policy shares out is wrong in both directions (4× the
		// oracle's p99 in the simulator); 1/AL copes with it, so the pool falls back.
		out.Fallback = missing
		return dynamicPolicy{}
	}
	return nil
}

// util: the service's own CPU.
func (headroomPolicy) util(x *work) float64 { return x.own }

// shares water-fills the headroom. The filling is scale-free, so it runs on C before C is
// normalised, as it always has (the figures the tests pin come from that order).
func (headroomPolicy) shares(_ []Backend, w []work, t Tuning, meanC float64) float64 {
	sum := headroom(w, t)
	for i := range w {
		if w[i].live {
			w[i].c /= meanC
		}
	}
	return sum
}

// explain shows the signals used, and, when the policy ran, its terms.
func (headroomPolicy) explain(e *Explanation, x *work, out *Result) {
	e.Used = "cpu"
	if x.svc {
		e.Used, e.Own = "service_cpu", x.own // shown even when the pool fell back
	}
	if out.Fallback == 0 {
		e.Own, e.Avail, e.Pressure = x.own, x.avail, x.press
		e.Headroom = max(x.supply()-x.c*x.own, 0)
	}
}

// worth: a move inside the dead-band also counts when it would change some backend's spare
// CPU by more than spareBand of what it has (see Worth), unless the pool fell back to 1/AL.
func (headroomPolicy) worth(e Explanation, prev uint16, next *Result) bool {
	return next.Fallback == 0 && spareMoves(e, float64(e.Weight)/float64(prev))
}

// headroom sets the live backends' targets and returns their sum. Only the
// ratios of C matter to it.
func headroom(w []work, t Tuning) float64 {
	var sumS, sumD float64
	n := 0
	for i := range w {
		x := &w[i]
		if !x.live {
			continue
		}
		sumS += x.supply()
		sumD += x.c * x.own
		n++
	}
	if sumS <= 0 { // every backend entirely taken by others: nothing to compare, spread by C
		var sumC float64
		for i := range w {
			if w[i].live {
				w[i].target = w[i].c
				sumC += w[i].c
			}
		}
		return sumC
	}
	demand := max(sumD+t.PlanMargin*(sumS-sumD), t.PlanLoad*sumS)
	// Water-filling: the common headroom h over the backends that still get load; one whose
	// available capacity is below h gets none (the floor gives it its minimum later), which
	// raises h for the rest. Each round drops at least one backend, so it ends within n.
	const out = -1.0 // target of a backend dropped from the filling
	for i := range w {
		if w[i].live {
			w[i].target = 0
		}
	}
	for {
		var s float64
		k := 0
		for i := range w {
			if w[i].live && w[i].target != out {
				s += w[i].supply()
				k++
			}
		}
		// Never below 0. Without pressure the demand never exceeds S (own ≤ avail); with a
		// pressure near 1 little is counted as available, and an equal deficit would move
		// the split toward equal weights, growing the slow backends' queues fastest. Shares
		// proportional to S keep every backend equally short.
		h := max((s-demand)/float64(k), 0)
		dropped := false
		for i := range w {
			x := &w[i]
			if x.live && x.target != out && x.supply() <= h {
				x.target, dropped = out, true
			}
		}
		if !dropped || k == 1 {
			var sum float64
			for i := range w {
				x := &w[i]
				if !x.live {
					continue
				}
				if x.target == out {
					// Not zero: damping works in log space. The floor decides its real minimum.
					x.target = minTarget
				} else {
					x.target = (x.supply() - h) / demand
				}
				sum += x.target
			}
			return sum
		}
	}
}

// supply is the capacity S the headroom policy counts as available on a backend: what
// nobody else uses, C·avail, discounted by the CPU pressure, the part of the time in which
// something was already waiting for a CPU there. On a CPU others queue for our requests
// queue too, though the CPU time they would need is unused on average; the lab's hidden-
// capacity run, two cores shared by the backends, the switch and the clients, measured the
// pressure at 0.4–0.5 under load (docs/weights.md).
func (x *work) supply() float64 { return x.c * x.avail * (1 - x.press) }

// maxPressure is the most CPU pressure S is discounted by. Past it the pressure says more
// about our own queue than about anyone else's: a saturated pool drives PSI to 1, where 1 − p
// is the difference of two numbers near 1, S collapses everywhere, and the split followed
// the noise in it (the lab's 110 % overload: 15 → 35 → 10 % of the load on the smallest
// backend within three updates, docs/results/fast-loop.md). At 0.5 the contended regime the
// term exists for (0.4–0.5 in the hidden-capacity lab) is untouched, and one backend's
// pressure can at most halve its share against an unpressed twin.
const maxPressure = 0.5

// minTarget is a dropped backend's target share: small enough that the floor decides its
// weight, large enough that damping's logarithms stay finite.
const minTarget = 1e-4

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
