package balancer

import (
	"context"
	"slices"
	"time"

	"flowweight/collector"
	"flowweight/weights"
)

// The fast loop (docs/weights.md, "The fast loop: work in flight"). The update loop computes
// each service's weights once per update period from smoothed load; between updates, every
// weighting.in_flight_period, followLoop corrects those weights by each backend's work in
// flight from the probes' in-flight reports (weights.FollowInFlight) and hands the switches a
// new intent when the corrected weights changed. Both loops hold b.updating, so the intent is
// built by one of them at a time, and the switches' syncers stay their only writers.

// inFlightMaxAge is how old an in-flight count may be and still steer the fast loop: a few of
// the probes' in-flight intervals, and never below 250 ms, so one late datagram does not
// drop a backend back to its slow share while another's count is fresh.
func inFlightMaxAge(period time.Duration) time.Duration {
	return max(5*period, 250*time.Millisecond)
}

// out is what the service's group should hold: the fast loop's weights while it follows work
// in flight, the slow loop's otherwise.
func (s *service) out() []uint16 {
	if s.followed != nil {
		return s.followed
	}
	return s.applied
}

// follows reports whether the fast loop steers the service now: a period and an adaptive
// policy are configured, the service keeps connections across reweights (conntrack mode: in
// stateless mode every rewrite re-hashes the connections of the slots it moves, so tens a
// second would break them all), the switch's group dispatches (in reactive dispatch the
// controller follows work in flight per connection already), its weights were written once, it is not held, and this
// controller writes (a standby follows the switch instead).
func (s *service) follows(standby bool) bool {
	return s.tuning.FollowsInFlight() && s.cfg.Mode != "stateless" && s.cfg.Dispatch != "reactive" && s.applied != nil && !s.hold && !standby
}

// follow recomputes the fast weights from n (one per backend, in config order) and reports
// whether they changed by more than the fast loop's dead-band (weighting.in_flight_dead_band)
// since the last written ones.
func (s *service) follow(n []weights.InFlight, now time.Time) bool {
	if s.tuning.InFlightReference == weights.InFlightOwn {
		s.inflightMean.Apply(n, now)
	}
	s.inflight = append(s.inflight[:0], n...)
	weights.FollowInFlight(s.applied, n, &s.fast)
	next := s.fast.Weights(s.followNext[:0])
	s.followNext = next
	// Back to the slow weights (the queues evened out, the counts aged) is always written.
	if s.followed != nil && (slices.Equal(next, s.followed) ||
		!slices.Equal(next, s.applied) && !weights.MovedBeyond(s.followed, next, s.tuning.InFlightDeadBand)) {
		return false
	}
	s.followed = append(s.followed[:0:0], next...)
	return true
}

// unfollow drops the fast weights; it reports whether there were any.
func (s *service) unfollow() bool {
	had := s.followed != nil
	s.followed, s.inflight = nil, s.inflight[:0]
	s.inflightMean.Reset()
	return had
}

// inFlightFromStates is the in-flight counts of s's backends in a snapshot, as ReadInFlight
// would give them at now.
func (s *service) inFlightFromStates(states map[string]*collector.State, now time.Time, maxAge time.Duration) []weights.InFlight {
	n := make([]weights.InFlight, len(s.cfg.Backends))
	for j, be := range s.cfg.Backends {
		if st := states[be.Name]; st != nil && !st.InFlightAt.IsZero() {
			if age := now.Sub(st.InFlightAt); age >= 0 && age <= maxAge {
				n[j] = weights.InFlight{N: st.InFlight, OK: true, Failing: st.ConsecFail > 0}
			}
		}
	}
	return n
}

// followLoop runs the fast loop until ctx ends. With the loop switched off it only watches the
// configuration for a period to run at.
func (b *Balancer) followLoop(ctx context.Context) {
	const idle = time.Second
	period := b.Config().Weighting.InFlightPeriod
	t := time.NewTicker(max(period, weights.MinInFlightPeriod))
	if period <= 0 {
		t.Reset(idle)
	}
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := b.Config().Weighting.InFlightPeriod
		if p != period {
			period = p
			t.Reset(max(p, weights.MinInFlightPeriod))
			if p <= 0 {
				t.Reset(idle)
			}
		}
		b.followOnce(period)
	}
}

// followOnce is one step of the fast loop.
func (b *Balancer) followOnce(period time.Duration) {
	start := time.Now()
	b.updating.Lock()
	defer b.updating.Unlock()
	// The names are read under b.mu and the counts from the pool without it: the pool's lock
	// is taken before b.mu everywhere (update), never inside it.
	b.mu.Lock()
	standby := !leading(b.lead)
	type want struct {
		s     *service
		names []string
	}
	var todo []want
	for _, s := range b.services {
		if s.follows(standby) {
			todo = append(todo, want{s, s.names})
		}
	}
	b.mu.Unlock()
	counts := make([][]weights.InFlight, len(todo))
	if period > 0 {
		for i, w := range todo {
			counts[i] = b.pool.ReadInFlight(nil, w.names, inFlightMaxAge(period))
		}
	}

	b.mu.Lock()
	changed := false
	for _, s := range b.services {
		if !s.follows(standby) || period <= 0 {
			changed = s.unfollow() || changed
		}
	}
	for i, w := range todo {
		if period > 0 && slices.Contains(b.services, w.s) && w.s.follows(standby) {
			changed = w.s.follow(counts[i], b.now()) || changed
		}
	}
	if !changed {
		b.mu.Unlock()
		return
	}
	b.seq++
	b.gen++
	in := b.intentLocked(standby)
	b.latest.Store(in)
	b.board.Publish(snapshotOf(b.services, in))
	syncers := sortedSyncers(b.switches)
	b.mu.Unlock()
	for _, sy := range syncers {
		sy.Offer(in)
	}
	b.metrics.followSeconds.Observe(time.Since(start).Seconds())
}
