package balancer

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

// eventLog keeps the recent events in two fixed-size rings, so that what peers drive cannot
// flush what operators need. Peer events (addPeer: switches connecting and disconnecting, what
// each switch's syncer reports, ARP answers from a switch's segment) come at the rate of
// whoever can reach the OpenFlow port or a switch's segment; a peer reconnecting in a loop
// filled the one 200-entry list in 0.3 s and the event of a refused reload was gone. The
// controller's own events (add: reloads applied or refused, backend state changes, HA role
// changes, state file errors) have the other ring, and each ring keeps its newest n. list
// reads both as one list in the order the events were added.
type eventLog struct {
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

func newEventLog(n int) *eventLog {
	return &eventLog{own: ring{buf: make([]seqEvent, n)}, peers: ring{buf: make([]seqEvent, n)}}
}

// add records one of the controller's own events.
func (l *eventLog) add(e Event) { l.put(&l.own, e) }

// addPeer records an event a peer drives (a switch, or a host on a switch's segment).
func (l *eventLog) addPeer(e Event) { l.put(&l.peers, e) }

func (l *eventLog) put(r *ring, e Event) {
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

// list returns the events of both rings oldest first, in the order they were added.
func (l *eventLog) list() []Event {
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

// Events returns recent events, oldest first: the newest 200 of the controller's own and the
// newest 200 that peers drove (switches, ARP), merged in the order they happened.
func (b *Balancer) Events() []Event { return b.events.list() }

// RecordEvent adds an event from outside the balancer (the binary's reload watcher).
func (b *Balancer) RecordEvent(kind, text string) {
	b.events.add(Event{Time: b.now(), Kind: kind, Text: text})
}

// PushRejected returns the push server's rejection counters by reason (nil before Run).
func (b *Balancer) PushRejected() map[string]uint64 {
	b.mu.Lock()
	srv := b.pushsrv
	b.mu.Unlock()
	if srv == nil {
		return nil
	}
	out := map[string]uint64{}
	for reason, n := range srv.Rejected() {
		out[string(reason)] = n
	}
	return out
}
