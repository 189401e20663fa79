package view

import (
	"sync"
	"time"
)

// Event is one thing an operator wants to see happen: a state change, a rewrite, a drift
// repaired, a switch (dis)connecting. The API and dashboard show the most recent ones.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // state, rewrite, drift, switch, arp, config, error
	Service string    `json:"service,omitempty"`
	Backend string    `json:"backend,omitempty"`
	Text    string    `json:"text"`
}

// Log keeps the recent events in two fixed-size rings, so that what peers drive cannot
// flush what operators need. Peer events (AddPeer: switches connecting and disconnecting, what
// each switch's syncer reports, ARP answers from a switch's segment) come at the rate of
// whoever can reach the OpenFlow port or a switch's segment; a peer reconnecting in a loop
// filled the one 200-entry list in 0.3 s and the event of a refused reload was gone. The
// controller's own events (Add: reloads applied or refused, backend state changes, HA role
// changes, state file errors) have the other ring, and each ring keeps its newest n. List
// reads both as one list in the order the events were added.
type Log struct {
	mu    sync.Mutex
	seq   uint64
	own   ring
	peers ring
}

// ring is a fixed-size ring of events, each with its place in the order of all events.
type ring struct {
	buf  []seqEvent
	next int
	full bool
}

type seqEvent struct {
	seq uint64
	ev  Event
}

// NewLog keeps the newest n events of each ring.
func NewLog(n int) *Log {
	return &Log{own: ring{buf: make([]seqEvent, n)}, peers: ring{buf: make([]seqEvent, n)}}
}

// Add records one of the controller's own events.
func (l *Log) Add(e Event) { l.put(&l.own, e) }

// AddPeer records an event a peer drives (a switch, or a host on a switch's segment).
func (l *Log) AddPeer(e Event) { l.put(&l.peers, e) }

func (l *Log) put(r *ring, e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	r.buf[r.next] = seqEvent{l.seq, e}
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// items returns the ring's events oldest first.
func (r *ring) items() []seqEvent {
	if !r.full {
		return r.buf[:r.next]
	}
	return append(append([]seqEvent(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}

// List returns the events of both rings oldest first, in the order they were added: the
// newest n of the controller's own and the newest n that peers drove (switches, ARP).
func (l *Log) List() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, b := l.own.items(), l.peers.items()
	out := make([]Event, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || (len(a) > 0 && a[0].seq < b[0].seq) {
			out = append(out, a[0].ev)
			a = a[1:]
		} else {
			out = append(out, b[0].ev)
			b = b[1:]
		}
	}
	return out
}
