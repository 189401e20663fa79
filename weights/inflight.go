package weights

import (
	"math"
	"slices"
	"time"
)

// MaxInFlightBoost bounds how far the in-flight correction moves one backend's share from
// the slow loop's: its factor is at most this many times more, or this many times less,
// before the shares are normalised, so against any other backend its share moves at most
// MaxInFlightBoost² = 16 times, and no count, however wrong, takes a live backend to 0 or
// gives it everything. Work in flight is
// read tens of milliseconds ago; a reading that is stale (a lost report, a burst that has
// since arrived) must not send the next burst to one backend. 4 lets a backend with an
// empty queue take up to four times its usual share while the others are queued, which is
// most of what least connections gains, and no more.
const MaxInFlightBoost = 4

// InFlight is one backend's work in flight (open connections, or requests) as last read,
// for the fast loop. OK false: not known (no fresh reading); the backend keeps its slow share.
type InFlight struct {
	N  float64
	OK bool
	// At is when the count was received (zero when !OK): reactive dispatch adds what it sent
	// to the backend since (controller/dispatch).
	At time.Time
	// Failing caps the backend's factor at 1: its last health check failed, and the empty
	// queue of a backend that refuses or resets connections is not spare capacity (least
	// connections' black hole: a dead backend answers fastest and would draw the most).
	Failing bool
	// Mean is the backend's own moving average of N (InFlightTracker), when HasMean: the
	// count is then judged against it, g = (Mean+1)/(N+1), instead of against the others'
	// counts alone, g = 1/(N+1).
	Mean    float64
	HasMean bool
}

// InFlightMeanTau is the time constant of InFlightTracker's averages: a few slow-loop
// periods' worth of queue is "usual"; what the fast loop answers is a queue building within
// tens of milliseconds, as a CFS quota's throttle or a burst of arrivals builds one.
const InFlightMeanTau = time.Second

// InFlightTracker keeps each backend's moving average of its in-flight counts, for
// Tuning.InFlightReference "own". The zero value is ready; it restarts when the number of
// backends changes.
type InFlightTracker struct {
	mean []float64
	at   []time.Time
}

// Apply updates the averages with n read at now (a count without OK leaves its average as
// it is) and sets Mean and HasMean on every count that has one. A backend's first count is
// its own average.
func (t *InFlightTracker) Apply(n []InFlight, now time.Time) {
	if len(t.mean) != len(n) {
		t.mean, t.at = make([]float64, len(n)), make([]time.Time, len(n))
	}
	for i := range n {
		if !n[i].OK || math.IsNaN(n[i].N) || math.IsInf(n[i].N, 0) {
			continue
		}
		x := max(n[i].N, 0)
		if dt := now.Sub(t.at[i]); t.at[i].IsZero() || dt < 0 {
			t.mean[i] = x
		} else {
			t.mean[i] += (1 - math.Exp(-dt.Seconds()/InFlightMeanTau.Seconds())) * (x - t.mean[i])
		}
		t.at[i] = now
		n[i].Mean, n[i].HasMean = t.mean[i], true
	}
}

// Reset forgets every average.
func (t *InFlightTracker) Reset() { t.mean, t.at = t.mean[:0], t.at[:0] }

// FollowInFlight is the fast loop: it corrects the weights in force from the slow loop,
// base, by work in flight and writes the result into out (out keeps its buffers across
// calls, like Compute's; out.Weights reads them). The slow loop (Compute, every update
// period) says what share each backend can take; work in flight, read at tens of hertz, says
// where the queues are now. Each live backend's share becomes base·g/ḡ with g = 1/(n+1)
// (g = (m+1)/(n+1) against its own average m, InFlight.HasMean) and ḡ the base-weighted mean
// of g over the backends with a reading, the factor g/ḡ bounded to
// [1/MaxInFlightBoost, MaxInFlightBoost]: weighted least connections spread over the next
// period instead of decided per connection. Equal queues (and an idle pool) give exactly the
// slow weights, so the idle split is the one the slow loop planned for a surge. A backend
// whose last health check failed (InFlight.Failing) gets no larger factor than the least
// favoured other backend: a dead service's queue is empty because it refuses, and least
// connections would otherwise send it the most until it is evicted. Backends at 0
// in base stay at 0, live ones keep at least 1, and the weights sum to base's sum.
//
// The simulator's fast-loop table (weights/sim, fwsim -table fastloop) shows why the period
// matters more than the formula: least connections' weights at 20 ms come within 1.13x of
// per-request least connections' p99 at 80 % load, at 1 s 31x.
func FollowInFlight(base []uint16, n []InFlight, out *Result) {
	k := len(base)
	out.Backends = slices.Grow(out.Backends[:0], k)[:k]
	out.w = slices.Grow(out.w[:0], k)[:k]
	out.Panic, out.Stepped, out.Fallback = false, false, 0
	total, live := 0, 0
	var sumBase, sumG float64
	for i, w := range base {
		total += int(w)
		out.w[i] = work{live: w > 0}
		if w > 0 {
			live++
		}
		if w > 0 && i < len(n) && n[i].OK {
			sumBase += float64(w)
			sumG += float64(w) * inFlightG(n[i])
		}
	}
	out.Total, out.live = total, live
	meanG := 1.0
	if sumBase > 0 {
		meanG = sumG / sumBase
	}
	// A failing backend gets no more than the least favoured of the others: its share can
	// only fall relative to theirs.
	factor := func(i int) float64 {
		if i >= len(n) || !n[i].OK {
			return 1
		}
		f := inFlightG(n[i]) / meanG
		return min(max(f, 1.0/MaxInFlightBoost), MaxInFlightBoost)
	}
	least := math.Inf(1)
	for i, w := range base {
		if w > 0 && (i >= len(n) || !n[i].Failing) {
			least = min(least, factor(i))
		}
	}
	var sum float64
	for i, w := range base {
		x := &out.w[i]
		if !x.live {
			continue
		}
		f := factor(i)
		if i < len(n) && n[i].Failing {
			f = min(f, least, 1)
		}
		x.final = float64(w) * f
		sum += x.final
	}
	for i, w := range base {
		if x := &out.w[i]; x.live {
			if sum > 0 && !math.IsNaN(sum) && !math.IsInf(sum, 0) {
				x.final *= float64(total) / sum
			} else {
				x.final = float64(w)
			}
		}
	}
	round(out.w, out)
	for i := range out.Backends {
		out.Backends[i] = Explanation{Weight: out.w[i].weight, Final: float64(out.w[i].weight) / float64(max(total, 1))}
	}
}

// inFlightG is a count's g: 1/(N+1), or (Mean+1)/(N+1) against the backend's own average.
// A count below 0 or not a number counts as empty, an infinite one as the fullest, and an
// average that is not a finite count as none: nothing reaches the shares unbounded.
func inFlightG(x InFlight) float64 {
	n := x.N
	if math.IsInf(n, 1) {
		return 0 // the least favoured; its factor is bounded
	}
	if !(n >= 0) {
		n = 0
	}
	if m := x.Mean; x.HasMean && m >= 0 && !math.IsInf(m, 0) {
		return (m + 1) / (n + 1)
	}
	return 1 / (n + 1)
}

// MovedBeyond reports whether next differs from prev (the weights last written, same order
// and total) by more than band of the total for some backend, or a backend gained or lost all
// weight: the fast loop's dead-band (Tuning.InFlightDeadBand). Lengths that differ count as
// moved.
func MovedBeyond(prev, next []uint16, band float64) bool {
	if len(prev) != len(next) {
		return true
	}
	total := 0
	for _, w := range next {
		total += int(w)
	}
	limit := band * float64(total)
	for i, w := range next {
		if (prev[i] == 0) != (w == 0) || math.Abs(float64(w)-float64(prev[i])) > limit {
			return true
		}
	}
	return false
}
