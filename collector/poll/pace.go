package poll

import "time"

// checkPace schedules the polls of one SNMP backend and the collector's own health checks of
// it. Every interval it polls SNMP and, when the poll succeeds, runs the health check. After
// a failed check it runs the check alone every fast, until rise checks in a row have passed
// (HAProxy's fastinter): the pool needs fail_threshold failed checks in a row, and at the
// poll interval those would take whole intervals. Polls keep their period: SNMP is the
// heavier request, and the load it reads is smoothed per poll.
//
// It is a pure schedule, fed the clock and the results, so that it is tested without an
// SNMP agent; Runner.run drives it.
type checkPace struct {
	interval, fast time.Duration
	rise           int

	nextPoll time.Time // zero: poll at once
	left     int       // passing checks still to make at the fast pace
	paced    bool      // the last step was made at the fast pace
}

// newCheckPace returns a schedule whose first step polls. fast not below interval, or not
// positive, switches the fast pace off; rise below 1 counts as 1.
func newCheckPace(interval, fast time.Duration, rise int) *checkPace {
	return &checkPace{interval: interval, fast: fast, rise: max(rise, 1)}
}

func (p *checkPace) fastOn() bool { return p.fast > 0 && p.fast < p.interval }

// step starts a step at now and reports whether it polls (true) or only checks health.
func (p *checkPace) step(now time.Time) (poll bool) {
	p.paced = p.fastOn() && p.left > 0
	poll = !p.paced || !now.Before(p.nextPoll)
	if poll {
		p.nextPoll = now.Add(p.interval)
	}
	return poll
}

// checked records a health check's result: a failure (re)starts the fast pace, a pass counts
// one off it.
func (p *checkPace) checked(ok bool) {
	if ok {
		p.left = max(p.left-1, 0)
	} else {
		p.left = p.rise
	}
}

// pollFailed ends the fast pace: a failed poll counts as a failed check, and passing health
// checks between polls would then hide an SNMP agent that is gone. Its outage is judged at
// the poll interval, as without the fast pace.
func (p *checkPace) pollFailed() { p.left = 0 }

// wait is how long to sleep after a step that ended at now. At the fast pace it is fast,
// counted from the end of the step, so two checks never come closer; otherwise until the next
// poll, and still at least fast when the fast pace has just ended.
func (p *checkPace) wait(now time.Time) time.Duration {
	if p.fastOn() && p.left > 0 {
		return p.fast
	}
	w := p.nextPoll.Sub(now)
	if p.paced {
		return max(w, p.fast)
	}
	return max(w, 0)
}
