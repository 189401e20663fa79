package sim

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestFastLoopOrdering: in the lab's shape at 80 % load, least_conn weights every 20 ms are
// within 1.5x of per-request least connections, and a 1 s loop is worse than the fixed
// split (the lab's finding). Deterministic: seeded. Four of the table's runs, not the table:
// the whole of it takes half a minute under the race detector.
func TestFastLoopOrdering(t *testing.T) {
	run := func(c Config) float64 { return labP99(t, FastLoopPool, c) }
	lc, fixed := run(Config{Policy: LeastConn}), run(Config{Policy: Oracle})
	fast := run(Config{Policy: WeightsLeastConn, Tuning: FastLoopTuning(), Sample: 20 * time.Millisecond, Update: 20 * time.Millisecond})
	slow := run(Config{Policy: WeightsLeastConn, Tuning: FastLoopTuning(), Sample: time.Second, Update: time.Second})
	if !(lc > 0 && fast <= 1.5*lc && slow > fixed && fast < fixed) {
		t.Fatalf("80 %%: per request %.3f, fixed %.3f, every 20ms %.3f, every 1s %.3f", lc, fixed, fast, slow)
	}
}

// TestWriteFastLoop: the table has a header and a row per run.
func TestWriteFastLoop(t *testing.T) {
	rows := []FastLoopRow{{Pool: "FCFS", Load: 0.8, Label: "least connections, per request", Runs: []Result{{P99: 0.1, Mean: 0.02}}},
		{Pool: "FCFS", Load: 0.8, Label: "least_conn weights every 20ms", Period: 20 * time.Millisecond, Runs: []Result{{P99: 0.12, Mean: 0.03, Rewrites: 100, Window: 10}}}}
	var b strings.Builder
	WriteFastLoop(&b, rows)
	if got := b.String(); strings.Count(got, "\n") != 2+len(rows) || !strings.Contains(got, "| 1.20 | 10.0 |") {
		t.Fatalf("table:\n%s", got)
	}
}

// TestCFSQuota: a 0.125-core quota in 100 ms periods, bursting at one core, runs six 2 ms
// jobs back to back, and the seventh uses the last 0.5 ms of the period and finishes 1.5 ms
// into the next one.
func TestCFSQuota(t *testing.T) {
	st := newStation(Backend{Name: "q", Speed: 0.125, CFSPeriod: 100 * time.Millisecond}, nil, 0, 1)
	var f float64
	for i := range 7 {
		f = st.serve(0, 0.002)
		if i < 6 && math.Abs(f-0.002*float64(i+1)) > 1e-12 {
			t.Fatalf("job %d finishes at %v", i, f)
		}
	}
	if math.Abs(f-0.1015) > 1e-12 {
		t.Fatalf("the seventh job finishes at %v, want 0.1015", f)
	}
	if got := st.serve(0.35, 0.001); math.Abs(got-0.351) > 1e-12 {
		t.Fatalf("a job in a fresh period: %v", got)
	}
}

// TestCFSQuotaCPU: under a quota the probe reads the CPU used over the quota, whether the
// jobs ran in a burst or were throttled. Fifty 2 ms jobs in one second on a 0.125-core quota
// use 0.1 s of CPU: 80 % of the quota (0.1 of a core read as wall time, the bug this pins).
func TestCFSQuotaCPU(t *testing.T) {
	for _, tt := range []struct {
		name string
		gap  float64 // seconds between arrivals
	}{
		{"spread: every job runs in a burst", 0.02},
		{"back to back: the quota throttles", 0},
	} {
		st := newStation(Backend{Name: "q", Speed: 0.125, CFSPeriod: 100 * time.Millisecond}, nil, 0, 10)
		last := 0.0
		for i := range 50 {
			last = st.serve(float64(i)*tt.gap, 0.002)
		}
		// One sample interval of 10 s holds every job: 0.1 s of CPU over 10 s × 0.125.
		if got, want := st.util(0), 0.1/(10*0.125); math.Abs(got-want) > 1e-9 || last > 10 {
			t.Errorf("%s: util %v, want %v (last job done at %v)", tt.name, got, want, last)
		}
	}
	// Intervals of one quota period, shorter than the throttled jobs' stay: each reads what
	// ran in it, never above the quota (spreading a job's CPU over its stay read up to 2.3x),
	// and together all of it.
	st := newStation(Backend{Name: "q", Speed: 0.125, CFSPeriod: 100 * time.Millisecond}, nil, 0, 0.1)
	last := 0.0
	for range 50 {
		last = st.serve(0, 0.002)
	}
	sum := 0.0
	for b := 0; b <= st.bin(last); b++ {
		if u := st.util(b); u > 1+1e-9 {
			t.Errorf("interval %d reads %v of the quota", b, u)
		}
		sum += st.util(b) * 0.1 * 0.125
	}
	if math.Abs(sum-0.1) > 1e-9 {
		t.Errorf("100 ms intervals add up to %v s of CPU, want 0.1", sum)
	}
}

// TestInFlightStaleness: counts taken by probes every period and used a delay later steer
// the fast loop worse than counts read as it runs; the new fields are refused where they
// mean nothing, naming the key.
func TestInFlightStaleness(t *testing.T) {
	run := func(c Config) float64 { return labP99(t, FastLoopPoolCFS, c) }
	fl := func(report, delay time.Duration) Config {
		return Config{Policy: Headroom, ServiceCPU: true, Sample: time.Second, Update: time.Second,
			InFlight: 50 * time.Millisecond, InFlightReport: report, InFlightDelay: delay}
	}
	lc := run(Config{Policy: LeastConn})
	fresh, stale := run(fl(0, 0)), run(fl(50*time.Millisecond, 5*time.Millisecond))
	if !(lc > 0 && fresh < stale) {
		t.Fatalf("80 %%: per request %.4f, fresh %.4f, probes every 50ms 5ms late %.4f", lc, fresh, stale)
	}
	base := func() Config {
		return Config{Backends: FastLoopPoolCFS, Load: 0.5, Jobs: 10, Policy: Headroom, InFlight: 20 * time.Millisecond}
	}
	for _, tt := range []struct {
		key string
		c   func(c *Config)
	}{
		{"in_flight_report", func(c *Config) { c.InFlight, c.InFlightReport = 0, time.Millisecond }},
		{"in_flight_delay", func(c *Config) { c.InFlightDelay = time.Millisecond }},
		{"in_flight_linger", func(c *Config) { c.InFlightLinger = -time.Millisecond }},
		{"in_flight_linger", func(c *Config) { c.InFlight, c.InFlightLinger = 0, time.Millisecond }},
		{"in_flight_linger", func(c *Config) {
			c.Backends = append([]Backend{{Name: "two", Speed: 1, Servers: 2}}, FastLoopPool[1:]...)
			c.InFlightLinger = time.Millisecond
		}},
		{"in_flight_own", func(c *Config) { c.InFlight, c.InFlightOwn = 0, true }},
	} {
		c := base()
		tt.c(&c)
		if _, err := Run(c); err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%s: %v", tt.key, err)
		}
	}
}

// labP99 is the p99 of c in the lab's shape at 80 % load over pool: 120,000 jobs, seed 1,
// 30 s of warm-up.
func labP99(t *testing.T, pool []Backend, c Config) float64 {
	t.Helper()
	c.Backends, c.Load, c.MeanSize, c.Jobs, c.Seed, c.Warmup = pool, 0.8, fastLoopJobSize, 120_000, 1, 30*time.Second
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	return r.P99
}
