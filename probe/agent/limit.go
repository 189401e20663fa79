package agent

import "time"

// limiter lets one message per key through every interval and counts the rest, so that a
// collector that is down for an hour costs 60 log lines, not 720.
type limiter struct {
	every time.Duration
	now   func() time.Time
	last  map[string]time.Time
	quiet map[string]int
}

// allow reports whether a message for key may be logged now, and how many were suppressed
// since the last one.
func (l *limiter) allow(key string) (suppressed int, ok bool) {
	if l.last == nil {
		l.last, l.quiet = map[string]time.Time{}, map[string]int{}
	}
	t := l.now()
	if last, seen := l.last[key]; seen && t.Sub(last) < l.every {
		l.quiet[key]++
		return 0, false
	}
	n := l.quiet[key]
	l.last[key], l.quiet[key] = t, 0
	return n, true
}
