package sim

import (
	"math"
	"slices"
)

// Open vSwitch's default select-group method hashes each new connection into a small table
// of slots, each slot naming a bucket, and rebuilds the table on every group change. The
// realised split is therefore the slot split, not the weight split. The model here:
//
//   - table size: the smallest power of two that is at least 16 and at least
//     total weight / smallest positive weight (so the smallest bucket can get a slot),
//     at most 256 (DESIGN.md: "16–256 slots");
//   - slots apportioned by largest remainder, every positive bucket keeping at least one;
//   - a connection's hash is uniform over the slots (the 5-tuple of a new connection is
//     effectively random).
//
// It reproduces both splits measured on Open vSwitch 3.1 in DESIGN.md: equal weights over
// three buckets give 6/5/5 of 16 slots (37.5/31.3/31.3%, measured 38/32/30%), and 25:50:100
// gives 2/5/9 (12.5/31.3/56.3%, measured 11.7/31.2/57.1%, ideal 14.3/28.6/57.1). It is a
// model of the behaviour, not a transcription of Open vSwitch's code.
const (
	minSlots = 16
	maxSlots = 256
)

// ovsSlots returns how many slots of the table each bucket of weight w gets.
func ovsSlots(w []uint16) []int {
	out := make([]int, len(w))
	total, least := 0, 0
	for _, x := range w {
		if x == 0 {
			continue
		}
		total += int(x)
		if least == 0 || int(x) < least {
			least = int(x)
		}
	}
	if total == 0 {
		return out
	}
	n := minSlots
	for n < maxSlots && float64(n) < float64(total)/float64(least) {
		n *= 2
	}
	type rem struct {
		frac float64
		i    int
	}
	var rs []rem
	given := 0
	for i, x := range w {
		if x == 0 {
			continue
		}
		exact := float64(n) * float64(x) / float64(total)
		out[i] = int(math.Floor(exact))
		given += out[i]
		rs = append(rs, rem{exact - float64(out[i]), i})
	}
	slices.SortStableFunc(rs, func(a, b rem) int {
		switch {
		case a.frac > b.frac:
			return -1
		case a.frac < b.frac:
			return 1
		}
		return 0
	})
	for j := 0; given < n; j++ {
		out[rs[j%len(rs)].i]++
		given++
	}
	// Every positive bucket keeps a slot, taken from the largest.
	for i, x := range w {
		if x > 0 && out[i] == 0 {
			big := 0
			for j := range out {
				if out[j] > out[big] {
					big = j
				}
			}
			if out[big] > 1 {
				out[big]--
				out[i]++
			}
		}
	}
	return out
}
