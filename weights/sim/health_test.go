package sim

import (
	"strings"
	"testing"
	"time"
)

// TestHealthFrozenBackend: the lab's biggest backend all but stops 60 s in, under light
// load, with jobs still arriving. Counting every timeout, it is out once three checks in a
// row have timed out: 1 s after the first late one was sent, plus two intervals. By the
// collector's rule its queue says busy, so it is slow at once (its share cut) and evicted as
// the pool's one slow backend once slow_evict_after has passed without an answer: the price
// of not evicting by load (collector/pool.go, busy).
func TestHealthFrozenBackend(t *testing.T) {
	for _, tt := range []struct {
		name     string
		h        Health
		from, to float64 // seconds: when the eviction must come
	}{
		{"every timeout counts", LabHealth(time.Second, false), 61, 61.5},
		{"busy is not dead", LabHealth(time.Second, true), 90, 92},
		{"no checks", Health{}, 0, 0},
	} {
		r, err := Run(Config{Backends: FastLoopPool, Load: 0.3, MeanSize: fastLoopJobSize, Jobs: 25_000, Seed: 1,
			Warmup: 30 * time.Second, Policy: Headroom, ServiceCPU: true, Sample: time.Second, Update: time.Second,
			Steps: []Step{{At: 60 * time.Second, Backend: 2, Factor: 1e-4}}, Health: tt.h})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tt.to == 0 && len(r.Evictions) != 0:
			t.Errorf("%s: evictions at %v, want none", tt.name, r.Evictions)
		case tt.to > 0 && (len(r.Evictions) != 1 || r.Evictions[0] < tt.from || r.Evictions[0] > tt.to || r.FinalShares[2] != 0):
			t.Errorf("%s: evictions at %v s, final shares %.3f; want one in [%v, %v] s and the frozen backend at 0",
				tt.name, r.Evictions, r.FinalShares, tt.from, tt.to)
		}
	}
}

// TestHealthBusyIsNotDead: the lab's pool under CFS quotas at 95 % load, checks timing out at
// 500 ms. Counting every timeout, queueing alone evicts healthy backends again and again and
// the p99 is many times the one without checks (the cascade the lab measured); by the
// collector's rule nobody is evicted and the p99 stays near the one without checks.
func TestHealthBusyIsNotDead(t *testing.T) {
	run := func(h Health) Result {
		t.Helper()
		r, err := Run(Config{Backends: FastLoopPoolCFS, Load: 0.95, MeanSize: fastLoopJobSize, Jobs: 100_000, Seed: 1,
			Warmup: 30 * time.Second, Policy: Headroom, ServiceCPU: true, Sample: time.Second, Update: time.Second, Health: h})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	none, every, busy := run(Health{}), run(LabHealth(500*time.Millisecond, false)), run(LabHealth(500*time.Millisecond, true))
	if len(every.Evictions) == 0 || every.P99 < 5*none.P99 {
		t.Errorf("every timeout counting: %d evictions, p99 %.3f s against %.3f s without checks: no cascade", len(every.Evictions), every.P99, none.P99)
	}
	if len(busy.Evictions) != 0 || busy.P99 > 1.2*none.P99 {
		t.Errorf("busy is not dead: %d evictions, p99 %.3f s against %.3f s without checks", len(busy.Evictions), busy.P99, none.P99)
	}
}

// TestWriteHealthChecks: the table has a header and a row per run, with evictions per minute.
func TestWriteHealthChecks(t *testing.T) {
	rows := []FastLoopRow{{Load: 0.8, Label: "least connections, per request", Runs: []Result{{P99: 0.1, Mean: 0.02}}},
		{Load: 0.8, Label: "headroom", Runs: []Result{{P99: 0.3, Mean: 0.05, Evictions: []float64{40, 50, 60, 70}, Window: 120}}},
		{Load: 0.8, Label: "no window", Runs: []Result{{P99: 0.3}}}}
	var b strings.Builder
	WriteHealthChecks(&b, rows)
	if got := b.String(); strings.Count(got, "\n") != 2+len(rows) || !strings.Contains(got, "| 3.00 | 2.0 |") || strings.Contains(got, "NaN") {
		t.Fatalf("table:\n%s", got)
	}
}
