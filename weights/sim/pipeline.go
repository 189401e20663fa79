package sim

import (
	"time"

	"flowweight/weights"
)

// pipeline is the controller's weighting loop as controller/balancer runs it, with the probe
// and collector reduced to what they measure: per sample interval, each backend's busy
// fraction and its connection count, smoothed by weights.EWMA with the tuning's alpha; per
// update period, weights.Compute with the state carried over from the previous Result and a
// rewrite only when weights.Worth agrees.
type pipeline struct {
	cfg     *Config
	bs      []*station
	cpu     []weights.EWMA
	own     []weights.EWMA // the service's own CPU (Config.ServiceCPU)
	thr     []weights.EWMA // throughput per update period, smoothed like the CPU it is divided by
	conns   []weights.EWMA
	learned []float64 // Explanation.Learned of the previous Result (controller: book.learned)
	prev    []float64 // Explanation.Full of the previous Result (controller: book.prevShare)
	in      []weights.Backend
	res     weights.Result
	applied []uint16 // weights in force; nil before the first write (controller: service.applied)
	// A ramp's carry (Config.Health): Explanation.Warmup and the WarmupElapsed it was
	// computed at, while the backend ramps (controller: book.warm, book.warmAt).
	warm    []float64
	warmAt  []time.Duration
	lastBin int // first sample interval of the current update period

	rewrites, rewritesWindow, updatesWindow int
	trace                                   []Point
	shareTime                               []float64 // Σ share × seconds in force, over the window

}

func newPipeline(cfg *Config, bs []*station) *pipeline {
	n := len(bs)
	p := &pipeline{cfg: cfg, bs: bs, cpu: make([]weights.EWMA, n), own: make([]weights.EWMA, n), thr: make([]weights.EWMA, n), conns: make([]weights.EWMA, n),
		learned: make([]float64, n), prev: make([]float64, n), in: make([]weights.Backend, n),
		warm: make([]float64, n), warmAt: make([]time.Duration, n)}
	for i := range bs {
		p.cpu[i] = weights.NewEWMA(cfg.Tuning.Alpha)
		p.own[i] = weights.NewEWMA(cfg.Tuning.Alpha)
		p.thr[i] = weights.NewEWMA(cfg.Tuning.Alpha)
		p.conns[i] = weights.NewEWMA(cfg.Tuning.Alpha)
	}
	return p
}

// sample is the probes' report for sample interval k, which ends at time at.
func (p *pipeline) sample(k int, at float64) {
	for i, b := range p.bs {
		busy, own := b.cpu(k)
		p.cpu[i].Add(busy)
		p.own[i].Add(own)
		p.conns[i].Add(float64(b.inSystem(at)))
	}
}

// update runs one controller period ending at time at and reports whether the weights in
// force changed. inWindow says whether it counts toward the measured window.
func (p *pipeline) update(at float64, s *sim, inWindow bool) bool {
	bin := s.nSamples // sample intervals [p.lastBin, bin) make up this period
	period := at - float64(p.lastBin)*s.sample
	for i, b := range p.cfg.Backends {
		cpu, ok := p.cpu[i].Value()
		conns, _ := p.conns[i].Value()
		in := weights.Backend{Name: b.Name, Status: weights.StatusUp, HasMetrics: ok,
			CPU: cpu, Mem: p.cfg.MemUtil, Conns: conns, CPUCount: b.Declared, MemBytes: 1 << 30,
			Learned: p.learned[i], PrevShare: p.prev[i]}
		if period > 0 {
			// The controller measures bytes per backend from switch counters, which are
			// proportional to the work served.
			in.Throughput = p.bs[i].workIn(p.lastBin, bin) / period
			in.Throughput = p.thr[i].Add(in.Throughput)
		}
		if p.applied != nil {
			in.PrevWeight = p.applied[i]
		}
		if p.cfg.ServiceCPU {
			in.ServiceCPU, in.HasServiceCPU = p.own[i].Value()
		}
		if s.health != nil {
			s.healthInput(i, at, &in)
			in.PrevWarmup, in.PrevWarmupElapsed = p.warm[i], p.warmAt[i]
		}
		p.in[i] = in
	}
	p.lastBin = bin
	if inWindow && p.applied != nil {
		// The weights in force during the period that just ended, for Result.MeanShares.
		if p.shareTime == nil {
			p.shareTime = make([]float64, len(p.applied))
		}
		for i, x := range shares(p.applied) {
			p.shareTime[i] += x * period
		}
	}
	weights.Compute(p.in, p.cfg.Tuning, &p.res)
	for i, e := range p.res.Backends {
		p.learned[i], p.prev[i] = e.Learned, e.Full
		switch {
		case e.WarmupTimer > 0: // ramping: the next period continues from here
			p.warm[i], p.warmAt[i] = e.Warmup, p.in[i].WarmupElapsed
		case p.in[i].Status.Live():
			p.warm[i], p.warmAt[i] = 0, 0
		}
	}
	if inWindow {
		p.updatesWindow++
	}
	changed := false
	if p.applied == nil || weights.Worth(p.applied, &p.res, p.cfg.Tuning) {
		p.applied = p.res.Weights(p.applied[:0])
		p.rewrites++
		if inWindow {
			p.rewritesWindow++
		}
		changed = true
	}
	if p.cfg.Trace {
		p.trace = append(p.trace, Point{T: at, Shares: shares(p.applied)})
	}
	return changed
}
