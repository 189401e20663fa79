package sim

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"flowweight/weights"
)

// Scenario names a pool of three backends with true speeds 1:2:4 (docs/design.md's calibration).
type Scenario string

const (
	// ScenarioRight declares capacities 1:2:4, equal to the true speeds.
	ScenarioRight Scenario = "A"
	// ScenarioEqual declares every backend the same (2 CPUs) while true speeds are 1:2:4.
	ScenarioEqual Scenario = "B"
	// ScenarioNeighbours is the real lab's noisy neighbours: three equal backends (2 CPUs,
	// speed 2), and another process keeps half of the first two busy, so the service gets
	// speeds 1:1:2 while every declaration says 2:2:2.
	ScenarioNeighbours Scenario = "C"
)

// Scenarios lists the scenarios the quality table covers.
var Scenarios = []Scenario{ScenarioRight, ScenarioEqual, ScenarioNeighbours}

// Describe says what the scenario is, for table headings.
func (s Scenario) Describe() string {
	switch s {
	case ScenarioEqual:
		return "declared equal (2:2:2), true speeds 1:2:4"
	case ScenarioNeighbours:
		return "equal backends (2:2:2), neighbours take half of two: the service gets 1:1:2"
	}
	return "declared 1:2:4 = true speeds 1:2:4"
}

// Pool returns the scenario's backends.
func Pool(s Scenario) []Backend {
	if s == ScenarioNeighbours {
		return []Backend{{Name: "nb1", Speed: 2, Declared: 2, Neighbour: 0.5}, {Name: "nb2", Speed: 2, Declared: 2, Neighbour: 0.5},
			{Name: "quiet", Speed: 2, Declared: 2}}
	}
	bs := []Backend{{Name: "slow", Speed: 1, Declared: 1}, {Name: "mid", Speed: 2, Declared: 2}, {Name: "fast", Speed: 4, Declared: 4}}
	if s == ScenarioEqual {
		for i := range bs {
			bs[i].Declared = 2
		}
	}
	return bs
}

// BestFixed searches for the fixed split of a three-backend pool with the lowest p99 (the
// mean over seeds), as an operator tuning static weights by trial would: a grid in steps of
// 0.05 within ±0.2 of the split proportional to the speeds the service gets, with a quarter of
// the jobs, then steps of 0.01 within ±0.04 of the best with all of them. It is
// chosen on the same seeds it is then compared on, so it is, if anything, better than any
// split an operator could find: a hard reference.
func BestFixed(base Config, seeds []uint64) ([]float64, []Result, error) {
	if len(base.Backends) != 3 {
		return nil, nil, fmt.Errorf("best fixed split: %d backends, the search is written for 3", len(base.Backends))
	}
	eval := func(vs [][]float64, jobs int) ([]Result, int, error) {
		var cfgs []Config
		for _, v := range vs {
			for _, seed := range seeds {
				c := base
				c.Policy, c.Fixed, c.Seed, c.Jobs = Fixed, v, seed, jobs
				cfgs = append(cfgs, c)
			}
		}
		rs, err := RunAll(cfgs)
		if err != nil {
			return nil, 0, err
		}
		best, bestP := -1, math.Inf(1)
		for i := range vs {
			var p float64
			for _, r := range rs[i*len(seeds) : (i+1)*len(seeds)] {
				p += r.P99
			}
			if p < bestP {
				best, bestP = i, p
			}
		}
		return rs[best*len(seeds) : (best+1)*len(seeds)], best, nil
	}
	grid := func(center []float64, step float64, reach int) [][]float64 {
		var vs [][]float64
		for i := -reach; i <= reach; i++ {
			for j := -reach; j <= reach; j++ {
				a, b := center[0]+float64(i)*step, center[1]+float64(j)*step
				if c := 1 - a - b; a >= step/2 && b >= step/2 && c >= step/2 {
					vs = append(vs, []float64{a, b, c})
				}
			}
		}
		return vs
	}
	var sum float64
	for _, b := range base.Backends {
		sum += b.effective()
	}
	coarse := grid([]float64{base.Backends[0].effective() / sum, base.Backends[1].effective() / sum}, 0.05, 4)
	_, i, err := eval(coarse, min(base.Jobs, max(base.Jobs/4, 250_000))) // the warm-up needs ~100,000 at ρ = 0.5
	if err != nil {
		return nil, nil, err
	}
	fine := grid(coarse[i], 0.01, 4)
	rs, j, err := eval(fine, base.Jobs)
	if err != nil {
		return nil, nil, err
	}
	return fine[j], rs, nil
}

// RunAll runs every config on up to GOMAXPROCS goroutines; results are in input order, so the
// output does not depend on scheduling. A run that measured no job (it ended within its
// warm-up) is an error: its table cells would be empty.
func RunAll(cfgs []Config) ([]Result, error) {
	out := make([]Result, len(cfgs))
	errs := make([]error, len(cfgs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = Run(cfgs[i])
			}
		})
	}
	for i := range cfgs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err == nil && out[i].Measured == 0 {
			c := cfgs[i]
			c.defaults()
			err = fmt.Errorf("no job arrived after the warm-up of %v: %d jobs are too few", c.Warmup, c.Jobs)
		}
		if err != nil {
			return nil, fmt.Errorf("run %d (%s, load %.2f, seed %d): %w", i, cfgs[i].Policy, cfgs[i].Load, cfgs[i].Seed, err)
		}
	}
	return out, nil
}

// Settling is how the dynamic weights answered a speed step.
type Settling struct {
	// Settled is false when the shares still moved by more than the tolerance in the last
	// quarter of the time after the step.
	Settled bool
	// After is the time from the step until every share stayed within the tolerance of its
	// final value for the rest of the run.
	After time.Duration
	// RewritesToSettle counts rewrites from the step until settling (or the end);
	// RewritesAfter counts every rewrite from the step to the end.
	RewritesToSettle, RewritesAfter int
	// Final is each backend's final share: the mean over the last quarter of the time after
	// the step, so that a share that jitters is judged against its level, not its last value.
	Final []float64
	// MaxDev is the largest deviation from Final over the last quarter, in the same terms
	// as the tolerance.
	MaxDev float64
}

// Settle analyses a trace recorded with Config.Trace around a step at time at. A share has
// settled when it stays within tol of its final value: relative to that value when relative
// is true (0.05 = 5% of the share), else in share points (0.05 = 5% of all traffic).
func Settle(trace []Point, at time.Duration, tol float64, relative bool) Settling {
	var s Settling
	t0 := at.Seconds()
	first := -1
	for i, p := range trace {
		if p.T >= t0 {
			first = i
			break
		}
	}
	if first < 0 {
		return s
	}
	end := trace[len(trace)-1].T
	q := end - (end-t0)/4
	n := len(trace[first].Shares)
	s.Final = make([]float64, n)
	cnt := 0
	for _, p := range trace[first:] {
		if p.T >= q {
			for j, x := range p.Shares {
				s.Final[j] += x
			}
			cnt++
		}
	}
	for j := range s.Final {
		s.Final[j] /= float64(max(cnt, 1))
	}
	within := func(p Point) bool {
		ok := true
		for j, x := range p.Shares {
			d := math.Abs(x - s.Final[j])
			if relative {
				d /= s.Final[j]
			}
			if p.T >= q {
				s.MaxDev = max(s.MaxDev, d)
			}
			if d > tol {
				ok = false
			}
		}
		return ok
	}
	// The last update that was out of tolerance; settling is the update after it.
	lastOut := first - 1
	for i := first; i < len(trace); i++ {
		if !within(trace[i]) {
			lastOut = i
		}
	}
	prev := trace[max(first-1, 0)].Shares
	settleIdx := lastOut + 1
	for i := first; i < len(trace); i++ {
		changed := !equalShares(trace[i].Shares, prev)
		prev = trace[i].Shares
		if changed {
			s.RewritesAfter++
			if i <= settleIdx {
				s.RewritesToSettle++
			}
		}
	}
	// Coming within tolerance only in the last quarter is not settling: the final value is
	// that quarter's mean, so any trace ends near it.
	if settleIdx < len(trace) && trace[settleIdx].T <= q {
		s.Settled = true
		if settleIdx > first {
			s.After = time.Duration((trace[settleIdx].T - t0) * float64(time.Second))
		}
	}
	return s
}

func equalShares(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Variant is a tuning to compare in the oscillation table.
type Variant struct {
	Name   string
	Tuning weights.Tuning
}

// OscillationVariants are the default tuning, no dead-band, no smoothing (alpha = gain =
// max_step = 1) and both off.
func OscillationVariants() []Variant {
	def := weights.DefaultTuning()
	noBand := def
	noBand.DeadBand = 0
	raw := def
	raw.Alpha, raw.Gain, raw.MaxStep = 1, 1, 1
	both := raw
	both.DeadBand = 0
	return []Variant{{"default", def}, {"dead_band=0", noBand}, {"no smoothing", raw}, {"both off", both}}
}
