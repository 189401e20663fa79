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
	// stay within bounds of the pool's, holds it when its CPU per unit of weight or its CPU is
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
	// watchRecover how fast (per second) it may climb at least, never above the timer's ramp
	// (climb makes it faster for a short warmup).
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
	watchPastLimit
)

var watchNames = [...]string{"", "ramp", "hold: busier than the pool", "hold: more CPU per unit of weight than the pool",
	"hold: more CPU pressure than the pool", "back off: health checks late", "back off: saturated while the pool is not",
	"ramp: past the limit, signals no longer heeded"}

// ramp is a ramping backend's timer fraction and watch verdict, for its explanation.
type ramp struct {
	timer float64
	watch uint8
}

// watchMaxGap bounds the time one update may ramp or back off for: a ramp carried across a
// gap (the backend stale or drained for a while, the controller busy) resumes where it was
// instead of jumping by the time away, whose signals nobody judged.
const watchMaxGap = 2 * time.Second

// poolRef is what a newcomer is compared with: the mean CPU and CPU pressure of the live
// backends that are not ramping and have metrics, and their CPU per unit of weight.
type poolRef struct {
	cpu, press   float64
	nCPU, nPress int
	cost, units  float64
}

// cost is backend i's CPU per unit of the weight it was served with, in core-seconds of a
// pool-mean core: the CPU it used (its own service's when reported, so a neighbour does not
// count; CPU times its CPU count, bounded as the capacity claim is) over the weight, times
// its speed factor (declared and learned), so a backend declared or learned slower, which the
// policy gives less weight for the same CPU, is not taken for a costlier one. 0 when unknown.
func cost(b *Backend, x *work, cl *Clamp) (used, units float64) {
	served := b.ServedWeight
	if served == 0 {
		served = b.PrevWeight
	}
	cores := b.CPUCount
	if cl.CPU() {
		cores = cl.CPUUsed
	}
	if !b.HasMetrics || !(cores > 0) || served == 0 {
		return 0, 0
	}
	cpu := b.CPU
	if b.HasServiceCPU {
		cpu = b.ServiceCPU
	}
	return cpu * cores * orOne(b.Factor) * x.learned, float64(served)
}

func watchRef(in []Backend, w []work, clamp []Clamp) poolRef {
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
		used, units := cost(&in[i], &w[i], &clamp[i])
		p.cost += used
		p.units += units
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
// it is up while a held ramp has not reached 1 yet.
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

// climb is how much a ramp that keeps up may grow per second: watchRecover, or faster when
// the warm-up is short, so that from watchFloor it reaches 1 within half the warm-up and a
// newcomer that is fast from the start still meets the timer's line and finishes with it
// (×1.25 takes 13.4 s from 0.05 to 1: longer than a 10 s warm-up).
func climb(t Tuning) float64 {
	return max(watchRecover, math.Pow(1/watchFloor, 2/t.Warmup.Seconds()))
}

// timerRamp is the timer's ramp fraction after elapsed.
func timerRamp(t Tuning, elapsed time.Duration) float64 {
	f := t.WarmupStart + (1-t.WarmupStart)*min(float64(elapsed)/float64(t.Warmup), 1)
	return max(f, t.WarmupStart)
}

// watched is the ramp fraction of backend i in watch mode, and its verdict. The previous
// fraction comes from the last periodic Result (PrevWarmup at PrevWarmupElapsed); a ramp
// that is not a continuation of it (none, or it began again since) starts at watchFloor.
// Whatever is carried, the result is within [min(watchFloor, timer), timer].
func watched(b *Backend, x *work, cl *Clamp, t Tuning, ref poolRef, timer float64) (float64, uint8) {
	floor := min(watchFloor, timer)
	prev, e, pe := b.PrevWarmup, b.WarmupElapsed, b.PrevWarmupElapsed
	if !(prev > 0 && prev <= 1) || pe > e || pe < 0 {
		return floor, watchRamp
	}
	prev = min(max(prev, floor), timer)
	gap := min(e-pe, watchMaxGap)
	dt := gap.Seconds()
	verdict := watchRamp
	used, units := cost(b, x, cl)
	switch {
	case b.Status == StatusUp && e >= watchLimit*t.Warmup:
		verdict = watchPastLimit
	case x.slow: // after slowdown: a pool that is slow as a whole is its load, not the newcomer
		verdict = watchBackOffSlow
	case !b.HasMetrics || ref.nCPU == 0:
		// Nothing to compare with: the timer's ramp.
	case b.CPU >= watchSaturated && b.CPU > ref.cpu+watchMargin:
		verdict = watchBackOffSaturated
	case b.CPU >= watchBusy && units > 0 && ref.units > 0 && used/units > watchCost*ref.cost/ref.units:
		verdict = watchHoldCost
	case b.CPU > ref.cpu+watchMargin:
		verdict = watchHold
	case b.HasPressure && ref.nPress > 0 && b.CPUPressure > ref.press+watchMargin:
		verdict = watchHoldPressure
	}
	switch verdict {
	case watchRamp, watchPastLimit:
		step := (1 - t.WarmupStart) * float64(gap) / float64(t.Warmup)
		return min(max(prev+step, prev*math.Pow(climb(t), dt)), timer), verdict
	case watchHold, watchHoldCost, watchHoldPressure:
		return prev, verdict
	default:
		return min(max(prev*math.Pow(watchBackOff, dt), floor), timer), verdict
	}
}
