package weights

import "math"

// The shaping steps Compute applies to every policy's targets, in this order: damping, the
// step limit, the floor (units), warm-up; round then makes integers of them.

// damp normalises the targets (their sum is sumS) and, when on (the adaptive policies with
// Gain < 1), moves each share from the previous one toward its target by Gain, in log space.
// It returns the sum of the damped shares.
func damp(w []work, t Tuning, on bool, sumS float64) float64 {
	sumD := 0.0
	for i := range w {
		if !w[i].live {
			continue
		}
		x := &w[i]
		x.target /= sumS
		x.damped = x.target
		if on && x.prev > 0 {
			if t.Gain == 0.5 { // the default: a geometric mean, one instruction instead of exp+2 log
				x.damped = math.Sqrt(x.prev * x.target)
			} else {
				x.damped = math.Exp((1-t.Gain)*math.Log(x.prev) + t.Gain*math.Log(x.target))
			}
		}
		sumD += x.damped
	}
	return sumD
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

// warmup gives a ramping backend its ramp fraction of its computed weight (in units, after
// the floor) and hands what it gives up to the backends that are not ramping, so a newcomer's
// first weight is exactly that fraction of what it would otherwise get, up to rounding. When
// every live backend is ramping there is no one to hand it to, and the shares stay as they
// were. The fraction follows the timer, or in watch mode the newcomer's signals too
// (warmwatch.go).
func warmup(in []Backend, t Tuning, w []work, clamp []Clamp, ramps []ramp, anyRamp bool) {
	if t.Warmup <= 0 || !anyRamp {
		return
	}
	var ref poolRef
	if t.WarmupMode == WarmupWatch {
		ref = watchRef(in, w, clamp)
	}
	var freed, rest float64
	for i := range w {
		x := &w[i]
		if !x.live {
			continue
		}
		if x.ramp {
			rp := &ramps[i]
			rp.timer, rp.watch = 1, watchNone
			if in[i].Status == StatusWarming {
				rp.timer = timerRamp(t, in[i].WarmupElapsed)
			}
			x.warm = rp.timer
			if t.WarmupMode == WarmupWatch {
				x.warm, rp.watch = watched(&in[i], x, &clamp[i], t, ref, rp.timer)
			}
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
