package weights

// panicWeights spreads the total evenly when no backend is live: a select group with no
// usable bucket drops every new connection, which is worse than sending some to a backend
// that may be overloaded or whose reports merely stopped.
func panicWeights(in []Backend, t Tuning, out *Result) {
	exp := out.Backends
	out.Panic = true
	pick := func(keep func(b *Backend) bool) int {
		c := 0
		for i := range in {
			if keep(&in[i]) {
				c++
			}
		}
		return c
	}
	chosen := func(b *Backend) bool { return false }
	note := ""
	if t.Panic == PanicLastGood {
		chosen = func(b *Backend) bool { return b.PrevWeight > 0 && b.Status != StatusDrained }
		note = "panic: no live backend, serving evenly over the last-known-good set"
	}
	if pick(chosen) == 0 {
		chosen = func(b *Backend) bool { return b.Status != StatusDrained }
		note = "panic: no live backend, serving evenly over every backend not drained"
	}
	if pick(chosen) == 0 {
		chosen = func(*Backend) bool { return true }
		note = "panic: every backend is drained, serving evenly over all of them"
	}
	k := pick(chosen)
	each, extra := out.Total/k, out.Total%k
	for i := range in {
		if !chosen(&in[i]) {
			continue
		}
		w := each
		if extra > 0 {
			w++
			extra--
		}
		exp[i].Weight = uint16(w)
		exp[i].Final = float64(w) / float64(out.Total)
		exp[i].Note = note
	}
}
