package weights

import (
	"math"
	"slices"
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
}

// FollowInFlight is the fast loop: it corrects the slow loop's result base by work in flight
// and writes the weights into out (base is not changed; out keeps its buffers across calls,
// like Compute's). The slow loop (Compute, every update period) says what share each
// backend can take; work in flight, read at tens of hertz, says where the queues are now.
// Each live backend's share becomes base·g/ḡ with g = 1/(n+1) and ḡ the base-weighted mean
// of g over the backends with a reading, bounded to [1/MaxInFlightBoost, MaxInFlightBoost]
// times its base share: weighted least connections spread over the next period instead of
// decided per connection. Equal queues (and an idle pool) give exactly the slow shares, so
// the idle split is the one the slow loop planned for a surge. Backends with weight 0 in base
// stay at 0, and live ones keep at least 1; the weights sum to base.Total.
//
// The simulator's fast-loop table (weights/sim, fwsim -table fastloop) shows why the period
// matters more than the formula: least connections' weights at 20 ms come within 1.13x of
// per-request least connections' p99 at 80 % load, at 1 s 31x.
func FollowInFlight(base *Result, n []InFlight, out *Result) {
	k := len(base.Backends)
	out.Backends = append(out.Backends[:0], base.Backends...)
	out.Total, out.Panic, out.Stepped, out.Fallback, out.live = base.Total, base.Panic, false, base.Fallback, base.live
	out.w = slices.Grow(out.w[:0], k)[:k]
	var sumBase, sumG float64
	for i, e := range base.Backends {
		out.w[i] = work{live: e.Weight > 0}
		if e.Weight > 0 && i < len(n) && n[i].OK {
			share := float64(e.Weight)
			sumBase += share
			sumG += share / (max(n[i].N, 0) + 1)
		}
	}
	meanG := 1.0
	if sumBase > 0 {
		meanG = sumG / sumBase
	}
	var sum float64
	for i, e := range base.Backends {
		x := &out.w[i]
		if !x.live {
			continue
		}
		f := 1.0
		if i < len(n) && n[i].OK {
			f = (1 / (max(n[i].N, 0) + 1)) / meanG
			f = min(max(f, 1.0/MaxInFlightBoost), MaxInFlightBoost)
		}
		x.final = float64(e.Weight) * f
		sum += x.final
	}
	if sum <= 0 || math.IsNaN(sum) {
		for i := range out.w {
			out.w[i].final = float64(base.Backends[i].Weight)
		}
		sum = float64(base.Total)
	}
	for i := range out.w {
		if out.w[i].live {
			out.w[i].final *= float64(out.Total) / sum
		}
	}
	round(out.w, out)
	for i := range out.Backends {
		out.Backends[i].Weight = out.w[i].weight
		out.Backends[i].Final = float64(out.w[i].weight) / float64(max(out.Total, 1))
	}
}
