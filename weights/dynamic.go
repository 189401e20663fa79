package weights

// dynamicPolicy is the seeds' formula: a share ∝ 1/AL = C/max(LS, min_load), with C
// corrected by the capacity learned from throughput per unit of load, damped toward the
// previous share. The headroom policy falls back to it when some backend lacks the
// service's own CPU.
type dynamicPolicy struct{ plain }

func (dynamicPolicy) Name() PolicyName { return PolicyDynamic }
func (dynamicPolicy) Adaptive() bool   { return true }
func (dynamicPolicy) Fixed() bool      { return false }

func (dynamicPolicy) shares(_ []Backend, w []work, t Tuning, meanC float64) float64 {
	return each(w, meanC, func(_ int, x *work) float64 { return x.c / max(x.ls, t.MinLoad) })
}
