package testutil

import (
	"sync"
	"testing"
	"time"
)

// Clock is a fake clock that moves only when the test calls Advance. It is safe for
// concurrent use: the code under test reads it and starts timers on its own goroutines.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []timer
	started chan time.Duration
}

type timer struct {
	at time.Time
	ch chan time.Time
}

// Start is where a new Clock starts when the test does not care.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewClock is a Clock at start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, started: make(chan time.Duration, 1024)}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d and fires every timer that is due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			keep = append(keep, t)
			continue
		}
		t.ch <- c.now // buffered: a timer fires once
	}
	c.timers = keep
}

// After is time.After on this clock: the channel gets the time once Advance reaches now+d.
// Each call is announced on Started, so a test knows the code is waiting before it moves
// time.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.timers = append(c.timers, timer{c.now.Add(d), ch})
	c.mu.Unlock()
	c.started <- d
	return ch
}

// Started receives the duration of every timer After starts (up to 1,024 not yet taken).
func (c *Clock) Started() <-chan time.Duration { return c.started }

// WaitTimer returns the duration of the next timer the code under test starts, and fails t
// if none starts within.
func (c *Clock) WaitTimer(t testing.TB, within time.Duration) time.Duration {
	t.Helper()
	select {
	case d := <-c.started:
		return d
	case <-time.After(within):
		t.Fatalf("no timer started within %v", within)
		return 0
	}
}
