package weights

import "flowweight/internal/fraction"

// DefaultSlowShare is Tuning.SlowShare's default: the fraction of its policy's target share a
// slow backend keeps (one whose health checks time out while it is busy). It is a bounded
// cut, not an eviction: the backend still serves, and its late answers say its queue is
// longer than the others'. Damping and the step limit of the adaptive policies apply on top,
// so the cut arrives over a few updates; hysteresis is the collector's (Slow clears after
// rise_threshold good checks).
const DefaultSlowShare = 0.5

// slowAbsorb is the part of the other backends' spare CPU a slow backend's cut may fill.
const slowAbsorb = 0.5

// slowdown cuts the target of each slow live backend toward share of itself, and gives what
// it takes to the backends that are not slow, by their spare CPU (capacity × (1 − CPU)), not
// by their targets. The move is bounded by slowAbsorb of that spare: a cut that only moves the
// queue onto backends with no room helps nobody. In the lab at 80–110 % load an unbounded cut
// of the biggest backend (half of 57 %) handed the smallest one 1.7 times its capacity, which
// was slow a second later, and the split swung by 20 points each way for as long as the load
// lasted (docs/results/fast-loop.md). With no spare anywhere nothing moves.
//
// It leaves the targets alone when half or more of the live backends are slow, since a pool
// that is late everywhere is overloaded and moving share between its members only moves the
// queue; and with share 1, which never cuts. Slow backends whose cut is 0 are not marked.
// The sum of the targets is unchanged.
func slowdown(in []Backend, w []work, live int, sumS, share float64) {
	if !(share > 0) { // a Tuning not built from DefaultTuning
		share = DefaultSlowShare
	}
	slow := 0
	for i := range w {
		if w[i].live && w[i].slow {
			slow++
		}
	}
	clear := func() {
		for i := range w {
			w[i].slow = false
		}
	}
	if slow == 0 || 2*slow >= live || share >= 1 || !(sumS > 0) {
		clear()
		return
	}
	var want, spare, demand float64
	for i := range w {
		x := &w[i]
		if !x.live || !x.metrics {
			continue
		}
		cpu := fraction.Clamp(in[i].CPU)
		demand += x.c * cpu
		if x.slow {
			want += x.target * (1 - share)
		} else {
			spare += x.c * (1 - cpu)
		}
	}
	// Moving a fraction f of the traffic moves about f of the demand.
	limit := sumS
	if demand > 0 {
		limit = sumS * slowAbsorb * spare / demand
	}
	move := min(want, limit)
	if !(move > 0) || !(spare > 0) {
		clear()
		return
	}
	scale := move / want
	for i := range w {
		x := &w[i]
		if !x.live || !x.metrics {
			continue
		}
		if x.slow {
			x.target -= x.target * (1 - share) * scale
		} else {
			x.target += move * x.c * (1 - fraction.Clamp(in[i].CPU)) / spare
		}
	}
}
