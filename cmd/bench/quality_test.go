package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// res is a run's result whose p99 over all requests is p99; failed sets P99Failed.
func res(p99 time.Duration, errors int) scenario.LoadResult {
	return scenario.LoadResult{OK: 100, Errors: errors, P99: p99, P99All: p99}
}

func failedRes(errors int) scenario.LoadResult {
	return scenario.LoadResult{OK: 100, Errors: errors, P99: time.Millisecond, P99All: 5 * time.Second, P99Failed: true}
}

func TestBestSearched(t *testing.T) {
	ms := time.Millisecond
	search := func(label string, lvl float64, p99 time.Duration, errs int, skipped bool) runResult {
		return runResult{level: lvl, run: policyRun{label: label, search: true}, res: res(p99, errs), skipped: skipped}
	}
	results := []runResult{
		{level: 0.5, run: policyRun{label: "equal"}, res: res(10*ms, 0)}, // not part of the search
		search("static a", 0.5, 90*ms, 0, false),
		search("static b", 0.5, 40*ms, 0, false),
		search("static c", 0.5, 20*ms, 3, false), // lowest p99 of all, a few failures below 1 %
		search("static d", 0.5, 0, 0, true),      // skipped: never best
		search("static a", 0.8, 70*ms, 2, false),
		search("static b", 0.8, 50*ms, 1, false),
		{level: 0.9, run: policyRun{label: "static a", search: true}, res: failedRes(5)},
		{level: 0.9, run: policyRun{label: "static b", search: true}, res: failedRes(3)},
		{level: 0.9, run: policyRun{label: "static c", search: true}, res: res(900*ms, 0)},
		{level: 0.95, run: policyRun{label: "static a", search: true}, res: failedRes(5)},
		{level: 0.95, run: policyRun{label: "static b", search: true}, res: failedRes(3)},
	}
	tests := []struct {
		level    float64
		want     string
		measured int
		ok       bool
	}{
		{0.5, "static c", 3, true},  // failures that do not reach the p99 count by their latency
		{0.8, "static b", 2, true},  // the lowest p99
		{0.9, "static c", 3, true},  // any latency beats a p99 that is a failure
		{0.95, "static b", 2, true}, // both failed: the fewer failures
		{0.99, "", 0, false},
	}
	for _, tt := range tests {
		best, n, ok := bestSearched(results, tt.level)
		if ok != tt.ok || n != tt.measured || best.run.label != tt.want {
			t.Errorf("level %v: best %q of %d (ok %v), want %q of %d (ok %v)", tt.level, best.run.label, n, ok, tt.want, tt.measured, tt.ok)
		}
	}
}

func TestFind(t *testing.T) {
	results := []runResult{
		{level: 0.5, run: policyRun{label: "headroom (default, service CPU)"}, skipped: true},
		{level: 0.5, run: policyRun{label: "headroom (default, service CPU)"}, res: res(time.Second, 0)},
		{level: 0.8, run: policyRun{label: "equal"}},
	}
	if r, ok := find(results, 0.5, "headroom"); !ok || r.res.P99 != time.Second {
		t.Errorf("find headroom at 0.5 = %+v, %v; want the measured one", r, ok)
	}
	if _, ok := find(results, 0.5, "equal"); ok {
		t.Error("found equal at 0.5")
	}
}

func TestRatioCell(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		num, den scenario.LoadResult
		target   float64
		want     string
	}{
		{res(120*ms, 0), res(100*ms, 0), 1.2, "1.20 (met)"},
		{res(121*ms, 0), res(100*ms, 0), 1.2, "1.21 (missed)"},
		{res(50*ms, 0), res(100*ms, 0), 1.0, "0.50 (met)"},
		{res(50*ms, 0), res(0, 0), 1.0, "no latency"},
		{failedRes(9), res(100*ms, 0), 1.2, "missed"},
		{res(100*ms, 0), failedRes(9), 1.2, "met"},
		{failedRes(9), failedRes(9), 1.2, "both"},
	}
	for _, tt := range tests {
		if got := ratioCell(tt.num, tt.den, tt.target); !strings.Contains(got, tt.want) {
			t.Errorf("ratioCell(%+v, %+v, %v) = %q, want %q", tt.num, tt.den, tt.target, got, tt.want)
		}
	}
}

func TestLevelDeadline(t *testing.T) {
	start := time.Unix(1000, 0)
	deadline := start.Add(10 * time.Minute)
	for i, want := range []time.Duration{5 * time.Minute, 10 * time.Minute} {
		if got := levelDeadline(start, deadline, i, 2); !got.Equal(start.Add(want)) {
			t.Errorf("level %d ends at +%v, want +%v", i, got.Sub(start), want)
		}
	}
}

// The search covers the splits the issue names, each a share vector, equal first.
func TestStaticSearch(t *testing.T) {
	if len(staticSearch) != 5 {
		t.Fatalf("%d splits", len(staticSearch))
	}
	for i, c := range staticSearch {
		if len(c) != 3 || MaxDiff(Normalize(c), c) > 1e-9 {
			t.Errorf("split %d %v is not three shares summing to 1", i, c)
		}
		if c[0] != c[1] || (i > 0 && c[2] <= staticSearch[i-1][2]) {
			t.Errorf("split %d %v: want be1 = be2 and be3's share growing", i, c)
		}
	}
}

func TestP99Cell(t *testing.T) {
	tests := []struct {
		r    runResult
		want string
	}{
		{runResult{res: res(12500*time.Microsecond, 0)}, "12.5 ms"},
		{runResult{res: res(time.Second, 3)}, "1000.0 ms (3 of 103 failed)"},
		{runResult{res: failedRes(3)}, "failed (3 of 103 failed)"},
		{runResult{res: res(time.Second, 0), fallback: "be1: no service_cpu"}, "1000.0 ms (ran as 1/AL)"},
	}
	for _, tt := range tests {
		if got := p99Cell(tt.r); got != tt.want {
			t.Errorf("p99Cell = %q, want %q", got, tt.want)
		}
	}
}

// With repetitions, find and bestSearched compare medians, and the cell lists every run.
func TestMedianOverRepeats(t *testing.T) {
	ms := time.Millisecond
	run := func(label string, rep int, r scenario.LoadResult) runResult {
		return runResult{level: 0.5, rep: rep, run: policyRun{label: label, search: strings.HasPrefix(label, "static")}, res: r}
	}
	results := []runResult{
		run("headroom", 0, res(30*ms, 0)), run("headroom", 1, res(10*ms, 0)), run("headroom", 2, failedRes(40)),
		run("static a", 0, res(5*ms, 0)), run("static a", 1, res(50*ms, 0)), run("static a", 2, res(60*ms, 0)),
		run("static b", 0, res(20*ms, 0)), run("static b", 1, res(25*ms, 0)), run("static b", 2, res(90*ms, 0)),
		run("equal", 0, res(7*ms, 0)), run("equal", 1, res(9*ms, 0)), // even count: the worse middle
	}
	h, ok := find(results, 0.5, "headroom")
	if !ok || h.res.P99All != 30*ms || len(h.reps) != 3 {
		t.Errorf("headroom median = %v over %d, want 30ms over 3", h.res.P99All, len(h.reps))
	}
	if got, want := p99Cell(h), "30.0 ms; median of 3: 30.0 ms, 10.0 ms, failed"; got != want {
		t.Errorf("p99Cell = %q, want %q", got, want)
	}
	if e, _ := find(results, 0.5, "equal"); e.res.P99All != 9*ms {
		t.Errorf("equal median = %v, want 9ms", e.res.P99All)
	}
	best, n, ok := bestSearched(results, 0.5)
	if !ok || n != 2 || best.run.label != "static b" || best.res.P99All != 25*ms {
		t.Errorf("best = %q %v of %d, want static b 25ms of 2 (its median beats static a's 50ms)", best.run.label, best.res.P99All, n)
	}
}

func TestSelected(t *testing.T) {
	runs := []policyRun{{label: "equal"}, {label: "oracle (static, C = quota)"}, {label: "headroom (default, service CPU)"}, {label: "static 20.0/20.0/60.0%"}}
	tests := []struct {
		policies []string
		want     []string
	}{
		{nil, []string{"equal", "oracle (static, C = quota)", "headroom (default, service CPU)", "static 20.0/20.0/60.0%"}},
		{[]string{"oracle", "headroom", "static 20"}, []string{"oracle (static, C = quota)", "headroom (default, service CPU)", "static 20.0/20.0/60.0%"}},
		{[]string{"static 30"}, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, r := range (&bench{policies: tt.policies}).selected(runs) {
			got = append(got, r.label)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("-policies %q: %q, want %q", tt.policies, got, tt.want)
		}
	}
}
