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

// eventLog is a fixed-size ring of recent events.
type eventLog struct {
	mu   sync.Mutex
	buf  []Event
	next int
	full bool
}

func newEventLog(n int) *eventLog { return &eventLog{buf: make([]Event, n)} }

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf[l.next] = e
	l.next = (l.next + 1) % len(l.buf)
	if l.next == 0 {
		l.full = true
	}
}

// list returns the events oldest first.
func (l *eventLog) list() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.full {
		return append([]Event(nil), l.buf[:l.next]...)
	}
	return append(append([]Event(nil), l.buf[l.next:]...), l.buf[:l.next]...)
}

// Events returns recent events, oldest first.
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
