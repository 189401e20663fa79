package weights

import (
	"math"
	"math/bits"
	"slices"
)

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
