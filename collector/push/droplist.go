package push

import (
	"net/netip"
	"slices"
	"time"
)

// Kernel drop list bounds.
const (
	// MaxKernelDrops is how many source addresses the socket filter drops
	// at once; more flooding sources are shed in the read loop only.
	MaxKernelDrops = 64
	// KernelDropFor is how long a shed source stays on the drop list. The
	// read loop cannot see a listed source, so it is taken off after this
	// and listed again if it still fails (after another SourceFailBurst).
	KernelDropFor = 10 * time.Second
)

// dropList is the set of sources the kernel drops for the readers: a
// source that is shed in a read loop still costs a system call and a
// place in the receive buffer, where a genuine report then finds none.
// Guarded by Server.dropMu; one filter, installed on every socket.
type dropList struct {
	broken  bool // the kernel refused a filter; stop trying
	entries []dropEntry
	next    int64 // earliest until, unix ns; 0 = empty
	scratch []netip.Addr
}

type dropEntry struct {
	addr  netip.Addr
	until int64
}

func (d *dropList) listed(a netip.Addr) bool {
	return slices.ContainsFunc(d.entries, func(e dropEntry) bool { return e.addr == a })
}

// dropSource lists a unless the list is full, the kernel cannot filter, or
// a is protected: a backend's own address, or an IPv6 address in the same
// /64 as one (the filter drops whole /64s), whose flood, forged or from a
// neighbour, must not silence the probe.
func (s *Server) dropSource(a netip.Addr, now time.Time) {
	if s.protected(a) {
		return
	}
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	d := &s.drops
	if d.broken || len(d.entries) >= MaxKernelDrops || d.listed(a) {
		return
	}
	until := now.Add(KernelDropFor).UnixNano()
	d.entries = append(d.entries, dropEntry{a, until})
	if d.next == 0 || until < d.next {
		d.next = until
	}
	s.installDrops(now)
}

// expireDrops takes sources off the list once their time is up. Every
// datagram calls it, so the usual answer (nothing is due) takes no lock.
func (s *Server) expireDrops(now time.Time) {
	if !expiryDue(s.dropNext.Load(), now.UnixNano()) {
		return
	}
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	d := &s.drops
	t := now.UnixNano()
	if !expiryDue(d.next, t) { // another reader was first
		return
	}
	// Expired, or the clock stepped back (an entry would otherwise stay for
	// as long as the step).
	d.entries = slices.DeleteFunc(d.entries, func(e dropEntry) bool { return e.until <= t || e.until-t > int64(KernelDropFor) })
	d.next = 0
	for _, e := range d.entries {
		if d.next == 0 || e.until < d.next {
			d.next = e.until
		}
	}
	s.installDrops(now)
}

// expiryDue reports whether the list, whose earliest entry ends at next
// (0: empty), has an entry to take off at t: one whose time is up, or one
// further ahead than KernelDropFor (the clock stepped back).
func expiryDue(next, t int64) bool {
	return next != 0 && (t >= next || next-t > int64(KernelDropFor))
}

// installDrops puts the list on every socket; called with dropMu held.
func (s *Server) installDrops(now time.Time) {
	d := &s.drops
	defer func() { s.dropNext.Store(d.next) }()
	d.scratch = d.scratch[:0]
	for _, e := range d.entries {
		d.scratch = append(d.scratch, e.addr)
	}
	for _, c := range s.conns {
		if err := setDropList(c, d.scratch); err != nil {
			for _, c := range s.conns { // no socket keeps a list the others lack
				_ = setDropList(c, nil)
			}
			d.broken, d.entries, d.next = true, nil, 0
			s.kernelListed.Store(0)
			s.logLine(slotReadError, "push: cannot install the socket filter that drops flooding sources; shedding them in the read loops only", "err", err)
			return
		}
	}
	s.kernelListed.Store(int64(len(d.entries)))
}

// unlistProtected takes off the list every source that has become
// protected (SetBackendAddrs: a backend added, or its address changed).
func (s *Server) unlistProtected(now time.Time) {
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	d := &s.drops
	n := len(d.entries)
	d.entries = slices.DeleteFunc(d.entries, func(e dropEntry) bool { return s.protected(e.addr) })
	if len(d.entries) == n || d.broken {
		return
	}
	d.next = 0
	for _, e := range d.entries {
		if d.next == 0 || e.until < d.next {
			d.next = e.until
		}
	}
	s.installDrops(now)
}
