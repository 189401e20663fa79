package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"flowweight/internal/health"
	"flowweight/internal/report"
	"flowweight/probe/sample"
)

// TestInFlightReports: between full reports every InFlightInterval, an in-flight report with
// a fresh count, the drain flag as it is now and the last full report's other fields; a
// failed count sends nothing.
func TestInFlightReports(t *testing.T) {
	counts := &script{results: []result{{sample.Values{Known: sample.FieldConns, Conns: 3}, nil}}}
	h := start(t, func(a *Agent) {
		a.Jitter = 0
		a.Health = fakeHealth{health.Result{OK: true, Status: 200, Latency: time.Millisecond}}
		a.InFlightInterval, a.InFlight = time.Second, counts
	})
	// The first full report comes at 5 s; until then no in-flight report (nothing to repeat).
	if d := <-h.clk.Started(); d != 5*time.Second {
		t.Fatalf("first wait %v, want the interval (no full report yet)", d)
	}
	h.clk.Advance(5 * time.Second)
	first := h.recv()
	if first.Signals&report.SignalInFlight != 0 || first.Conns != 17 {
		t.Fatalf("full report %+v", first)
	}
	counts.set(result{sample.Values{Known: sample.FieldConns, Conns: 41}, nil})
	for i := 1; i <= 4; i++ {
		r := h.tick()
		if r.Signals&report.SignalInFlight == 0 || r.Conns != 41 || r.CPUUtil != first.CPUUtil || r.Seq != first.Seq+uint64(i) ||
			r.Flags != report.FlagHealthOK || !r.Time.Equal(first.Time.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("in-flight report %d: %+v", i, r)
		}
	}
	if r := h.tick(); r.Signals&report.SignalInFlight != 0 || r.Conns != 17 {
		t.Fatalf("the full report at 10 s: %+v", r)
	}
	counts.set(result{sample.Values{}, errors.New("sock_diag: boom")})
	// Read the count once the agent waits again: the test receives a report when the sender
	// has it, before the agent counts it as sent.
	d := <-h.clk.Started()
	sent := h.a.Stats.Sent.Load()
	h.clk.Advance(d) // a failed count: nothing sent
	if d != time.Second {
		t.Fatalf("wait %v", d)
	}
	if d := <-h.clk.Started(); d != time.Second || h.a.Stats.Sent.Load() != sent {
		t.Fatalf("after a failed count: wait %v, sent %d (was %d)", d, h.a.Stats.Sent.Load(), sent)
	}
}

// TestTimedOutCheckCountsAfresh: a check that times out between two samples (the fast pace)
// carries a fresh connection count, not the held one, so the collector sees the load the
// late answer queued behind.
func TestTimedOutCheckCountsAfresh(t *testing.T) {
	counts := &script{results: []result{{sample.Values{Known: sample.FieldConns, Conns: 44}, nil}}}
	late := health.Result{Latency: 100 * time.Millisecond, Err: "GET http://127.0.0.1:8080/health: timeout"}
	h := start(t, func(a *Agent) {
		a.Jitter = 0
		a.Health = fakeHealth{late}
		a.FastInterval, a.FastRise = 100*time.Millisecond, 2
		a.InFlight = counts // in-flight reports off (no interval): only the fresh count on a timeout
	})
	// The full tick's sampler says 17 (a count reused for conns_interval, say), the fresh
	// count 44: a timed-out check reports 44, at the full tick and at the fast pace after it.
	first := h.tick()
	if first.Conns != 44 {
		t.Fatalf("full report after a timeout: conns %d", first.Conns)
	}
	counts.set(result{sample.Values{Known: sample.FieldConns, Conns: 45}, nil})
	fast := h.tick()
	if fast.Conns != 45 || fast.Signals&report.SignalInFlight != 0 {
		t.Fatalf("fast-pace report after a timeout: %+v", fast)
	}
}

// TestFastPaceWithInFlightReports: in-flight reports every 50 ms between checks at the fast
// pace (100 ms) do not push the checks back: a failing service is still checked every 100 ms.
// (The fast pace used to count from the last wake-up, so every in-flight report restarted it
// and the checks starved.)
func TestFastPaceWithInFlightReports(t *testing.T) {
	counts := &script{results: []result{{sample.Values{Known: sample.FieldConns, Conns: 5}, nil}}}
	h := start(t, func(a *Agent) {
		a.Jitter = 0
		a.Health = fakeHealth{health.Result{Status: 503, Latency: time.Millisecond, Err: "GET http://127.0.0.1/health: status 503"}}
		a.FastInterval, a.FastRise = 100*time.Millisecond, 2
		a.InFlightInterval, a.InFlight = 50*time.Millisecond, counts
	})
	first := h.tick() // the full tick at 5 s: the check fails, the fast pace starts
	if first.HealthStatus != 503 {
		t.Fatalf("first report %+v", first)
	}
	checks := 0
	for range 12 { // 600 ms at 50 ms steps
		r := h.tick()
		if r.Signals&report.SignalInFlight == 0 {
			checks++
			if d := r.Time.Sub(first.Time); d%(100*time.Millisecond) != 0 {
				t.Fatalf("a check at %v after the first, not on the 100 ms pace", d)
			}
		}
	}
	if checks != 6 {
		t.Fatalf("%d checks in 600 ms at the fast pace, want 6", checks)
	}
}

// TestInFlightWayLoggedOnChange: how the in-flight count is taken is logged when it changes
// (the namespace's running count, then exact counts after the calibration gave up), not at
// every report.
func TestInFlightWayLoggedOnChange(t *testing.T) {
	netns := sample.Values{Known: sample.FieldConns, Conns: 3, ConnsVia: sample.ConnsViaNetns}
	counts := &script{results: []result{{netns, nil}}}
	h := start(t, func(a *Agent) {
		a.Jitter = 0
		a.InFlightInterval, a.InFlight = time.Second, counts
	})
	h.tick() // the first full report
	for range 3 {
		h.tick()
	}
	counts.set(result{sample.Values{Known: sample.FieldConns, Conns: 4, ConnsVia: "sock_diag (the namespace's running count was off)"}, nil})
	h.tick()
	h.tick()
	logs := h.logText()
	if n := strings.Count(logs, `msg="in-flight connections counted"`); n != 2 {
		t.Fatalf("logged %d times, want 2 (one per way):\n%s", n, logs)
	}
	if !strings.Contains(logs, "running count was off") {
		t.Fatalf("the change to exact counts is not logged:\n%s", logs)
	}
}

// TestTimedOutCheckRecountsEstablishedOnly: with Recount set, a timed-out check's fresh count
// is Recount's (exact, ESTABLISHED only), not the in-flight count's, which also counts the
// CLOSE_WAIT connections a hung service never closes: those would make it look busy.
func TestTimedOutCheckRecountsEstablishedOnly(t *testing.T) {
	inflight := &script{results: []result{{sample.Values{Known: sample.FieldConns, Conns: 44}, nil}}}
	exact := &script{results: []result{{sample.Values{Known: sample.FieldConns, Conns: 0, ConnsVia: sample.ConnsViaNetlink}, nil}}}
	late := health.Result{Latency: 100 * time.Millisecond, Err: "GET http://127.0.0.1:8080/health: timeout"}
	h := start(t, func(a *Agent) {
		a.Jitter = 0
		a.Health = fakeHealth{late}
		a.InFlight, a.Recount = inflight, exact
	})
	if r := h.tick(); r.Conns != 0 {
		t.Fatalf("a timed-out check's report: conns %d, want Recount's 0 (the in-flight count says 44)", r.Conns)
	}
}
