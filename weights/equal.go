package weights

// equalPolicy gives every live backend the same share, whatever its capacity or load.
type equalPolicy struct{ plain }

func (equalPolicy) Name() PolicyName { return PolicyEqual }
func (equalPolicy) Adaptive() bool   { return false }
func (equalPolicy) Fixed() bool      { return true }

func (equalPolicy) shares(_ []Backend, w []work, _ Tuning, meanC float64) float64 {
	return each(w, meanC, func(int, *work) float64 { return 1 })
}
