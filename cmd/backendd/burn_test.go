package main

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// fakeCPU is a clock and a CPU-time counter: each spin takes wall of wall-clock time and gives
// cpu of CPU time (cpu < wall: the cgroup is throttled or the machine busy).
type fakeCPU struct {
	t         time.Time
	used      time.Duration
	wall, cpu time.Duration
	sleeps    int
	// cancel, when set, is called at the sleep numbered cancelAt.
	cancel   func()
	cancelAt int
}

func (f *fakeCPU) burner(cores float64, period, d time.Duration) *Burner {
	return &Burner{Cores: cores, Period: period, For: d,
		CPUTime: func() (time.Duration, error) { return f.used, nil },
		Now:     func() time.Time { return f.t },
		Sleep: func(ctx context.Context, d time.Duration) {
			f.sleeps++
			if f.cancel != nil && f.sleeps == f.cancelAt {
				f.cancel()
			}
			f.t = f.t.Add(d)
		},
		Spin: func() { f.t, f.used = f.t.Add(f.wall), f.used+f.cpu },
	}
}

func TestBurnerDutyCycle(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name        string
		cores       float64
		period, dur time.Duration
		wall, cpu   time.Duration
		wantCores   float64
		wantPeriods int
	}{
		{"quarter core, unthrottled", 0.25, 100 * ms, 10 * time.Second, ms, ms, 0.25, 100},
		{"half core, 10 ms periods", 0.5, 10 * ms, time.Second, ms / 4, ms / 4, 0.5, 100},
		{"a whole core spins throughout", 1, 100 * ms, time.Second, ms, ms, 1, 10},
		// Getting a quarter of the CPU while spinning: a period ends before the budget is
		// used, and its shortfall is not made up later (never more than asked).
		{"throttled gets less", 0.5, 100 * ms, time.Second, 4 * ms, ms, 0.25, 10},
		{"throttled a little still gets its share", 0.25, 100 * ms, time.Second, 2 * ms, ms, 0.25, 10},
		{"a run not a whole number of periods", 0.25, 100 * ms, 250 * ms, ms, ms, 0.25, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCPU{t: time.Unix(1000, 0), used: 7 * time.Second, wall: tt.wall, cpu: tt.cpu}
			st, err := f.burner(tt.cores, tt.period, tt.dur).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Periods != tt.wantPeriods {
				t.Errorf("periods %d, want %d", st.Periods, tt.wantPeriods)
			}
			// One spin slice of slack per period at most.
			if tol := float64(tt.cpu) / float64(tt.period); math.Abs(st.Cores()-tt.wantCores) > tol+1e-9 {
				t.Errorf("used %.4f cores (%v CPU in %v), want %.4f ± %.4f", st.Cores(), st.CPU, st.Elapsed, tt.wantCores, tol)
			}
			if st.Elapsed < tt.dur || st.Elapsed > tt.dur+tt.wall {
				t.Errorf("ran %v, want %v (plus at most one spin slice)", st.Elapsed, tt.dur)
			}
		})
	}
}

func TestBurnerStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeCPU{t: time.Unix(1000, 0), wall: time.Millisecond, cpu: time.Millisecond, cancel: cancel, cancelAt: 3}
	st, err := f.burner(0.25, 100*time.Millisecond, time.Hour).Run(ctx)
	if err != nil {
		t.Fatalf("a cancelled run is not an error: %v", err)
	}
	if st.Periods != 3 {
		t.Fatalf("periods %d after cancelling in the third sleep, want 3", st.Periods)
	}
}

func TestBurnerRejectsUnboundedOrImpossible(t *testing.T) {
	tests := []struct {
		name        string
		cores       float64
		period, dur time.Duration
		want        string
	}{
		{"no cores", 0, 100 * time.Millisecond, time.Minute, "-burn-cores"},
		{"more than one thread can use", 1.5, 100 * time.Millisecond, time.Minute, "-burn-cores"},
		{"NaN cores", math.NaN(), 100 * time.Millisecond, time.Minute, "-burn-cores"},
		{"no period", 0.5, 0, time.Minute, "-burn-period"},
		{"too long a period", 0.5, time.Minute, time.Hour, "-burn-period"},
		{"unbounded", 0.5, 100 * time.Millisecond, 0, "-burn-for"},
		{"too long", 0.5, 100 * time.Millisecond, 25 * time.Hour, "-burn-for"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCPU{t: time.Unix(1000, 0), wall: time.Millisecond, cpu: time.Millisecond}
			_, err := f.burner(tt.cores, tt.period, tt.dur).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one about %s", err, tt.want)
			}
		})
	}
}

// The process CPU clock is readable and does not go back.
func TestProcessCPUTime(t *testing.T) {
	a, err := processCPUTime()
	if err != nil {
		t.Fatal(err)
	}
	_ = Burn(1000)
	b, err := processCPUTime()
	if err != nil {
		t.Fatal(err)
	}
	if a <= 0 || b < a {
		t.Fatalf("CPU time %v then %v", a, b)
	}
}
