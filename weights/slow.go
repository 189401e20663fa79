package weights

// DefaultSlowShare is Tuning.SlowShare's default: the fraction of its policy's target share a
// slow backend keeps (one whose health checks time out while it is busy). It is a bounded
// cut, not an eviction: the backend still serves, and its late answers say its queue is
// longer than the others'. Damping and the step limit of the adaptive policies apply on top,
// so the cut arrives over a few updates; hysteresis is the collector's (Slow clears after
// rise_threshold good checks).
const DefaultSlowShare = 0.5

// slowdown cuts the target of each slow live backend to share of itself and returns the
// new sum of targets (share 1: no cut, and no backend is marked slow); it leaves the targets alone when half or more of the live backends
// are slow, since a pool that is late everywhere is overloaded and moving share between its
// members only moves the queue.
func slowdown(w []work, live int, sumS, share float64) float64 {
	if !(share > 0) { // a Tuning not built from DefaultTuning
		share = DefaultSlowShare
	}
	slow := 0
	for i := range w {
		if w[i].live && w[i].slow {
			slow++
		}
	}
	if slow == 0 || 2*slow >= live || share >= 1 {
		for i := range w {
			w[i].slow = false
		}
		return sumS
	}
	for i := range w {
		if x := &w[i]; x.live && x.slow {
			sumS -= x.target * (1 - share)
			x.target *= share
		}
	}
	return sumS
}
