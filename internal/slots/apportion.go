package slots

import "flowweight/internal/apportion"

// Apportion divides n slots among weights in proportion, by largest remainder (ties to the
// earlier weight). A positive weight gets at least one slot while there are at least as many
// slots as positive weights: the slot is taken from the backend that is most over its exact
// quota and has two or more. With more positive weights than slots, some get none: the split
// is then the closest one the table can hold (no minimum).
func Apportion(weights []uint16, n int) []int { return split(weights, n, true) }

// Nearest is Apportion without the one-slot minimum: the largest remainder split alone. A
// positive weight that gets a slot from Apportion but none from Nearest was lifted.
func Nearest(weights []uint16, n int) []int { return split(weights, n, false) }

func split(weights []uint16, n int, lift bool) []int {
	out := make([]int, len(weights))
	total, live := 0, 0
	for _, w := range weights {
		total += int(w)
		if w > 0 {
			live++
		}
	}
	if total == 0 || n <= 0 {
		return out
	}
	// Integer arithmetic: quota of i is n·w/total = out[i] + rem/total, so the fractions
	// compare as the integer remainders do (total is far below 2^53).
	rem := make([]apportion.Remainder, len(weights))
	given := 0
	for i, w := range weights {
		out[i] = n * int(w) / total
		rem[i] = apportion.Remainder{Frac: float64(n*int(w)%total) / float64(total), Index: int32(i)}
		given += out[i]
	}
	var r apportion.Ranker
	for _, i := range r.Largest(rem, n-given) {
		out[i]++ // at most one each: the remainders sum to less than one slot per weight
	}
	if live > n || !lift {
		return out
	}
	for i, w := range weights {
		if w == 0 || out[i] > 0 {
			continue
		}
		// excess of j over its quota, in units of 1/total: out[j]·total − n·w[j].
		donor := -1
		for j := range weights {
			if out[j] < 2 {
				continue
			}
			if donor < 0 || out[j]*total-n*int(weights[j]) > out[donor]*total-n*int(weights[donor]) {
				donor = j
			}
		}
		out[donor]-- // exists: live ≤ n and some live weight has no slot, so another has two
		out[i]++
	}
	return out
}
