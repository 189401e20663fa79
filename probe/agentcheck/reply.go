package agentcheck

import (
	"math"
	"strconv"
	"strings"

	"flowweight/internal/report"
)

// MaxReason bounds the description HAProxy gets with a "down" reply (after '#'). HAProxy
// keeps it in its check status and logs; a long one is only noise there.
const MaxReason = 100

// Status is what the agent reports about the backend.
type Status struct {
	// Healthy is the latest health check's result; the probe applies no consecutive-failure
	// count of its own (that is the collector's job), so HAProxy sees each failure at once.
	Healthy bool
	// Drained: the operator asked for no new connections (drain file or SIGUSR1).
	Drained bool
	// Percent is the weight percentage, 0-100, sent when healthy and not drained.
	Percent int
	// Reason says why the backend is down, e.g. the health check's error. Optional.
	Reason string
}

// Reply is the agent's answer to HAProxy: one line of words, ended by "\n".
//
// Every reply states both the operational word ("up"/"down") and the administrative one
// ("ready"/"drain"), because HAProxy changes only what a reply names and only the agent can
// revert what the agent set: a reply that said "drain" must later be followed by "ready",
// and one that said "down" by "up". Stating everything each time means a missed reply or a
// restart of either side never leaves a stale drain or down behind.
//
//	healthy, not drained:  "up ready 73%\n"
//	healthy, drained:      "up drain\n"           (the weight is left as it was)
//	unhealthy:             "down ready #reason\n" or "down drain #reason\n"
//
// HAProxy takes a description only after a '#' that starts a word, hence the space before
// it. The reason is cut to MaxReason bytes of printable ASCII.
func Reply(s Status) string {
	var b strings.Builder
	b.Grow(32)
	if s.Healthy {
		b.WriteString("up ")
	} else {
		b.WriteString("down ")
	}
	if s.Drained {
		b.WriteString("drain")
	} else {
		b.WriteString("ready")
	}
	if s.Healthy && !s.Drained {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(min(max(s.Percent, 0), 100)))
		b.WriteByte('%')
	}
	if !s.Healthy {
		if r := sanitize(s.Reason); r != "" {
			b.WriteString(" #")
			b.WriteString(r)
		}
	}
	b.WriteByte('\n')
	return b.String()
}

// sanitize keeps printable ASCII (a CR or LF would end HAProxy's line early) and cuts to
// MaxReason bytes.
func sanitize(s string) string {
	out := make([]byte, 0, min(len(s), MaxReason))
	for i := 0; i < len(s) && len(out) < MaxReason; i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		out = append(out, c)
	}
	return strings.TrimSpace(string(out))
}

// Weigher turns a report's measurements into a weight percentage:
//
//	LS      = CPU·cpu_util + Mem·mem_util + Conn·min(1, conns/MaxConns)
//	percent = max(Floor, round(100·(1 − LS)))
//
// CPU, Mem and Conn are coefficients that sum to 1 (probe/config validates them), so LS is a
// utilisation in [0,1]. Floor keeps a healthy, busy server in rotation: taking it out is the
// health check's and the operator's decision, not the load's.
type Weigher struct {
	CPU, Mem, Conn float64
	MaxConns       int // connections counted as full load; 0 with Conn 0
	Floor          int // percent, 0-100
}

// Load is the composite load LS of r, in [0,1].
func (w Weigher) Load(r *report.Report) float64 {
	ls := w.CPU*unit(r.CPUUtil) + w.Mem*unit(r.MemUtil)
	if w.Conn > 0 && w.MaxConns > 0 {
		ls += w.Conn * min(float64(r.Conns)/float64(w.MaxConns), 1)
	}
	return unit(ls)
}

// Percent is the weight percentage for r, in [Floor, 100].
func (w Weigher) Percent(r *report.Report) int {
	p := int(math.Round(100 * (1 - w.Load(r))))
	return min(max(p, w.Floor, 0), 100)
}

// Status is what the agent answers after the probe sent r.
//
// The leaving flag of a stopping probe's last report does not drain: HAProxy keeps the last
// answer while the agent cannot be reached, and a drain that only the agent can undo would
// outlive a probe that is not restarted. The collector, which does act on leaving, is the
// other consumer of the same report.
func (w Weigher) Status(r *report.Report) Status {
	s := Status{
		Healthy: r.Flags&report.FlagHealthOK != 0,
		Drained: r.Flags&report.FlagDrain != 0,
		Percent: w.Percent(r),
	}
	if !s.Healthy {
		s.Reason = "health check failed"
		if r.HealthError != "" {
			s.Reason += ": " + r.HealthError
		}
	}
	return s
}

// unit clamps v to [0,1]; NaN counts as fully loaded.
func unit(v float64) float64 {
	if v != v {
		return 1
	}
	return min(max(v, 0), 1)
}
