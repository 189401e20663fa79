package collector

import (
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
	"flowweight/weights"
)

// lateRep is a report of a failed health check: err is the probe's health_error, status the
// HTTP status (0: no answer); busy says whether the report's own load shows work.
func lateRep(id string, busy bool, status uint16, err string) *report.Report {
	r := &report.Report{BackendID: id, CPUUtil: 0.05, CPUCount: 1, MemUtil: 0.2, MemBytes: 1 << 30, HealthStatus: status, HealthError: err}
	if busy {
		r.CPUUtil, r.Conns = 0.97, 40
	}
	return r
}

// upPool3 returns a pool of a, b and c, all up.
func upPool3(t *testing.T) (*testutil.Clock, *Pool, *[]Transition) {
	t.Helper()
	c := testutil.NewClock(testutil.Start)
	tr := &[]Transition{}
	p := NewPool(Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: 15 * time.Second, Warmup: time.Second,
		Alpha: 0.5, Now: c.Now, OnTransition: func(x Transition) { *tr = append(*tr, x) }})
	p.SetBackends([]string{"a", "b", "c"})
	for _, n := range []string{"a", "b", "c"} {
		p.Accept(rep(n, true), from)
	}
	c.Advance(2 * time.Second)
	for _, n := range []string{"a", "b", "c"} {
		p.Accept(rep(n, true), from)
		if got := status(t, p, n); got != weights.StatusUp {
			t.Fatalf("setup: %s %v", n, got)
		}
	}
	*tr = nil
	return c, p, tr
}

// TestBusyIsNotDead: a check that times out on a busy backend is load, not death; what
// proves death still evicts in fail_threshold checks.
func TestBusyIsNotDead(t *testing.T) {
	const timeout = "GET http://127.0.0.1:8080/healthz: timeout"
	for _, tc := range []struct {
		name      string
		busy      bool
		status    uint16
		err       string
		checks    int // failed checks, 100 ms apart (the probe's fast interval)
		wantDown  bool
		wantSlow  bool
		reasonHas string
	}{
		{"busy, timeouts", true, 0, timeout, 50, false, true, ""},
		{"busy, tcp connect timeouts", true, 0, "tcp connect 127.0.0.1:9000: timeout", 50, false, true, ""},
		{"busy, body stalls", true, 200, "GET http://127.0.0.1:8080/healthz: reading body: timeout", 3, true, false, "failed 3 times"},
		{"idle, timeouts", false, 0, timeout, 3, true, false, "failed 3 times"},
		{"busy, refused", true, 0, "GET http://127.0.0.1:8080/healthz: connect: connection refused", 3, true, false, "refused"},
		{"busy, reset", true, 0, "GET http://127.0.0.1:8080/healthz: read: connection reset by peer", 3, true, false, "reset"},
		{"busy, 503", true, 503, "GET http://127.0.0.1:8080/healthz: status 503 Service Unavailable", 3, true, false, "503"},
		{"busy, a URL that merely says timeout", true, 0, "GET http://timeout/: connection refused", 3, true, false, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, p, tr := upPool3(t)
			// A second of healthy reports with the same load first: busy is judged on the
			// smoothed signals, as the weights are.
			for range 10 {
				c.Advance(100 * time.Millisecond)
				r := lateRep("a", tc.busy, 200, "")
				r.Flags |= report.FlagHealthOK
				p.Accept(r, from)
			}
			for range tc.checks {
				c.Advance(100 * time.Millisecond)
				p.Accept(lateRep("a", tc.busy, tc.status, tc.err), from)
			}
			st, _ := p.Get("a")
			if down := status(t, p, "a") == weights.StatusDown; down != tc.wantDown {
				t.Fatalf("after %d failed checks: status %v, want down=%v (transitions %+v)", tc.checks, st.Status, tc.wantDown, *tr)
			}
			if st.Slow != tc.wantSlow {
				t.Fatalf("slow %v, want %v", st.Slow, tc.wantSlow)
			}
			if tc.wantDown && (len(*tr) != 1 || !contains((*tr)[0].Reason, tc.reasonHas)) {
				t.Fatalf("transitions %+v, want one naming %q", *tr, tc.reasonHas)
			}
			if !tc.wantDown && len(*tr) != 0 {
				t.Fatalf("a busy backend changed state: %+v", *tr)
			}
		})
	}
}

// TestSlowClearsAfterRiseThreshold: slowness has hysteresis: one good answer does not end it.
func TestSlowClearsAfterRiseThreshold(t *testing.T) {
	c, p, _ := upPool3(t)
	late := lateRep("a", true, 0, "GET http://127.0.0.1:8080/healthz: timeout")
	for _, step := range []struct {
		r    *report.Report
		slow bool
	}{{late, true}, {rep("a", true), true}, {late, true}, {rep("a", true), true}, {rep("a", true), false}} {
		c.Advance(100 * time.Millisecond)
		p.Accept(step.r, from)
		if st, _ := p.Get("a"); st.Slow != step.slow {
			t.Fatalf("after %+v: slow %v, want %v", step.r.HealthError, st.Slow, step.slow)
		}
	}
}

// TestSlowOutlierEvictedAfterSlowEvictAfter: a busy backend that answers no check for
// SlowEvictAfter goes, as an outlier; when the whole pool is that slow, nobody goes.
func TestSlowOutlierEvictedAfterSlowEvictAfter(t *testing.T) {
	const timeout = "GET http://127.0.0.1:8080/healthz: timeout"
	for _, tc := range []struct {
		name     string
		slow     []string
		wantDown bool
	}{
		{"one of three", []string{"a"}, true},
		{"two of three: overload, not an outlier", []string{"a", "b"}, false},
		{"all three", []string{"a", "b", "c"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, p, tr := upPool3(t)
			for elapsed := time.Duration(0); elapsed <= DefaultSlowEvictAfter+time.Second; elapsed += 500 * time.Millisecond {
				c.Advance(500 * time.Millisecond)
				for _, n := range []string{"a", "b", "c"} {
					r := rep(n, true)
					for _, s := range tc.slow {
						if s == n {
							r = lateRep(n, true, 0, timeout)
						}
					}
					p.Accept(r, from)
				}
				if elapsed < DefaultSlowEvictAfter-time.Second && len(*tr) != 0 {
					t.Fatalf("at %v: %+v, before slow_evict_after", elapsed, *tr)
				}
			}
			if down := status(t, p, "a") == weights.StatusDown; down != tc.wantDown {
				t.Fatalf("a down=%v, want %v (transitions %+v)", down, tc.wantDown, *tr)
			}
			if tc.wantDown && (len(*tr) != 1 || !contains((*tr)[0].Reason, "while busy")) {
				t.Fatalf("transitions %+v", *tr)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestInFlightReports: an in-flight report sets the count and proves the probe alive, and
// changes neither the smoothed load nor the health machine; ReadInFlight ages it out.
func TestInFlightReports(t *testing.T) {
	c, p, tr := upPool3(t)
	before, _ := p.Get("a")
	r := lateRep("a", true, 0, "GET http://127.0.0.1:8080/healthz: connect: connection refused")
	r.Conns = 17
	r.Signals |= report.SignalInFlight
	for range 5 { // five failing-looking in-flight reports: not health checks
		c.Advance(50 * time.Millisecond)
		p.Accept(r, from)
	}
	st, _ := p.Get("a")
	if st.Status != weights.StatusUp || st.ConsecFail != 0 || st.CPU != before.CPU || st.Conns != before.Conns || len(*tr) != 0 {
		t.Fatalf("in-flight reports moved state: %+v (before %+v), transitions %+v", st, before, *tr)
	}
	if st.InFlight != 17 || !st.InFlightAt.Equal(c.Now()) || !st.LastReport.Equal(c.Now()) {
		t.Fatalf("in flight %v at %v, last report %v; want 17 at %v", st.InFlight, st.InFlightAt, st.LastReport, c.Now())
	}
	got := p.ReadInFlight(nil, []string{"a", "b", "nope"}, 100*time.Millisecond)
	if len(got) != 3 || !got[0].OK || got[0].N != 17 || got[1].OK || got[2].OK {
		t.Fatalf("ReadInFlight %+v", got)
	}
	c.Advance(101 * time.Millisecond)
	if got := p.ReadInFlight(nil, []string{"a"}, 100*time.Millisecond); got[0].OK {
		t.Fatalf("a reading older than maxAge: %+v", got)
	}
	// A probe whose full reports stopped is stale after stale_after, in-flight reports or not?
	// No: in-flight reports prove it alive; it stays up on its last health check.
	for range 20 {
		c.Advance(time.Second)
		p.Accept(r, from)
	}
	if got := status(t, p, "a"); got != weights.StatusUp {
		t.Fatalf("with in-flight reports flowing: %v", got)
	}
}

// TestFreshInFlightSaysBusy: at a load step the smoothed load still reads idle; a fresh
// in-flight count says the backend is busy, so its late checks do not evict it.
func TestFreshInFlightSaysBusy(t *testing.T) {
	c, p, tr := upPool3(t)
	for range 10 { // idle and healthy: the smoothed load reads idle
		c.Advance(100 * time.Millisecond)
		r := lateRep("a", false, 200, "")
		r.Flags |= report.FlagHealthOK
		p.Accept(r, from)
	}
	inflight := lateRep("a", false, 0, "")
	inflight.Signals, inflight.Conns = report.SignalInFlight, 30
	for range 5 {
		c.Advance(50 * time.Millisecond)
		p.Accept(inflight, from)
		c.Advance(50 * time.Millisecond)
		p.Accept(lateRep("a", false, 0, "GET http://127.0.0.1:8080/health: timeout"), from)
	}
	if st, _ := p.Get("a"); st.Status != weights.StatusUp || !st.Slow || len(*tr) != 0 {
		t.Fatalf("a: %v slow %v, transitions %+v", st.Status, st.Slow, *tr)
	}
	// Without fresh counts (a second later) the same idle reports' timeouts evict.
	c.Advance(2 * time.Second)
	for range 3 {
		c.Advance(100 * time.Millisecond)
		p.Accept(lateRep("a", false, 0, "GET http://127.0.0.1:8080/health: timeout"), from)
	}
	if got := status(t, p, "a"); got != weights.StatusDown {
		t.Fatalf("idle and late without a fresh count: %v", got)
	}
}
