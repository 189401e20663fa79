package weights

import "flowweight/internal/apportion"

// round turns exact units into integers by the largest remainder method (internal/apportion,
// the one the slot model rounds by too), so live weights sum exactly to the total; every live
// backend keeps at least 1 (Open vSwitch never selects a bucket of weight 0), taken from the
// largest weight when needed.
func round(w []work, out *Result) {
	out.rem = out.rem[:0]
	assigned, zeros := 0, false
	for i := range w {
		x := &w[i]
		if !x.live {
			continue
		}
		u := int(x.final)
		x.weight = uint16(u)
		assigned += u
		out.rem = append(out.rem, apportion.Remainder{Frac: x.final - float64(u), Index: int32(i)})
	}
	for _, i := range out.rank.Largest(out.rem, out.Total-assigned) {
		w[i].weight++
	}
	for i := range w {
		if w[i].live && w[i].weight == 0 {
			zeros = true
		}
	}
	if !zeros {
		return
	}
	maxIdx := -1
	for i := range w {
		if w[i].live && (maxIdx < 0 || w[i].weight > w[maxIdx].weight) {
			maxIdx = i
		}
	}
	for i := range w {
		if w[i].live && w[i].weight == 0 && w[maxIdx].weight > 1 {
			w[i].weight++
			w[maxIdx].weight--
		}
	}
}
