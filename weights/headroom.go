package weights

import "flowweight/internal/fraction"

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
//	available  S = C · (1 − (b − u))   the part of the backend nobody else uses
//	demand     D = C · u               what our traffic uses of it
//	headroom   H = S − D = C · (1 − b)
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
func cpuSplit(in []Backend, w []work) (missing int) {
	var sumOwn, sumAvail float64
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
		sumOwn += x.own
		sumAvail += x.avail
		k++
	}
	meanOwn, meanAvail := 0.0, 1.0
	if k > 0 {
		meanOwn, meanAvail = sumOwn/float64(k), sumAvail/float64(k)
	}
	for i := range w {
		if x := &w[i]; x.live && !x.metrics {
			x.own, x.avail = meanOwn, meanAvail
		}
	}
	return missing
}

// util is the utilisation learn divides throughput by: the service's own CPU for the
// headroom policy, the composite load for 1/AL.
func (x *work) util(t Tuning) float64 {
	if t.Policy == PolicyHeadroom {
		return x.own
	}
	return x.ls
}

// headroom sets the live backends' targets (summing to 1) and returns their sum. It runs after
// C has been normalised to a pool mean of 1.
func headroom(w []work, t Tuning) float64 {
	var sumS, sumD float64
	n := 0
	for i := range w {
		x := &w[i]
		if !x.live {
			continue
		}
		sumS += x.c * x.avail
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
				s += w[i].c * w[i].avail
				k++
			}
		}
		h := (s - demand) / float64(k)
		dropped := false
		for i := range w {
			x := &w[i]
			if x.live && x.target != out && x.c*x.avail <= h {
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
					x.target = (x.c*x.avail - h) / demand
				}
				sum += x.target
			}
			return sum
		}
	}
}

// minTarget is a dropped backend's target share: small enough that the floor decides its
// weight, large enough that damping's logarithms stay finite.
const minTarget = 1e-4
