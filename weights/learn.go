package weights

import "math"

// learn moves each measured backend's capacity factor toward throughput per unit of load
// (p's utilisation: the composite load for 1/AL, the service's own CPU for headroom),
// relative to the pool, divided by its declared capacity. The declared capacity is the prior;
// the factor corrects it slowly (Rate) and within bounds (MaxFactor), so one noisy period
// cannot swing the pool.
func learn(in []Backend, t Tuning, w []work, p Policy) {
	measured := func(i int) bool {
		return w[i].live && w[i].metrics && in[i].Throughput > 0 && p.util(&w[i]) >= t.Learn.MinLoad
	}
	var sumSpeed, sumPrior float64
	k := 0
	for i := range in {
		if measured(i) {
			sumSpeed += in[i].Throughput / p.util(&w[i])
			sumPrior += w[i].c
			k++
		}
	}
	if k < 2 { // one backend alone has nothing to be compared with
		return
	}
	meanSpeed, meanPrior := sumSpeed/float64(k), sumPrior/float64(k)
	lo, hi := math.Log(1/t.Learn.MaxFactor), math.Log(t.Learn.MaxFactor)
	for i := range in {
		if !measured(i) {
			continue
		}
		est := (in[i].Throughput / p.util(&w[i])) / meanSpeed
		prior := w[i].c / meanPrior
		lf := math.Log(w[i].learned)
		lf += t.Learn.Rate * (math.Log(est/prior) - lf)
		w[i].learned = math.Exp(min(max(lf, lo), hi))
	}
}
