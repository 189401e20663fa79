// Package ratelog keeps a flood of bad input from flooding the log: a Limiter writes at most
// one line per key per Every and reports how many it held back as "suppressed" on the next
// line of that key (the scheme collector/push uses for rejected reports).
//
// It owns no policy: callers choose the keys, preferably a small fixed set (reasons). A
// Limiter holds at most MaxKeys keys: when full, a key whose window is over and that
// suppressed nothing makes room, and otherwise lines of new keys share one overflow slot, so
// memory stays bounded whatever the keys, and a flood of new keys yields at most about
// MaxKeys lines per Every.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Every is the least time between two lines of the same key.
const Every = 10 * time.Second

// MaxKeys bounds the keys one Limiter tracks.
const MaxKeys = 64

// overflowKey is the shared slot of keys beyond MaxKeys.
const overflowKey = "\x00overflow"

// Limiter is safe for concurrent use. The zero value is not usable; call New.
type Limiter struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	slots map[string]*slot
}

type slot struct {
	last       time.Time
	suppressed uint64
}

// New returns a Limiter writing to log with time from now (time.Now when nil).
func New(log *slog.Logger, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{log: log, now: now, slots: map[string]*slot{}}
}

// Log writes msg at level unless a line of key was written less than Every ago, in which case
// it only counts it. The line written carries "suppressed", the count held back since the
// previous line of key. It reports whether the line was written.
func (l *Limiter) Log(level slog.Level, key, msg string, args ...any) bool {
	if !l.log.Enabled(context.Background(), level) {
		return false
	}
	now := l.now()
	l.mu.Lock()
	s, ok := l.slots[key]
	if !ok {
		if len(l.slots) >= MaxKeys && !l.evictLocked(now) {
			key = overflowKey
			s = l.slots[key]
		}
		if s == nil {
			s = &slot{}
			l.slots[key] = s
		}
	}
	// A clock stepped backwards by more than Every restarts the window rather than
	// silencing the key until it catches up.
	if d := now.Sub(s.last); !s.last.IsZero() && d < Every && d > -Every {
		s.suppressed++
		l.mu.Unlock()
		return false
	}
	n := s.suppressed
	s.last, s.suppressed = now, 0
	l.mu.Unlock()
	l.log.Log(context.Background(), level, msg, append(args, "suppressed", n)...)
	return true
}

// evictLocked drops one slot that holds nothing worth keeping (its window is over and it
// suppressed nothing), so keys that come and go (datapath ids of switches that connected
// once) do not crowd out later ones. It reports whether it made room.
func (l *Limiter) evictLocked(now time.Time) bool {
	for k, s := range l.slots {
		if k != overflowKey && s.suppressed == 0 && now.Sub(s.last) >= Every {
			delete(l.slots, k)
			return true
		}
	}
	return false
}

// Warn is Log at slog.LevelWarn.
func (l *Limiter) Warn(key, msg string, args ...any) bool {
	return l.Log(slog.LevelWarn, key, msg, args...)
}

// Debug is Log at slog.LevelDebug.
func (l *Limiter) Debug(key, msg string, args ...any) bool {
	return l.Log(slog.LevelDebug, key, msg, args...)
}
