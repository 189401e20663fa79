package collector

import (
	"strconv"
	"time"

	"flowweight/weights"
)

// Bounds on one backend's state-change noise. A probe decides its own drain and health flags,
// so one holding a valid key can change its backend's state with every report (thousands a
// second); the state follows each report, but the log, the event list and the early updates
// those changes ask for must not. Each backend may have TransitionBurst changes logged in a
// row, then one per TransitionEvery; the changes in between are passed to OnTransition as
// Quiet, and counted in the next logged one's Suppressed. When a run of quiet changes ends, the
// next Tick with budget logs a catch-up line from the state last logged to the current one, so
// the log always ends on the backend's real state.
const (
	TransitionBurst = 5
	TransitionEvery = 10 * time.Second
)

// transitionBudget is a backend's token bucket of logged changes, and what it suppressed.
type transitionBudget struct {
	tokens   float64
	last     time.Time // of the last refill; zero: full
	quiet    uint64    // changes not logged since the last logged one
	loggedTo weights.Status
}

// take reports whether a change may be logged now, and takes a token if so.
func (t *transitionBudget) take(now time.Time) bool {
	if t.last.IsZero() {
		t.tokens = TransitionBurst
	} else if d := now.Sub(t.last); d > 0 { // a clock stepping back refills nothing
		t.tokens = min(TransitionBurst, t.tokens+float64(d)/float64(TransitionEvery))
	}
	t.last = now
	if t.tokens < 1 {
		return false
	}
	t.tokens--
	return true
}

// emit logs t and passes it to OnTransition, unless b's budget is spent: then t goes to
// OnTransition as Quiet only. Called with the pool locked.
func (p *Pool) emit(b *backend, t Transition) {
	if !b.budget.take(t.Time) {
		b.budget.quiet++
		t.Quiet = true
	} else {
		t.Suppressed, b.budget.quiet = b.budget.quiet, 0
		b.budget.loggedTo = t.To
		args := []any{"backend", t.Backend, "from", t.From.String(), "to", t.To.String(), "reason", t.Reason}
		if t.Suppressed > 0 {
			args = append(args, "suppressed", t.Suppressed)
		}
		p.cfg.Logger.Info("backend state", args...)
	}
	if p.cfg.OnTransition != nil {
		p.cfg.OnTransition(t)
	}
}

// catchUp logs, once b's budget allows, where a run of quiet changes left it. Called by tick
// with the pool locked.
func (p *Pool) catchUp(b *backend, now time.Time) {
	if b.budget.quiet == 0 || !b.budget.take(now) {
		return
	}
	t := Transition{Time: now, Backend: b.st.Name, From: b.budget.loggedTo, To: b.st.Status, Catchup: true,
		Suppressed: b.budget.quiet,
		Reason:     strconv.FormatUint(b.budget.quiet, 10) + " state changes not logged (more than " + strconv.Itoa(TransitionBurst) + " in a row, then one per " + TransitionEvery.String() + ", per backend)"}
	b.budget.quiet, b.budget.loggedTo = 0, t.To
	p.cfg.Logger.Info("backend state", "backend", t.Backend, "from", t.From.String(), "to", t.To.String(), "reason", t.Reason, "suppressed", t.Suppressed)
	if p.cfg.OnTransition != nil {
		p.cfg.OnTransition(t)
	}
}
