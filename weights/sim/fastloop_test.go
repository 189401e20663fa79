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
	run := func(c Config) float64 {
		t.Helper()
		c.Backends, c.Load, c.MeanSize, c.Jobs, c.Seed, c.Warmup = FastLoopPool, 0.8, fastLoopJobSize, 120_000, 1, 30*time.Second
		r, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		return r.P99
	}
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
