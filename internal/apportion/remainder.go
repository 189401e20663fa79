package apportion

import "slices"

// Remainder is one part's fractional remainder: what its exact quota exceeds the integer it
// was rounded down to by, in [0,1). Index names the part to the caller.
type Remainder struct {
	Frac  float64
	Index int32
}

// buckets is how finely Ranker sorts remainders by their leading bits before it sorts the
// boundary bucket.
const buckets = 1024

// Ranker picks the largest remainders. Keep one across calls: it keeps its buffers, so the
// weights' steady-state updates do not allocate.
type Ranker struct {
	count [buckets]int32
	edge  []Remainder
	top   []int32
}

// Largest returns the indices of the k parts with the largest remainders, ties to the lower
// Index (the returned slice is the Ranker's, valid until its next call, in no set order).
// Giving each of them one more unit is the largest remainder method: with k the units the
// rounding down left over, the integers then sum to the whole exactly, and every part is
// within one unit of its exact quota.
//
// A full sort of 10,000 remainders was most of the weights' Compute time; bucketing by the
// leading bits of the fraction needs one pass, and only the boundary bucket is sorted.
func (r *Ranker) Largest(rem []Remainder, k int) []int32 {
	r.top = r.top[:0]
	if k <= 0 {
		return r.top
	}
	clear(r.count[:])
	for _, x := range rem {
		r.count[bucketOf(x.Frac)]++
	}
	b := buckets - 1
	for ; b >= 0; b-- {
		if int(r.count[b]) >= k {
			break
		}
		k -= int(r.count[b])
	}
	// Every remainder above bucket b is taken; bucket b is sorted and gives k more.
	r.edge = r.edge[:0]
	for _, x := range rem {
		switch c := bucketOf(x.Frac); {
		case c > b:
			r.top = append(r.top, x.Index)
		case c == b:
			r.edge = append(r.edge, x)
		}
	}
	slices.SortFunc(r.edge, byRemainder)
	for j := 0; j < k && j < len(r.edge); j++ {
		r.top = append(r.top, r.edge[j].Index)
	}
	return r.top
}

func bucketOf(frac float64) int { return min(max(int(frac*buckets), 0), buckets-1) }

func byRemainder(a, b Remainder) int {
	switch {
	case a.Frac > b.Frac:
		return -1
	case a.Frac < b.Frac:
		return 1
	}
	return int(a.Index - b.Index)
}
