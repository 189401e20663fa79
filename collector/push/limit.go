package push

import (
	"hash/maphash"
	"net/netip"
	"sync"
)

// limitBuckets is the size of the per-source failure table: a power of two,
// 4096 buckets of 16 bytes (64 KiB) however many addresses send.
const limitBuckets = 1 << 12

// Defaults of Config.SourceFailRate and Config.SourceFailBurst.
const (
	DefaultSourceFailRate  = 20  // failures a second a source may keep up
	DefaultSourceFailBurst = 100 // failures a source may have in a row before it is shed
)

// sourceLimit is a token bucket per source address for datagrams that fail
// (framing, key lookup, tag, replay): a source that has spent its burst is
// shed, before the key lookup and the HMAC, until its bucket refills.
//
// The table is fixed-size and hashed with a per-process random seed, so an
// attacker can neither grow it nor aim at a genuine probe's bucket. Each
// address maps to two buckets and is shed only when both are empty: a
// genuine source shares both with flooders only with probability about
// (flooders/4096)². IPv6 sources count per /64, which one host usually
// holds whole; IPv4 per address.
//
// It is shared by the readers: one source's datagrams may reach several (a
// flooder varying its port is spread over the sockets), and its budget is
// one. The lock is held for a refill and a compare, tens of nanoseconds
// against the HMAC it saves or precedes.
type sourceLimit struct {
	mu      sync.Mutex
	seed    maphash.Seed
	rate    float64 // tokens per nanosecond
	burst   float64
	exact   bool // key IPv6 sources by the whole address, not the /64 (backendLimit)
	buckets [limitBuckets]bucket
}

type bucket struct {
	tokens float64
	last   int64 // unix ns of the last refill; 0 = never used (full)
}

func newSourceLimit(perSecond float64, burst int) *sourceLimit {
	return &sourceLimit{seed: maphash.MakeSeed(), rate: perSecond / 1e9, burst: float64(burst)}
}

func (l *sourceLimit) slots(a netip.Addr) (*bucket, *bucket) {
	var k []byte
	if a.Is4() {
		b := a.As4()
		k = b[:]
	} else {
		b := a.As16()
		k = b[:8]
		if l.exact {
			k = b[:]
		}
	}
	h := maphash.Bytes(l.seed, k)
	return &l.buckets[h&(limitBuckets-1)], &l.buckets[(h>>32)&(limitBuckets-1)]
}

func (l *sourceLimit) refill(b *bucket, now int64) {
	if b.last == 0 {
		b.tokens, b.last = l.burst, now
		return
	}
	// A clock stepping back refills nothing, and refilling resumes from the
	// new time rather than when the clock is back where it was.
	if d := now - b.last; d > 0 {
		b.tokens = min(l.burst, b.tokens+float64(d)*l.rate)
	}
	b.last = now
}

// allow reports whether a datagram from a may be looked at: one of its two
// buckets holds a token. It takes none.
func (l *sourceLimit) allow(a netip.Addr, now int64) bool {
	b1, b2 := l.slots(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(b1, now)
	l.refill(b2, now)
	return b1.tokens >= 1 || b2.tokens >= 1
}

// fail charges a failed datagram from a to both its buckets and reports
// whether a may still send (allow).
func (l *sourceLimit) fail(a netip.Addr, now int64) bool {
	b1, b2 := l.slots(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(b1, now)
	l.refill(b2, now)
	b1.tokens = max(0, b1.tokens-1)
	b2.tokens = max(0, b2.tokens-1)
	return b1.tokens >= 1 || b2.tokens >= 1
}
