package weights

// staticPolicy splits by declared capacity alone and ignores load: the operator's split, for
// comparing against the adaptive policies or for falling back to when they look wrong.
type staticPolicy struct{ plain }

func (staticPolicy) Name() PolicyName { return PolicyStatic }
func (staticPolicy) Adaptive() bool   { return false }
func (staticPolicy) Fixed() bool      { return true }

// shares: C, which nothing was learned into.
func (staticPolicy) shares(_ []Backend, w []work, _ Tuning, meanC float64) float64 {
	return each(w, meanC, func(_ int, x *work) float64 { return x.c })
}
