package sim

import (
	"fmt"
	"io"
	"time"

	"flowweight/weights"
)

// Health is the probes' health checks and what the controller makes of a late answer
// (Config.Health). A check is answered when a server of its backend is free: it queues
// behind the jobs there, as the lab's checks queue behind real requests, so a loaded
// backend answers late, and the check fails when that wait passes Timeout. This is the
// mechanism the lab's first 80 % runs evicted healthy backends by (docs/weights.md, "Busy is
// not dead"); without it the simulator could not show that cascade, nor whether the rule
// that ended it holds.
type Health struct {
	Interval, Timeout time.Duration
	Fails, Rise       int // timeouts in a row that evict; good checks in a row that return
	// BusyNotDead is the collector's rule: a timeout on a busy backend marks it slow
	// (weights.Backend.Slow) and counts neither way, and a backend slow for SlowEvictAfter is
	// evicted only while fewer than half of the live backends are slow. Without it every
	// timeout counts toward Fails, as before the rule.
	BusyNotDead    bool
	SlowEvictAfter time.Duration
}

func (h Health) on() bool { return h.Interval > 0 }

// The collector's busy thresholds (collector/pool.go, busy): a backend whose smoothed CPU,
// connections or fresh in-flight count say it carries load. The simulator may not import
// the collector (weights/sim is pure), so its thresholds are repeated here.
const (
	busyCPU         = 0.5
	busyConnections = 1
	busyInFlightAge = 1.0 // seconds
)

// longAgo is when the backends up at a run's start began warming: long enough ago for any
// ramp to be over, near enough for its WarmupElapsed to fit a time.Duration.
const longAgo = -1e6 // seconds

// health is one backend's check state, the collector's for that backend.
type health struct {
	status    weights.Status
	fails     int
	oks       int
	slowRun   int // late checks while busy in a row: the slow clock runs from the first
	slow      bool
	slowSince float64
	warmFrom  float64 // when it last began warming
	next      float64 // its next check
	// Checks sent and not yet judged, oldest first: a check is known good when it is
	// answered, late only when its timeout has passed, and under FCFS both come in the order
	// the checks were sent (a server's free time only moves on).
	pending []checkResult
}

// checkResult is one check's outcome and when the probe knows it.
type checkResult struct {
	at   float64
	late bool
}

// event is when backend h's next health event happens: a check's outcome becoming known, or
// its next check being sent.
func (h *health) event() float64 {
	if len(h.pending) > 0 && h.pending[0].at <= h.next {
		return h.pending[0].at
	}
	return h.next
}

// wait is how long a check arriving at t waits for a server of st: behind every job
// assigned to that server (FCFS), and under a quota behind their throttling too.
func (st *station) wait(t float64) float64 {
	j := 0
	for i := 1; i < st.k; i++ {
		if st.free[i] < st.free[j] {
			j = i
		}
	}
	return max(st.free[j]-t, 0)
}

// healthEvent runs backend i's next health event, at t (h.event()).
func (s *sim) healthEvent(i int, t float64) {
	h := &s.health[i]
	if len(h.pending) > 0 && h.pending[0].at <= h.next {
		r := h.pending[0]
		h.pending = h.pending[1:]
		s.judge(i, t, r.late)
		return
	}
	timeout := s.cfg.Health.Timeout.Seconds()
	wait := s.bs[i].wait(t)
	h.pending = append(h.pending, checkResult{at: t + min(wait, timeout), late: wait > timeout})
	h.next += s.cfg.Health.Interval.Seconds()
}

// judge is the collector's check for backend i: a check's outcome known at t.
func (s *sim) judge(i int, t float64, late bool) {
	cfg := s.cfg.Health
	h := &s.health[i]
	switch {
	case !late:
		h.oks++
		h.fails, h.slowRun = 0, 0
		if h.slow && h.oks >= cfg.Rise {
			h.slow = false
		}
		if h.status == weights.StatusDown && h.oks >= cfg.Rise {
			h.status, h.warmFrom = weights.StatusWarming, t
		}
	case cfg.BusyNotDead && s.busy(i, t):
		// As the collector's: any answer in time or real failure restarts the clock, so
		// slow_evict_after is a stretch with no check answered at all.
		if h.slowRun == 0 {
			h.slowSince = t
		}
		h.slowRun++
		h.slow, h.oks = true, 0
		if h.status.Live() && t-h.slowSince >= cfg.SlowEvictAfter.Seconds() && s.slowOutlier() {
			s.evict(i, t)
		}
	default:
		h.fails++
		h.oks, h.slowRun = 0, 0
		if h.status.Live() && h.fails >= cfg.Fails {
			s.evict(i, t)
		}
	}
}

// busy is the collector's busy for backend i at t: its smoothed CPU or connections, or
// with the probes' in-flight counts (Config.InFlightReport) a count of at least one taken in
// the last busyInFlightAge. The collector's throttling and pressure thresholds have no
// counterpart here (the simulator's probes report neither).
func (s *sim) busy(i int, t float64) bool {
	cpu, _ := s.pipe.cpu[i].Value()
	conns, _ := s.pipe.conns[i].Value()
	if cpu >= busyCPU || conns >= busyConnections {
		return true
	}
	if cs := s.counts[i]; len(cs) > 0 {
		c := cs[len(cs)-1]
		return t-c.t <= busyInFlightAge && c.n >= busyConnections
	}
	return false
}

// slowOutlier reports whether fewer than half of the live backends are slow.
func (s *sim) slowOutlier() bool {
	live, slow := 0, 0
	for _, h := range s.health {
		if h.status.Live() {
			live++
			if h.slow {
				slow++
			}
		}
	}
	return 2*slow < live
}

// evict takes backend i out at t, at once, as the controller's update on a transition does
// (one rewrite): its weight in force goes to 0, and the next period's Compute sees it down.
// The last backend with weight keeps it: the dispatcher must send each job somewhere (the
// controller's panic rule would spread the weight over the backends that had it).
func (s *sim) evict(i int, t float64) {
	h := &s.health[i]
	h.status, h.slow, h.slowRun = weights.StatusDown, false, 0
	if t >= s.warm {
		s.evictions = append(s.evictions, t)
		s.pipe.rewritesWindow++
	}
	s.pipe.rewrites++
	for _, w := range [][]uint16{s.pipe.applied, s.fastW} {
		if len(w) == 0 {
			continue
		}
		old := w[i]
		w[i] = 0
		total := 0
		for _, x := range w {
			total += int(x)
		}
		if total == 0 {
			w[i] = old
		}
	}
	if len(s.fastW) > 0 {
		s.disp.setWeights(s.fastW)
	} else {
		s.disp.setWeights(s.pipe.applied)
	}
}

// healthInput sets in's status, warm-up and slowness from backend i's checks at t; a
// warming backend whose Tuning.Warmup has passed is up.
func (s *sim) healthInput(i int, t float64, in *weights.Backend) {
	h := &s.health[i]
	if h.status == weights.StatusWarming && t-h.warmFrom >= s.cfg.Tuning.Warmup.Seconds() {
		h.status = weights.StatusUp
	}
	in.Status, in.Slow = h.status, h.slow
	if h.status.Live() {
		in.WarmupElapsed = time.Duration((t - h.warmFrom) * float64(time.Second))
	}
}

// HealthTimeouts are the check timeouts the health table tries: two tight ones, the lab's
// 1 s runs and the probe's default (2 s).
var HealthTimeouts = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// LabHealth is the lab's checks: every 100 ms, fail_threshold 3, rise_threshold 2, and the
// collector's default slow_evict_after.
func LabHealth(timeout time.Duration, busyNotDead bool) Health {
	return Health{Interval: 100 * time.Millisecond, Timeout: timeout, Fails: 3, Rise: 2,
		BusyNotDead: busyNotDead, SlowEvictAfter: 30 * time.Second}
}

// HealthChecks runs the health table on the lab's pool under CFS quotas at 80 and 95 %:
// per-request least connections, headroom every second without checks, and with the lab's
// checks at each HealthTimeouts, once counting every timeout toward eviction (before "busy is
// not dead") and once by the collector's rule.
func HealthChecks(o TableOptions) ([]FastLoopRow, error) {
	lt := newLabTable(o)
	add := func(load float64, label string, c Config) { lt.add("CFS quota", FastLoopPoolCFS, load, label, 0, c) }
	headroom := Config{Policy: Headroom, ServiceCPU: true, Sample: time.Second, Update: time.Second}
	for _, load := range FastLoopLoads[1:] {
		add(load, "least connections, per request", Config{Policy: LeastConn})
		add(load, "headroom every 1s, no health checks", headroom)
		for _, to := range HealthTimeouts {
			c := headroom
			c.Health = LabHealth(to, false)
			add(load, fmt.Sprintf("headroom, checks timing out at %v: every timeout counts toward eviction", to), c)
			c.Health = LabHealth(to, true)
			add(load, fmt.Sprintf("headroom, checks timing out at %v: busy is not dead", to), c)
		}
	}
	return lt.run()
}

// WriteHealthChecks prints the health table: p99, its ratio to per-request least connections,
// and the evictions.
func WriteHealthChecks(w io.Writer, rows []FastLoopRow) {
	fmt.Fprintln(w, "| load | dispatch | mean ms | p99 ms | p99 / per-request least connections | evictions per minute |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|")
	for i, c := range labCells(rows) {
		r := rows[i]
		ev := meanOf(r.Runs, func(x Result) float64 { return 60 * float64(len(x.Evictions)) / max(x.Window, 1) })
		fmt.Fprintf(w, "| %.0f %% | %s | %.1f | %.1f | %s | %.1f |\n", 100*r.Load, r.Label, c.mean, c.p99, c.ratio, ev)
	}
}
