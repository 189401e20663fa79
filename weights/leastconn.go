package weights

// leastConnPolicy approximates weighted least connections over an update period: a share
// ∝ C/(conns+1), from the smoothed established connections. It follows load but learns
// nothing and is not damped (its reading is a count, not an estimate of speed).
type leastConnPolicy struct{ plain }

func (leastConnPolicy) Name() PolicyName { return PolicyLeastConn }
func (leastConnPolicy) Adaptive() bool   { return false }
func (leastConnPolicy) Fixed() bool      { return false }

func (leastConnPolicy) shares(in []Backend, w []work, _ Tuning, meanC float64) float64 {
	return each(w, meanC, func(i int, x *work) float64 { return x.c / (max(in[i].Conns, 0) + 1) })
}
