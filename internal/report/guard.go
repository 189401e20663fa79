package report

import (
	"errors"
	"fmt"
	"maps"
	"slices"
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

// MaxEpochs is how many boots of one backend a Guard tells apart by their
// boot nonce. Four covers a probe restarted three times within the clock
// skew window (a crash loop) before the time floor (see Guard) is needed.
const MaxEpochs = 4

// Guard rejects replayed and stale reports. The MAC proves who sent a
// datagram, not when; an attacker who captured one could resend it forever
// without this.
//
// Per backend it keeps up to MaxEpochs epochs, most recently advanced first,
// and a time floor. An epoch is one boot of the probe: its BootNonce, the
// highest Seq accepted, a bitmap of the ReorderWindow sequence numbers below
// that, the newest report Time accepted, and the floor in force when the
// epoch opened. The rules (docs/push-protocol.md, "Replay rules"):
//
//   - Every report of an epoch must be newer than the floor it opened under
//     (a boot pushed out and re-opened cannot have its old reports replayed
//     into the fresh bitmap).
//   - A report of the current (front) epoch is accepted once if its Seq is
//     above the highest or inside the reorder window and not yet seen.
//   - A report of an older remembered epoch is accepted only if its Seq is
//     above that epoch's highest and its Time is newer than the current
//     epoch's newest Time capped at the collector's clock + FutureAllowance:
//     that epoch becomes current again (the live probe takes back its
//     backend from a stray boot). Anything else of a superseded boot is
//     refused, so every accepted report whose BootNonce differs from the
//     previous accepted one is that boot's newest (collector.Pool relies on
//     this to order reports), and a late report of the previous process,
//     such as its "leaving" one, cannot undo a restart.
//   - A report of an unknown BootNonce (a restart) opens a new current epoch
//     if its Time is newer than the floor. When MaxEpochs are held, the least
//     recently advanced epoch is dropped and the floor rises to its newest
//     Time, so its reports, never told apart again by nonce, stay refused.
//
// Why not "a new boot must be newer than the current one", as before: one
// report dated up to the skew window ahead (a probe whose clock jumped, or
// anyone holding a shared key) then locked the genuine probe out until the
// collector's clock caught up. Now a new boot is judged only against epochs
// the Guard no longer tells apart, and the live probe's next report takes
// its epoch back. What remains: after MaxEpochs newer boots have pushed out
// an epoch whose reports were dated ahead, a further new boot is refused
// until the collector's clock passes that date, at most the skew window.
//
// Every report is accepted at most once while the Guard runs: remembered
// epochs by their bitmaps, dropped ones by the floor, and anything older by
// the skew check. Across a restart, Marks and Restore carry the state.
//
// Guard is safe for concurrent use. It reads no clock: Check takes "now".
type Guard struct {
	window time.Duration

	mu    sync.Mutex
	peers map[string]*peer
}

type peer struct {
	epochs [MaxEpochs]epoch // [0] is current; unused slots have top == 0
	floor  int64            // unix ns; see Guard
}

type epoch struct {
	nonce  uint64
	top    uint64 // highest Seq accepted in this epoch; 0 = slot unused
	seen   uint64 // bit i: Seq top-i accepted
	newest int64  // newest report Time accepted, unix ns
	capped int64  // the same, each Time capped at the collector's clock + FutureAllowance
	floor  int64  // the peer's floor when the epoch opened, unix ns
}

// FutureAllowance caps, for ordering boots only, how far ahead of the
// collector's clock an accepted report's Time counts. A report dated up to
// the skew window ahead would otherwise keep the live boot from taking its
// backend back for that long. A restarting probe's last report of the old
// boot is still refused after the first of the new one (same clock, sent
// earlier) unless that clock runs more than the restart time (at least one
// sampling interval: a probe reports after its first sample) plus 250 ms
// ahead of the collector's.
const FutureAllowance = 250 * time.Millisecond

// NewGuard returns a Guard that rejects reports whose Time is more than
// window away from the collector's clock (either way). window <= 0 means
// DefaultClockSkew.
func NewGuard(window time.Duration) *Guard {
	if window <= 0 {
		window = DefaultClockSkew
	}
	return &Guard{window: window, peers: make(map[string]*peer)}
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
	tc := min(t, now.Add(FutureAllowance).UnixNano())
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.peers[r.BackendID]
	if !ok {
		p = &peer{}
		p.epochs[0] = open(r.BootNonce, r.Seq, t, tc, 0)
		g.peers[r.BackendID] = p
		return nil
	}
	i := p.find(r.BootNonce)
	if i >= 0 && t <= p.epochs[i].floor {
		return reject(ReasonReplay, r.BackendID, "report of boot %#016x at %s is not newer than %s, the floor that boot was re-opened under",
			r.BootNonce, r.Time.Format(time.RFC3339Nano), time.Unix(0, p.epochs[i].floor).UTC().Format(time.RFC3339Nano))
	}
	switch {
	case i == 0:
		return p.epochs[0].admit(r, t, tc)
	case i > 0:
		e, cur := &p.epochs[i], &p.epochs[0]
		if r.Seq <= e.top {
			return reject(ReasonReplay, r.BackendID, "seq %d of boot %#016x is not above that boot's newest %d, and boot %#016x has reported since",
				r.Seq, r.BootNonce, e.top, cur.nonce)
		}
		if t <= cur.capped {
			return reject(ReasonReplay, r.BackendID, "boot %#016x at %s is superseded by boot %#016x, which reported %s",
				r.BootNonce, r.Time.Format(time.RFC3339Nano), cur.nonce, time.Unix(0, cur.capped).UTC().Format(time.RFC3339Nano))
		}
		e.advance(r.Seq, t, tc)
		p.toFront(i)
		return nil
	}
	if t <= p.floor {
		return reject(ReasonReplay, r.BackendID, "boot %#016x at %s is not newer than %s, the newest report of a boot this collector no longer tells apart",
			r.BootNonce, r.Time.Format(time.RFC3339Nano), time.Unix(0, p.floor).UTC().Format(time.RFC3339Nano))
	}
	// The new epoch opens under the floor it was just checked against: an
	// earlier life of this nonce was dropped before, so its reports are
	// under that floor. The epoch dropped now lifts the floor for later ones.
	e := open(r.BootNonce, r.Seq, t, tc, p.floor)
	if last := &p.epochs[MaxEpochs-1]; last.top != 0 {
		p.floor = max(p.floor, last.newest)
	}
	copy(p.epochs[1:], p.epochs[:MaxEpochs-1])
	p.epochs[0] = e
	return nil
}

func open(nonce, seq uint64, t, tc, floor int64) epoch {
	return epoch{nonce: nonce, top: seq, seen: 1, newest: t, capped: tc, floor: floor}
}

// find returns the index of the epoch of nonce, or -1.
func (p *peer) find(nonce uint64) int {
	for i := range p.epochs {
		if p.epochs[i].top != 0 && p.epochs[i].nonce == nonce {
			return i
		}
	}
	return -1
}

func (p *peer) toFront(i int) {
	e := p.epochs[i]
	copy(p.epochs[1:i+1], p.epochs[:i])
	p.epochs[0] = e
}

// admit applies the sequence rules of the current epoch.
func (e *epoch) admit(r *Report, t, tc int64) error {
	if r.Seq > e.top {
		e.advance(r.Seq, t, tc)
		return nil
	}
	d := e.top - r.Seq
	if d >= ReorderWindow {
		return reject(ReasonReplay, r.BackendID, "seq %d is %d behind the newest %d, outside the %d-report reorder window",
			r.Seq, d, e.top, ReorderWindow)
	}
	if e.seen&(1<<d) != 0 {
		return reject(ReasonReplay, r.BackendID, "seq %d of boot %#016x already accepted", r.Seq, r.BootNonce)
	}
	e.seen |= 1 << d
	e.newest, e.capped = max(e.newest, t), max(e.capped, tc)
	return nil
}

func (e *epoch) advance(seq uint64, t, tc int64) {
	if d := seq - e.top; d >= ReorderWindow {
		e.seen = 1
	} else {
		e.seen = e.seen<<d | 1
	}
	e.top = seq
	e.newest, e.capped = max(e.newest, t), max(e.capped, tc)
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

// Mark is the replay state of one backend, for keeping across a collector
// restart (Guard.Marks, Guard.Restore). Without it a restarted collector
// accepts, once each, every report captured within the skew window.
//
// The 64-bit values are JSON strings: JavaScript and jq read JSON numbers
// as doubles and would round a nonce or a bitmap.
type Mark struct {
	// Epochs, most recently advanced first; 1..MaxEpochs, distinct nonces.
	Epochs []EpochMark `json:"epochs"`
	// Floor: reports of boots not listed must be newer than this (unix ns;
	// 0 = none).
	Floor int64 `json:"floor_unix_ns,string"`
}

// EpochMark is one boot of a backend's probe as the Guard remembers it.
type EpochMark struct {
	BootNonce uint64 `json:"boot_nonce,string"`
	TopSeq    uint64 `json:"top_seq,string"`        // highest Seq accepted
	Seen      uint64 `json:"seen,string"`           // bit i: Seq TopSeq-i accepted; bit 0 always set
	Newest    int64  `json:"newest_unix_ns,string"` // newest report Time accepted
	Capped    int64  `json:"capped_unix_ns,string"` // the same with each Time capped at the collector's clock + FutureAllowance
	Floor     int64  `json:"floor_unix_ns,string"`  // Mark.Floor when this boot was opened; its reports must be newer
}

// Marks returns a copy of every backend's replay state. Persist it on
// every change you can afford (each update period, and at shutdown): the
// reports accepted after the last saved Marks can be replayed once after a
// restart, within the skew window.
func (g *Guard) Marks() map[string]Mark {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]Mark, len(g.peers))
	for id, p := range g.peers {
		m := Mark{Floor: p.floor}
		for _, e := range p.epochs {
			if e.top == 0 {
				break
			}
			m.Epochs = append(m.Epochs, EpochMark{BootNonce: e.nonce, TopSeq: e.top, Seen: e.seen, Newest: e.newest, Capped: e.capped, Floor: e.floor})
		}
		out[id] = m
	}
	return out
}

// Restore loads marks saved by Marks, typically before serving. A backend
// the Guard already holds state for keeps that state (it is newer). A
// malformed mark is skipped, not repaired, and named in the returned error;
// the well-formed ones are restored regardless.
func (g *Guard) Restore(marks map[string]Mark) error {
	var errs []error
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(marks)) {
		p, err := marks[id].peer(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, ok := g.peers[id]; !ok {
			g.peers[id] = p
		}
	}
	return errors.Join(errs...)
}

// minTime is the smallest report Time Open accepts, as unix ns.
const minTime = int64(time.Second)

func (m Mark) peer(id string) (*peer, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("replay mark of backend %q ignored: %s", id, fmt.Sprintf(format, args...))
	}
	if !validID(id) {
		return nil, fmt.Errorf("replay mark of backend %q ignored: not a backend id (1..%d bytes of [A-Za-z0-9._-])", id, MaxIDLen)
	}
	if len(m.Epochs) == 0 || len(m.Epochs) > MaxEpochs {
		return nil, bad("%d epochs, want 1..%d", len(m.Epochs), MaxEpochs)
	}
	if m.Floor < 0 {
		return nil, bad("floor %d is negative", m.Floor)
	}
	p := &peer{floor: m.Floor}
	for i, e := range m.Epochs {
		switch {
		case e.TopSeq == 0:
			return nil, bad("epoch %d: top_seq is 0, sequence numbers start at 1", i)
		case e.Seen&1 == 0:
			return nil, bad("epoch %d: bit 0 of seen (top_seq itself) is clear", i)
		case e.TopSeq < ReorderWindow && e.Seen>>e.TopSeq != 0:
			return nil, bad("epoch %d: seen %#x marks sequence numbers below 1", i, e.Seen)
		case e.Newest < minTime:
			return nil, bad("epoch %d: newest %d ns is before 1970-01-01T00:00:01Z", i, e.Newest)
		case e.Capped < minTime || e.Capped > e.Newest:
			return nil, bad("epoch %d: want 1 s <= capped (%d) <= newest (%d)", i, e.Capped, e.Newest)
		case e.Floor < 0 || e.Floor > m.Floor || e.Floor >= e.Newest:
			return nil, bad("epoch %d: want 0 <= its floor (%d) <= the mark's floor (%d) and < its newest (%d)", i, e.Floor, m.Floor, e.Newest)
		case p.find(e.BootNonce) >= 0:
			return nil, bad("epoch %d: boot nonce %#016x listed twice", i, e.BootNonce)
		}
		p.epochs[i] = epoch{nonce: e.BootNonce, top: e.TopSeq, seen: e.Seen, newest: e.Newest, capped: e.Capped, floor: e.Floor}
	}
	return p, nil
}
