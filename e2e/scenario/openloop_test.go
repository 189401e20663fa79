package scenario

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoissonScheduleStatistics(t *testing.T) {
	tests := []struct {
		name   string
		phases []Phase
		seed   int64
	}{
		{"400/s for 20 s", []Phase{{400, 20 * time.Second}}, 1},
		{"40/s for 100 s", []Phase{{40, 100 * time.Second}}, 2},
		{"idle then a step", []Phase{{0, 20 * time.Second}, {300, 20 * time.Second}}, 3},
		{"overload then 80 %", []Phase{{480, 20 * time.Second}, {350, 20 * time.Second}}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PoissonSchedule(tt.phases, 1<<30, tt.seed)
			if !slices.IsSorted(got) {
				t.Fatal("arrivals are not in order")
			}
			if again := PoissonSchedule(tt.phases, 1<<30, tt.seed); !slices.Equal(got, again) {
				t.Fatal("the same seed gave another schedule")
			}
			if other := PoissonSchedule(tt.phases, 1<<30, tt.seed+100); slices.Equal(got, other) {
				t.Fatal("another seed gave the same schedule")
			}
			var base time.Duration
			for i, p := range tt.phases {
				var in []time.Duration
				for _, a := range got {
					if a >= base && a < base+p.Duration {
						in = append(in, a)
					}
				}
				want := p.Rate * p.Duration.Seconds()
				// A Poisson count has variance = mean: within 4 sigma.
				if d := math.Abs(float64(len(in)) - want); d > 4*math.Sqrt(want)+1e-9 {
					t.Errorf("phase %d: %d arrivals, want %.0f ± %.0f", i, len(in), want, 4*math.Sqrt(want))
				}
				if p.Rate == 0 || len(in) < 100 {
					base += p.Duration
					continue
				}
				// Inter-arrival times are exponential: mean 1/rate, coefficient of variation 1.
				var gaps []float64
				for j := 1; j < len(in); j++ {
					gaps = append(gaps, (in[j] - in[j-1]).Seconds())
				}
				mean, sd := meanSD(gaps)
				if math.Abs(mean*p.Rate-1) > 0.1 {
					t.Errorf("phase %d: mean gap %.5f s, want %.5f", i, mean, 1/p.Rate)
				}
				if cv := sd / mean; math.Abs(cv-1) > 0.1 {
					t.Errorf("phase %d: coefficient of variation %.3f, want 1 (exponential)", i, cv)
				}
				base += p.Duration
			}
			if len(got) > 0 && got[len(got)-1] >= base {
				t.Errorf("an arrival at %v, after the phases' end %v", got[len(got)-1], base)
			}
		})
	}
}

func TestPoissonScheduleBoundedInCount(t *testing.T) {
	got := PoissonSchedule([]Phase{{1000, time.Hour}}, 250, 7)
	if len(got) != 250 {
		t.Fatalf("%d arrivals, want the bound 250", len(got))
	}
	if got := PoissonSchedule([]Phase{{1000, time.Hour}}, 0, 7); len(got) != 0 {
		t.Fatalf("%d arrivals with a bound of 0", len(got))
	}
}

func meanSD(xs []float64) (float64, float64) {
	var s float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, math.Sqrt(v / float64(len(xs)-1))
}

func TestPhasesOfRejects(t *testing.T) {
	tests := []struct {
		name string
		o    LoadOptions
		ok   bool
	}{
		{"rate", LoadOptions{Rate: 10, Duration: time.Second}, true},
		{"no rate", LoadOptions{Duration: time.Second}, false},
		{"negative rate", LoadOptions{Phases: []Phase{{-1, time.Second}, {10, time.Second}}}, false},
		{"zero-length phase", LoadOptions{Phases: []Phase{{10, 0}}}, false},
		{"only idle", LoadOptions{Phases: []Phase{{0, time.Second}}}, false},
		{"idle then load", LoadOptions{Phases: []Phase{{0, time.Second}, {5, time.Second}}}, true},
	}
	for _, tt := range tests {
		if _, err := phasesOf(tt.o); (err == nil) != tt.ok {
			t.Errorf("%s: err %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestTallyWindows(t *testing.T) {
	ms := time.Millisecond
	outs := []outcome{
		{at: 100 * ms, lat: 3 * ms, backend: "be1"},
		{at: 900 * ms, lat: 5 * ms, backend: "be2"},
		{at: 1100 * ms, kind: overflowKind, msg: "full"},
		{at: 1500 * ms, lat: 9 * ms, backend: "be1"},
		{at: 2600 * ms, kind: "timeout", msg: "deadline"},
		{at: 2700 * ms, lat: 7 * ms, backend: "be3"},
	}
	r := tally(outs, 5*time.Second, time.Second, 2800*ms)
	if r.OK != 4 || r.Errors != 2 || r.Overflow != 1 || r.Offered != 6 || r.ErrKinds["timeout"] != 1 || r.ErrKinds[overflowKind] != 1 {
		t.Fatalf("totals: %+v", r)
	}
	if !r.P99Failed || r.P99All != 5*time.Second {
		t.Errorf("2 of 6 failed: p99 of all must be a failure, got %v %v", r.P99All, r.P99Failed)
	}
	want := []struct {
		start, length                 time.Duration
		offered, ok, errors, overflow int
		p99                           time.Duration
		failed                        bool
	}{
		{0, time.Second, 2, 2, 0, 0, 5 * ms, false},
		{time.Second, time.Second, 2, 1, 1, 1, 9 * ms, true},
		{2 * time.Second, 800 * ms, 2, 1, 1, 0, 7 * ms, true},
	}
	if len(r.Windows) != len(want) {
		t.Fatalf("%d windows, want %d", len(r.Windows), len(want))
	}
	for i, w := range want {
		g := r.Windows[i]
		if g.Start != w.start || g.Len != w.length || g.Offered != w.offered || g.OK != w.ok || g.Errors != w.errors ||
			g.Overflow != w.overflow || g.P99 != w.p99 || g.P99Failed != w.failed {
			t.Errorf("window %d: %+v, want %+v", i, g, w)
		}
	}
	if got := tally(outs, time.Second, 0, 2800*ms); got.Windows != nil || got.Requests != nil {
		t.Errorf("no window asked, got %d windows, %d requests", len(got.Windows), len(got.Requests))
	}

	// Windows off the grid, from the requests.
	if len(r.Requests) != len(outs) {
		t.Fatalf("%d requests kept, want %d", len(r.Requests), len(outs))
	}
	for _, c := range []struct {
		from, to time.Duration
		p99      time.Duration
		failed   bool
		n        int
	}{
		{0, time.Second, 5 * ms, false, 2},
		{800 * ms, 1600 * ms, 5 * time.Second, true, 3}, // 1 of 3 failed: the p99 is a failure
		{1500 * ms, 2600 * ms, 9 * ms, false, 1},        // [from, to): the timeout at 2,600 is out
		{3 * time.Second, 4 * time.Second, 0, false, 0},
	} {
		p99, failed, n := r.Between(c.from, c.to)
		if p99 != c.p99 || failed != c.failed || n != c.n {
			t.Errorf("Between(%v, %v) = %v %v %d, want %v %v %d", c.from, c.to, p99, failed, n, c.p99, c.failed, c.n)
		}
	}
	for _, c := range []struct {
		at   time.Duration
		want int
	}{
		{903 * ms, 1},  // be2's, scheduled at 900, answered at 905
		{905 * ms, 0},  // answered at that instant: not waited for after it
		{1100 * ms, 0}, // the overflow failed: its end is unknown, not counted
		{1505 * ms, 1},
	} {
		if got := r.AnsweredAcross(c.at); got != c.want {
			t.Errorf("AnsweredAcross(%v) = %d, want %d", c.at, got, c.want)
		}
	}
}

// TestOpenLoopLatencyFromSchedule stalls the generator for 150 ms at its first arrival:
// the arrivals due during the stall are sent late, and their latency must include the wait
// (latency from the scheduled arrival), though the requests themselves are instant.
func TestOpenLoopLatencyFromSchedule(t *testing.T) {
	const stall = 150 * time.Millisecond
	dispatchHook = func(i int) {
		if i == 0 {
			time.Sleep(stall) // the generator stalls here: what is measured is its effect
		}
	}
	defer func() { dispatchHook = nil }()
	o := LoadOptions{Arrivals: Poisson, Rate: 200, Duration: 400 * time.Millisecond, MaxRequests: 1000, Timeout: time.Second, Seed: 1}
	r, err := openLoop(context.Background(), o, func(context.Context) (string, error) { return "be1", nil })
	if err != nil {
		t.Fatal(err)
	}
	if r.OK < 40 || r.Errors != 0 {
		t.Fatalf("%d ok, %d errors: %v", r.OK, r.Errors, r.ErrSamples)
	}
	if r.Max < stall-10*time.Millisecond || r.MaxLag < stall-10*time.Millisecond {
		t.Errorf("max latency %v, max lag %v: the stall of %v is not in the figures", r.Max, r.MaxLag, stall)
	}
}

// TestOpenLoopOverflow holds every request open: with MaxInFlight 3, arrivals beyond the
// third fail as overflow at once instead of waiting, and the run still ends in time.
func TestOpenLoopOverflow(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	o := LoadOptions{Arrivals: Poisson, Rate: 500, Duration: 200 * time.Millisecond, MaxRequests: 1000,
		Timeout: 2 * time.Second, MaxInFlight: 3, Seed: 5}
	var once sync.Once
	t0 := time.Now()
	r, err := openLoop(context.Background(), o, func(ctx context.Context) (string, error) {
		if started.Add(1) == 3 {
			// The third open request: let them all go once the arrivals are over.
			go once.Do(func() {
				time.AfterFunc(o.Duration, func() { close(release) })
			})
		}
		select {
		case <-release:
			return "be2", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 3 || r.Overflow != r.Offered-3 || r.Errors != r.Overflow || r.ErrKinds[overflowKind] != r.Overflow || r.Overflow < 50 {
		t.Fatalf("ok %d, overflow %d, errors %d of %d offered: want 3 ok and the rest overflow", r.OK, r.Overflow, r.Errors, r.Offered)
	}
	if el := time.Since(t0); el > o.Duration+o.Timeout {
		t.Errorf("the run took %v, bound %v", el, o.Duration+o.Timeout)
	}
}

// TestOpenLoopTimeoutFromSchedule: a request that never answers fails as a timeout at its
// scheduled arrival + Timeout, and the run ends by Duration + Timeout.
func TestOpenLoopTimeoutFromSchedule(t *testing.T) {
	o := LoadOptions{Arrivals: Poisson, Rate: 50, Duration: 200 * time.Millisecond, MaxRequests: 100, Timeout: 100 * time.Millisecond, Seed: 9}
	t0 := time.Now()
	r, err := openLoop(context.Background(), o, func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 0 || r.Errors != r.Offered || r.ErrKinds["timeout"] != r.Offered || r.Offered == 0 {
		t.Fatalf("%+v: want every request a timeout", r)
	}
	if el := time.Since(t0); el > o.Duration+o.Timeout+100*time.Millisecond {
		t.Errorf("the run took %v, bound %v", el, o.Duration+o.Timeout)
	}
}

// TestOpenLoopCancelled: requests cut off by the caller's context are not counted as the
// system's failures, and arrivals stop.
func TestOpenLoopCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	o := LoadOptions{Arrivals: Poisson, Rate: 200, Duration: 10 * time.Second, MaxRequests: 10000, Timeout: 5 * time.Second, Seed: 3}
	r, err := openLoop(ctx, o, func(rctx context.Context) (string, error) {
		if n.Add(1) == 5 {
			cancel()
		}
		<-rctx.Done()
		return "", rctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Elapsed > 2*time.Second {
		t.Fatalf("%d errors in %v after the caller cancelled: %v", r.Errors, r.Elapsed, r.ErrSamples)
	}
}

// TestLoadRejects: a bad target or arrival mode is refused with its name before anything is
// sent (the zero Scenario has no client host: reaching the network would panic).
func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name string
		o    LoadOptions
		want string
	}{
		{"target without a port", LoadOptions{Target: "127.0.0.1"}, `"127.0.0.1"`},
		{"target with a path", LoadOptions{Target: "127.0.0.1:80/x:1"}, `"127.0.0.1:80/x:1"`},
		{"unknown arrivals", LoadOptions{Arrivals: Arrivals(7)}, "Arrivals 7"},
		{"no bound", LoadOptions{Duration: 0}, "Duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			if o.Duration == 0 && tt.want != "Duration" {
				o.Duration = time.Second
			}
			o.MaxRequests = 1
			_, err := (&Scenario{}).Load(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one naming %s", err, tt.want)
			}
		})
	}
}
