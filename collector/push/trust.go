package push

import (
	"encoding/binary"
	"net/netip"
	"sync"
)

// Defaults of Config.BackendFailRate and Config.BackendFailBurst.
const (
	DefaultBackendFailRate  = 1000 // failed verifications a second a backend's own address may keep up
	DefaultBackendFailBurst = 1000 // failed verifications it may have in a row
)

// A backend's own address is where its genuine reports come from: the address
// the configuration gives it (SetBackendAddrs), or the address of its last
// accepted report. Anyone can forge datagrams from it, so nothing done to it
// for its failures may silence the probe:
//
//   - it is never shed by the per-source failure budget (sourceLimit), which
//     counts IPv6 sources per /64 and is shared by everyone hashed to the
//     same buckets;
//   - it is never put on the kernel's drop list, nor is an IPv6 /64 that
//     holds it (the filter drops whole /64s);
//   - its failed verifications for its own backend are charged to a budget
//     of its own instead (Server.backendLimit, keyed by the exact address).
//     While that budget lasts every datagram is verified; once a flood has
//     spent it, only datagrams that carry the backend's current boot nonce
//     with a seq above the newest accepted are verified (verify, then
//     accept), the rest are shed unread. An attacker who cannot see the
//     probe's reports cannot guess a 64-bit nonce, so his datagrams cost no
//     HMAC and the probe's keep flowing; a probe's first report after it
//     restarts (a new nonce) waits for the budget to refill.
//
// Datagrams from such an address that claim another backend are not its
// reports: they go through the per-source budget as before.

// trustSet is the configured backends' addresses, swapped whole by
// SetBackendAddrs and read without a lock.
type trustSet struct {
	byID  map[string][]netip.Addr
	addrs map[netip.Addr]bool
	nets  map[[8]byte]bool // the /64 of each IPv6 address
}

func net64(a netip.Addr) [8]byte {
	b := a.As16()
	return [8]byte(b[:8])
}

// goodEntry is a backend's last accepted report: where it came from and
// which boot and seq it was.
type goodEntry struct {
	addr netip.Addr // under Server.goodMu
	mu   sync.Mutex
	// nonce and seq are the newest accepted report's boot and the highest
	// seq accepted of that boot; known is false until one is.
	nonce, seq uint64
	known      bool
}

// SetBackendAddrs gives the server each configured backend's own source
// addresses, replacing those given before: call it before Serve and on
// every configuration change. Addresses are those the probes send from (a
// backend's configured IP); IPv4-mapped IPv6 addresses count as IPv4, and
// invalid ones are ignored. Sources it makes a backend's own address are
// taken off the kernel drop list at once. Safe to call while serving.
func (s *Server) SetBackendAddrs(byID map[string][]netip.Addr) {
	t := &trustSet{byID: make(map[string][]netip.Addr, len(byID)), addrs: map[netip.Addr]bool{}, nets: map[[8]byte]bool{}}
	for id, list := range byID {
		for _, a := range list {
			if !a.IsValid() {
				continue
			}
			a = a.Unmap().WithZone("")
			t.byID[id] = append(t.byID[id], a)
			t.addrs[a] = true
			if a.Is6() {
				t.nets[net64(a)] = true
			}
		}
	}
	s.trust.Store(t)
	s.unlistProtected(s.cfg.Now())
}

// bound reports whether src is one of backend id's own addresses:
// configured for it, or where its last accepted report came from.
func (s *Server) bound(id []byte, src netip.Addr) bool {
	if t := s.trust.Load(); t != nil {
		for _, a := range t.byID[string(id)] { // no allocation for the lookup
			if a == src {
				return true
			}
		}
	}
	return s.lastGood(id, src)
}

// protected reports whether the kernel must never drop a: it is some
// backend's own address, or (IPv6, which the filter drops per /64) shares
// its /64 with one.
func (s *Server) protected(a netip.Addr) bool {
	if t := s.trust.Load(); t != nil {
		if t.addrs[a] || (a.Is6() && t.nets[net64(a)]) {
			return true
		}
	}
	s.goodMu.RLock()
	defer s.goodMu.RUnlock()
	return s.goodAddrs[a] > 0 || (a.Is6() && s.goodNets[net64(a)] > 0)
}

// Offsets of boot_nonce and seq in every version's header
// (docs/push-protocol.md); TestEpochOf ties them to report's encoder.
const (
	offBootNonce = 8
	offSeq       = 16
)

// epochOf reads the claimed (unauthenticated) boot nonce and seq of a
// datagram that passed report.Frame.
func epochOf(b []byte) (nonce, seq uint64) {
	return binary.BigEndian.Uint64(b[offBootNonce:]), binary.BigEndian.Uint64(b[offSeq:])
}

// ahead reports whether datagram b, claiming backend id, carries the boot
// nonce of id's newest accepted report and a seq above that boot's highest:
// what the live probe's next report carries, and what an attacker who does
// not see its reports cannot forge.
func (s *Server) ahead(id []byte, b []byte) bool {
	s.goodMu.RLock()
	e := s.good[string(id)]
	s.goodMu.RUnlock()
	if e == nil {
		return false
	}
	nonce, seq := epochOf(b)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.known && nonce == e.nonce && seq > e.seq
}

// ownVerify decides whether a datagram for backend id from one of its own
// addresses is verified: within the address's failure budget, or carrying
// the backend's live boot (ahead).
func (s *Server) ownVerify(id []byte, src netip.Addr, b []byte, now int64) bool {
	return s.backendLimit.allow(src, now) || s.ahead(id, b)
}

// entryLocked returns id's entry, creating it; goodMu held for writing.
func (s *Server) entryLocked(id string) *goodEntry {
	e := s.good[id]
	if e == nil {
		e = &goodEntry{}
		s.good[id] = e
	}
	return e
}

// setAddrLocked moves id's last good address to a, keeping the counts
// protected reads; goodMu held for writing.
func (s *Server) setAddrLocked(e *goodEntry, a netip.Addr) {
	if old := e.addr; old.IsValid() {
		if s.goodAddrs[old]--; s.goodAddrs[old] <= 0 {
			delete(s.goodAddrs, old)
		}
		if old.Is6() {
			k := net64(old)
			if s.goodNets[k]--; s.goodNets[k] <= 0 {
				delete(s.goodNets, k)
			}
		}
	}
	e.addr = a
	if a.IsValid() {
		s.goodAddrs[a]++
		if a.Is6() {
			s.goodNets[net64(a)]++
		}
	}
}

// noteGood records an accepted report of id from src. Called with id's
// order stripe held, so the check and the write cannot interleave with
// another reader's for the same id.
func (s *Server) noteGood(id string, src netip.Addr, nonce, seq uint64) {
	s.goodMu.RLock()
	e := s.good[id]
	same := e != nil && e.addr == src
	s.goodMu.RUnlock()
	if !same {
		s.goodMu.Lock()
		e = s.entryLocked(id)
		if e.addr != src {
			s.setAddrLocked(e, src)
		}
		s.goodMu.Unlock()
	}
	e.mu.Lock()
	if !e.known || e.nonce != nonce {
		e.nonce, e.seq, e.known = nonce, seq, true
	} else if seq > e.seq {
		e.seq = seq
	}
	e.mu.Unlock()
}

// forgetGood drops id's entry (Forget).
func (s *Server) forgetGood(id string) {
	s.goodMu.Lock()
	defer s.goodMu.Unlock()
	if e := s.good[id]; e != nil {
		s.setAddrLocked(e, netip.Addr{})
		delete(s.good, id)
	}
}

// seedEpoch records a restored replay mark's newest boot as id's live one,
// so a probe whose reports a flood from its address would otherwise make
// wait is recognised from its first report after a controller restart.
func (s *Server) seedEpoch(id string, nonce, seq uint64) {
	s.goodMu.Lock()
	e := s.entryLocked(id)
	s.goodMu.Unlock()
	e.mu.Lock()
	if !e.known {
		e.nonce, e.seq, e.known = nonce, seq, true
	}
	e.mu.Unlock()
}
