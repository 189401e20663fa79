package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of the burn mode's flags.
const (
	MinBurnPeriod = time.Millisecond
	MaxBurnPeriod = 10 * time.Second
	MaxBurnFor    = 24 * time.Hour
)

// Burner is backendd's neighbour mode: a duty-cycled CPU burner that uses about Cores of one
// CPU (0 < Cores ≤ 1) for For, then exits. In each Period it spins until the process has
// used Cores·Period of CPU time, or the period is over, and sleeps the rest. It measures the
// CPU time it got, not the time it spun, so inside a CPU-limited cgroup it takes Cores of
// CPU and leaves the rest of the quota to the service; when the cgroup is throttled or the
// machine busy it gets less, never more (a period's shortfall is not made up later).
type Burner struct {
	Cores  float64
	Period time.Duration
	For    time.Duration

	// CPUTime is the process's CPU time so far; default clock_gettime(CLOCK_PROCESS_CPUTIME_ID).
	CPUTime func() (time.Duration, error)
	// Now and Sleep are the clock; defaults time.Now and a timer that ctx cuts short.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration)
	// Spin does one short slice of work (tens of microseconds); default Burn(100).
	Spin func()
}

// BurnStats is what a burner run used.
type BurnStats struct {
	Periods int
	CPU     time.Duration // CPU time used by the process during the run
	Elapsed time.Duration
}

// Cores is the CPU used per wall-clock second.
func (s BurnStats) Cores() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.CPU) / float64(s.Elapsed)
}

func (b *Burner) check() error {
	var errs []error
	if !(b.Cores > 0 && b.Cores <= 1) {
		errs = append(errs, fmt.Errorf("-burn-cores %v: want 0 < cores <= 1 (one spinning thread)", b.Cores))
	}
	if b.Period < MinBurnPeriod || b.Period > MaxBurnPeriod {
		errs = append(errs, fmt.Errorf("-burn-period %v: want %v to %v", b.Period, MinBurnPeriod, MaxBurnPeriod))
	}
	if b.For <= 0 || b.For > MaxBurnFor {
		errs = append(errs, fmt.Errorf("-burn-for %v: want more than 0, at most %v (the burner is bounded in time)", b.For, MaxBurnFor))
	}
	return errors.Join(errs...)
}

// Run burns until For has passed or ctx ends (neither is an error) and returns what it used.
func (b *Burner) Run(ctx context.Context) (BurnStats, error) {
	if err := b.check(); err != nil {
		return BurnStats{}, err
	}
	cpuTime, now, sleep, spin := b.CPUTime, b.Now, b.Sleep, b.Spin
	if cpuTime == nil {
		cpuTime = processCPUTime
	}
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = sleepCtx
	}
	if spin == nil {
		spin = func() { _ = Burn(100) }
	}
	start := now()
	end := start.Add(b.For)
	cpu0, err := cpuTime()
	if err != nil {
		return BurnStats{}, err
	}
	var st BurnStats
	finish := func() (BurnStats, error) {
		cpu, err := cpuTime()
		st.CPU, st.Elapsed = cpu-cpu0, now().Sub(start)
		return st, err
	}
	for ctx.Err() == nil {
		p0 := now()
		if !p0.Before(end) {
			break
		}
		st.Periods++
		pEnd := p0.Add(b.Period)
		if pEnd.After(end) {
			pEnd = end // a last, shorter period gets a budget to match
		}
		budget := time.Duration(b.Cores * float64(pEnd.Sub(p0)))
		c0, err := cpuTime()
		if err != nil {
			return st, err
		}
		for ctx.Err() == nil {
			c, err := cpuTime()
			if err != nil {
				return st, err
			}
			if c-c0 >= budget || !now().Before(pEnd) {
				break
			}
			spin()
		}
		if rest := pEnd.Sub(now()); rest > 0 {
			sleep(ctx, rest)
		}
	}
	return finish()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// processCPUTime is the CPU time of every thread of the process: what its cgroup is charged.
func processCPUTime() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0, fmt.Errorf("clock_gettime(CLOCK_PROCESS_CPUTIME_ID): %w", err)
	}
	return time.Duration(ts.Nano()), nil
}
