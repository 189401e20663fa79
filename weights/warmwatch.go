package weights

import (
	"fmt"
	"math"
	"time"
)

// WarmupMode says how a newcomer's warm-up ramp advances (docs/weights.md, "Warm-up that
// watches").
type WarmupMode string

const (
	// WarmupWatch starts a newcomer at a few connections and ramps it only while its signals
	// stay within bounds of the pool's, holds it when its CPU per connection or its CPU is
	// above the pool's and backs it off when it saturates or its health checks are late; it
	// is never ahead of the timer, so a newcomer that is fast from the start finishes with it.
	WarmupWatch WarmupMode = "watch"
	// WarmupTimer ramps on the clock alone, as HAProxy's slowstart and Envoy's slow start do.
	WarmupTimer WarmupMode = "timer"
)

// Validate reports an unknown mode.
func (m WarmupMode) Validate() error {
	switch m {
	case WarmupWatch, WarmupTimer:
		return nil
	}
	return fmt.Errorf("%q: want %q or %q", string(m), WarmupWatch, WarmupTimer)
}

// The watched ramp's bounds. They are not knobs: each is the width of a judgement (is the
// newcomer busier than the pool, is it saturated) that the signals' own noise sets, and the
// lab's warm-up bench is what they were checked against (docs/benchmarks.md).
const (
	// watchMargin is how much more of its CPU (or CPU pressure) a newcomer may use than the
	// pool's mean before its ramp holds: a newcomer as fast as the pool uses less than the
	// pool while it has a fraction of its share, so more means each of its requests costs more.
	watchMargin = 0.1
	// watchCost is how much more CPU per unit of weight (cores used over the weight applied)
	// than the pool's a newcomer may use before its ramp holds, once it uses watchBusy of its
	// CPU: below that its few requests are lost in its idle use, and the ratio says nothing.
	// A cold start that makes each request cost 5× shows as 5 from its first connections.
	watchCost = 1.5
	watchBusy = 0.2
	// watchSaturated is the CPU utilisation from which a newcomer busier than the pool
	// backs off instead of holding: its requests queue.
	watchSaturated = 0.9
	// watchBackOff is the fraction of its ramp a backing-off newcomer keeps per second, and
	// watchRecover how fast (per second) it may climb back, never above the timer's ramp.
	watchBackOff = 0.5
	watchRecover = 1.25
	// watchFloor is where a watched ramp starts and the lowest a back-off reaches: the
	// newcomer gets a few connections, so its signals say whether it is slow before it has
	// a share to be slow with; from there it climbs by watchRecover a second to the timer's
	// line (about 11 s to warmup_start 0.5) and follows it.
	watchFloor = 0.05
	// watchLimit is how many warm-up periods a held ramp may outlast the timer before it
	// ends anyway: a backend that is slower than the pool for that long is a capacity
	// question, which the policy answers, not a warm-up.
	watchLimit = 3
)

// Watch verdicts, shown in Explanation.WarmupWatch.
const (
	watchNone uint8 = iota
	watchRamp
	watchHold
	watchHoldCost
	watchHoldPressure
	watchBackOffSlow
	watchBackOffSaturated
	watchDone
)

var watchNames = [...]string{"", "ramp", "hold: busier than the pool", "hold: more CPU per connection than the pool",
	"hold: more CPU pressure than the pool",
	"back off: health checks late", "back off: saturated while the pool is not", "done: held past the limit"}

// poolRef is what a newcomer is compared with: the mean CPU and CPU pressure of the live
// backends that are not ramping and have metrics, and their CPU per unit of weight (cores
// used over the weight applied, summed over those that report a CPU count and had weight).
type poolRef struct {
	cpu, press   float64
	nCPU, nPress int
	cores, units float64
}

// cost is a backend's cores used per unit of the weight applied, 0 when unknown.
func cost(b *Backend) float64 {
	if !b.HasMetrics || !(b.CPUCount > 0) || b.PrevWeight == 0 {
		return 0
	}
	return b.CPU * b.CPUCount / float64(b.PrevWeight)
}

func watchRef(in []Backend, w []work) poolRef {
	var p poolRef
	for i := range w {
		if !w[i].live || w[i].ramp || !in[i].HasMetrics {
			continue
		}
		p.cpu += in[i].CPU
		p.nCPU++
		if in[i].HasPressure {
			p.press += in[i].CPUPressure
			p.nPress++
		}
		if cost(&in[i]) > 0 {
			p.cores += in[i].CPU * in[i].CPUCount
			p.units += float64(in[i].PrevWeight)
		}
	}
	if p.nCPU > 0 {
		p.cpu /= float64(p.nCPU)
	}
	if p.nPress > 0 {
		p.press /= float64(p.nPress)
	}
	return p
}

// ramping reports whether backend b's warm-up is under way: it is warming, or (watch mode)
// it is up while a held ramp has not reached 1 yet (watched ends it at the limit).
func ramping(b *Backend, t Tuning) bool {
	if t.Warmup <= 0 {
		return false
	}
	if b.Status == StatusWarming {
		return true
	}
	return t.WarmupMode == WarmupWatch && b.Status == StatusUp && b.PrevWarmup > 0 && b.PrevWarmup < 1 &&
		b.PrevWarmupElapsed <= b.WarmupElapsed
}

// timerRamp is the timer's ramp fraction after elapsed.
func timerRamp(t Tuning, elapsed time.Duration) float64 {
	f := t.WarmupStart + (1-t.WarmupStart)*min(float64(elapsed)/float64(t.Warmup), 1)
	return max(f, t.WarmupStart)
}

// watched is the ramp fraction of backend b in watch mode, and its verdict. The previous
// fraction comes from the last periodic Result (PrevWarmup at PrevWarmupElapsed); a ramp
// that is not a continuation of it (none, or it began again since) starts at watchFloor.
func watched(b *Backend, t Tuning, ref poolRef, timer float64) (float64, uint8) {
	prev, e, pe := b.PrevWarmup, b.WarmupElapsed, b.PrevWarmupElapsed
	if !(prev > 0 && prev <= 1) || pe > e || pe < 0 {
		return min(watchFloor, timer), watchRamp
	}
	if b.Status == StatusUp && e >= watchLimit*t.Warmup {
		return 1, watchDone
	}
	prev = max(prev, watchFloor)
	dt := (e - pe).Seconds()
	verdict := watchRamp
	switch {
	case b.Slow:
		verdict = watchBackOffSlow
	case !b.HasMetrics || ref.nCPU == 0:
		// Nothing to compare with: the timer's ramp.
	case b.CPU >= watchSaturated && b.CPU > ref.cpu+watchMargin:
		verdict = watchBackOffSaturated
	case b.CPU >= watchBusy && ref.units > 0 && cost(b) > watchCost*ref.cores/ref.units:
		verdict = watchHoldCost
	case b.CPU > ref.cpu+watchMargin:
		verdict = watchHold
	case b.HasPressure && ref.nPress > 0 && b.CPUPressure > ref.press+watchMargin:
		verdict = watchHoldPressure
	}
	switch verdict {
	case watchRamp:
		step := (1 - t.WarmupStart) * float64(e-pe) / float64(t.Warmup)
		return min(max(prev+step, prev*math.Pow(watchRecover, dt)), timer), verdict
	case watchHold, watchHoldCost, watchHoldPressure:
		return min(prev, timer), verdict
	default:
		return max(prev*math.Pow(watchBackOff, dt), watchFloor), verdict
	}
}
