package weights

import "math"

// Worth reports whether next differs enough from the weights last applied (prev, in the
// same order) to rewrite the switch: a backend gaining or losing all weight, or a watched
// warm-up ramp moving, always counts;
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
	p := t.Policy.Policy()
	limit := t.DeadBand * float64(next.Total)
	if p.Fixed() {
		limit = 0
	}
	for i, e := range next.Backends {
		if (prev[i] == 0) != (e.Weight == 0) {
			return true
		}
		// A watched ramp that moved is written at once: under the dead-band its first steps
		// (a few units each) would wait, and a hold would then freeze a fraction the switch
		// never had. A holding one waits like any other.
		if e.rampMoved && e.Weight != prev[i] {
			return true
		}
		if math.Abs(float64(e.Weight)-float64(prev[i])) > limit {
			return true
		}
		if prev[i] > 0 && p.worth(e, prev[i], next) {
			return true
		}
	}
	return false
}
