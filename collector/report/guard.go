package report

import (
	"sync"
	"time"
)

// DefaultClockSkew is the Guard window used when NewGuard gets a
// non-positive one.
const DefaultClockSkew = 30 * time.Second

// ReorderWindow is how far behind the newest sequence number a report may
// arrive and still be accepted (once). UDP reorders rarely and only by a few
// datagrams; 64 fits a one-word bitmap.
const ReorderWindow = 64

// Guard rejects replayed and stale reports. The MAC proves who sent a
// datagram, not when; an attacker who captured one could resend it forever
// without this.
//
// Per backend it keeps one fixed-size epoch: the probe's BootNonce, the
// highest Seq accepted, a bitmap of the ReorderWindow sequence numbers below
// it, and the newest report Time accepted. A report from a new BootNonce (the
// probe restarted) opens a new epoch only if its Time is newer than that
// newest Time, so a captured report from an earlier boot cannot reset the
// sequence. Memory is one epoch per backend that has passed Open (which
// needs that backend's key); Forget frees it when the backend is removed.
//
// Guard is safe for concurrent use. It reads no clock: Check takes "now".
type Guard struct {
	window time.Duration

	mu    sync.Mutex
	peers map[string]epoch
}

type epoch struct {
	nonce  uint64
	top    uint64 // highest Seq accepted in this epoch
	seen   uint64 // bit i: Seq top-i accepted
	newest int64  // newest report Time accepted, unix ns
}

// NewGuard returns a Guard that rejects reports whose Time is more than
// window away from the collector's clock (either way). window <= 0 means
// DefaultClockSkew.
func NewGuard(window time.Duration) *Guard {
	if window <= 0 {
		window = DefaultClockSkew
	}
	return &Guard{window: window, peers: make(map[string]epoch)}
}

// Window returns the clock skew window in force.
func (g *Guard) Window() time.Duration { return g.window }

// Check accepts r (recording it) or returns a *Error with ReasonClockSkew or
// ReasonReplay. It must be called only with reports that passed Open: the
// state it keeps is trusted. A rejection changes no state.
func (g *Guard) Check(r *Report, now time.Time) error {
	if skew := r.Time.Sub(now); skew > g.window || skew < -g.window {
		return reject(ReasonClockSkew, r.BackendID, "report time %s is %s off the collector clock %s (window %s)",
			r.Time.Format(time.RFC3339Nano), skew, now.UTC().Format(time.RFC3339Nano), g.window)
	}
	t := r.Time.UnixNano()
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.peers[r.BackendID]
	switch {
	case !ok:
		e = epoch{nonce: r.BootNonce, top: r.Seq, seen: 1, newest: t}
	case r.BootNonce != e.nonce:
		if t <= e.newest {
			return reject(ReasonReplay, r.BackendID, "boot nonce %#016x at %s is not newer than the last accepted report (%s, boot %#016x)",
				r.BootNonce, r.Time.Format(time.RFC3339Nano), time.Unix(0, e.newest).UTC().Format(time.RFC3339Nano), e.nonce)
		}
		e = epoch{nonce: r.BootNonce, top: r.Seq, seen: 1, newest: t}
	case r.Seq > e.top:
		if d := r.Seq - e.top; d >= ReorderWindow {
			e.seen = 1
		} else {
			e.seen = e.seen<<d | 1
		}
		e.top = r.Seq
		e.newest = max(e.newest, t)
	default:
		d := e.top - r.Seq
		if d >= ReorderWindow {
			return reject(ReasonReplay, r.BackendID, "seq %d is %d behind the newest %d, outside the %d-report reorder window",
				r.Seq, d, e.top, ReorderWindow)
		}
		if e.seen&(1<<d) != 0 {
			return reject(ReasonReplay, r.BackendID, "seq %d of boot %#016x already accepted", r.Seq, r.BootNonce)
		}
		e.seen |= 1 << d
		e.newest = max(e.newest, t)
	}
	g.peers[r.BackendID] = e
	return nil
}

// Forget drops everything known about backendID. Call it when the backend
// is removed from the configuration. A re-added backend starts afresh: a
// report captured before it was forgotten is accepted again if it is still
// within the clock skew window, which bounds that exposure.
func (g *Guard) Forget(backendID string) {
	g.mu.Lock()
	delete(g.peers, backendID)
	g.mu.Unlock()
}

// Len returns the number of backends the Guard holds state for.
func (g *Guard) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.peers)
}
