package ofswitch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"flowweight/controller/ratelog"
)

// peerLog limits the log lines peers cause: at most one line of a kind (a Fault, or a
// session event such as the switch's description) per source address and per datapath id
// per ratelog.Every. It lives on the Server, not in a session, so a peer that reconnects in
// a loop finds its windows still closed: rate limits outlive sessions. A line goes out only
// when every scope it belongs to (its source, its datapath id) is open; one held back is
// counted on the scope that held it, and the next line of that scope reports the count as
// "suppressed".
//
// Memory is bounded: at most peerLogKeys scopes are tracked. When full, scopes whose window
// is over and that hold no count are dropped (at most once per second, so a flood of new
// keys does not rescan the table per message); if that frees nothing, lines of new scopes
// share one overflow slot per kind, so a flood of new sources or ids yields at most one
// more line per kind per window.
type peerLog struct {
	now func() time.Time

	mu        sync.Mutex
	slots     map[peerScope]*peerSlot
	overflow  map[string]*peerSlot // per kind
	nextSweep time.Time
	max       int
}

// peerScope is one kind of line for one source ("src 192.0.2.7") or one datapath id
// ("dpid 0000000000000001"), or for all peers without either ("").
type peerScope struct{ kind, scope string }

type peerSlot struct {
	last       time.Time
	suppressed uint64
}

// peerLogKeys bounds the scopes tracked: every switch of a full table (DefaultMaxSwitches)
// with a few kinds of lines each, and sources besides.
const peerLogKeys = 4096

func newPeerLog(now func() time.Time) *peerLog {
	return &peerLog{now: now, slots: map[peerScope]*peerSlot{}, overflow: map[string]*peerSlot{}, max: peerLogKeys}
}

// open reports whether s lets a line through at now: it never wrote one, or its last was
// ratelog.Every ago or more (or more than that in the future: a clock stepped back).
func (s *peerSlot) open(now time.Time) bool {
	d := now.Sub(s.last)
	return s.last.IsZero() || d >= ratelog.Every || d <= -ratelog.Every
}

// Log writes msg to lg at level unless a line of kind was written for src or for dpid less
// than ratelog.Every ago. src and dpid may be "" when unknown (before the handshake, or a
// Unix-socket peer). It reports whether the line was written.
func (l *peerLog) Log(lg *slog.Logger, level slog.Level, kind, src, dpid, msg string, args ...any) bool {
	if !lg.Enabled(context.Background(), level) {
		return false
	}
	now := l.now()
	scopes := make([]peerScope, 0, 2)
	if src != "" {
		scopes = append(scopes, peerScope{kind, "src " + src})
	}
	if dpid != "" {
		scopes = append(scopes, peerScope{kind, "dpid " + dpid})
	}
	if len(scopes) == 0 {
		scopes = append(scopes, peerScope{kind, ""})
	}
	l.mu.Lock()
	var use [2]*peerSlot
	n := 0
	for _, sc := range scopes {
		s := l.slots[sc]
		if s != nil && !s.open(now) {
			s.suppressed++
			l.mu.Unlock()
			return false
		}
		use[n] = s
		n++
	}
	for i, sc := range scopes {
		if use[i] != nil {
			continue
		}
		if s := l.addLocked(sc, now); s != nil {
			use[i] = s
			continue
		}
		o := l.overflow[kind]
		if o == nil {
			o = &peerSlot{}
			l.overflow[kind] = o
		}
		if !o.open(now) {
			o.suppressed++
			l.mu.Unlock()
			return false
		}
		use[i] = o
	}
	var suppressed uint64
	for _, s := range use[:n] {
		suppressed += s.suppressed
		s.last, s.suppressed = now, 0
	}
	l.mu.Unlock()
	lg.Log(context.Background(), level, msg, append(args, "suppressed", suppressed)...)
	return true
}

// addLocked makes a slot for sc, or returns nil when the table is full.
func (l *peerLog) addLocked(sc peerScope, now time.Time) *peerSlot {
	if len(l.slots) >= l.max && !now.Before(l.nextSweep) {
		l.nextSweep = now.Add(time.Second)
		for k, s := range l.slots {
			if s.suppressed == 0 && s.open(now) {
				delete(l.slots, k)
			}
		}
	}
	if len(l.slots) >= l.max {
		return nil
	}
	s := &peerSlot{}
	l.slots[sc] = s
	return s
}
