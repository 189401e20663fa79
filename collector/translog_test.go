package collector

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
	"flowweight/weights"
)

// TestTransitionLogRateLimit is the review's finding: one probe toggling its drain flag sent
// 2,000 reports in 2 s and wrote 2,000 "backend state" lines. The state follows every report;
// the log holds TransitionBurst lines, then one per TransitionEvery, the next one counting
// those suppressed, and a catch-up line ends on the real state; OnTransition sees every
// change, the ones over the budget marked Quiet.
func TestTransitionLogRateLimit(t *testing.T) {
	c := testutil.NewClock(testutil.Start)
	var logs bytes.Buffer
	var seen []Transition
	p := NewPool(Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: 15 * time.Second, Warmup: 60 * time.Second,
		Alpha: 0.5, Now: c.Now, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		OnTransition: func(t Transition) { seen = append(seen, t) }})
	p.SetBackends([]string{"a", "b"})
	lines := func() []map[string]any {
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if l == "" {
				continue
			}
			m := map[string]any{}
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	p.Accept(rep("a", true), from) // unknown -> up (at start-up): 1 of the burst
	const toggles = 2000
	for i := range toggles {
		c.Advance(time.Millisecond) // 2,000 reports in 2 s
		r := rep("a", true)
		drain := i%2 == 0
		if drain {
			r.Flags |= report.FlagDrain
		}
		p.Accept(r, from)
		want := weights.StatusUp
		if drain {
			want = weights.StatusDrained
		}
		if s, _ := p.Get("a"); s.Status != want {
			t.Fatalf("report %d: status %v, want %v: the state must follow every report", i, s.Status, want)
		}
	}
	p.Accept(rep("b", true), from) // another backend has a budget of its own
	if got := len(lines()); got != TransitionBurst+1 {
		t.Errorf("%d state lines after %d changes in 2 s, want %d of a's and 1 of b's", got, toggles+1, TransitionBurst)
	}
	if len(seen) != toggles+2 {
		t.Fatalf("OnTransition saw %d changes, want all %d", len(seen), toggles+2)
	}
	quiet := 0
	for _, tr := range seen {
		if tr.Quiet {
			quiet++
		}
	}
	if quiet != toggles+1-TransitionBurst {
		t.Errorf("%d changes marked Quiet, want %d", quiet, toggles+1-TransitionBurst)
	}

	// The flapping ends on drained (the last toggle left it warming).
	c.Advance(time.Millisecond)
	r := rep("a", true)
	r.Flags |= report.FlagDrain
	p.Accept(r, from)
	p.Tick()
	if got := len(lines()); got != TransitionBurst+1 {
		t.Fatalf("a line was logged with the budget spent: %d", got)
	}
	c.Advance(TransitionEvery)
	p.Tick()
	all := lines()
	last := all[len(all)-1]
	if last["backend"] != "a" || last["to"] != "drained" || last["suppressed"] != float64(quiet+1) {
		t.Errorf("catch-up line %v, want a ending drained with %d suppressed", last, quiet+1)
	}
	if tr := seen[len(seen)-1]; !tr.Catchup || tr.To != weights.StatusDrained || tr.Suppressed != uint64(quiet+1) {
		t.Errorf("OnTransition's last %+v, want the catch-up", tr)
	}
	p.Tick()
	if got := len(lines()); got != len(all) {
		t.Errorf("a second catch-up line with nothing suppressed")
	}
	// Quiet since: the next change is logged at once again, with nothing suppressed.
	c.Advance(time.Minute)
	p.Accept(rep("a", true), from)
	all = lines()
	if last := all[len(all)-1]; last["to"] != "up" || last["suppressed"] != nil {
		t.Errorf("next change logged as %v, want up (warm-up over) without a suppressed count", last)
	}
}

// TestTransitionBudgetClockStep: a clock stepping back refills nothing and does not stop the
// refill once it moves on.
func TestTransitionBudgetClockStep(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b transitionBudget
	for i := range TransitionBurst {
		if !b.take(now) {
			t.Fatalf("take %d refused within the burst", i)
		}
	}
	if b.take(now.Add(-time.Hour)) {
		t.Fatal("a clock stepping back refilled the budget")
	}
	if !b.take(now.Add(-time.Hour + TransitionEvery)) {
		t.Fatal("no refill once the clock moved on from where it stepped back to")
	}
}
