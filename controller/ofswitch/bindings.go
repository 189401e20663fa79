package ofswitch

import (
	"fmt"
	"time"
)

// binding ties a datapath id to the certificate identity that first claimed it (first-claim
// binding, TLS without CertNamesDatapath), so another certificate cannot take the id while
// its switch is away. With CertNamesDatapath the certificate itself names its ids and no
// binding is kept: nothing then outlives a session, and nothing can fill up.
type binding struct {
	identity string
	seen     time.Time // when its switch last connected or disconnected
}

// The table is bounded three ways, so that no certificate can keep another from connecting:
//   - in total, 4×MaxSwitches (maxPins);
//   - per certificate, MaxBindingsPerCertificate (at most MaxSwitches): a certificate's next
//     new id replaces its own binding seen longest ago that is not connected, so churning
//     ids only ever unbinds its own;
//   - in time: when the table is full, a binding whose switch has been away for
//     BindingIdleTimeout lapses, the least recently seen first. A connected switch's binding
//     never lapses, and a full table of recently seen switches refuses new ids rather than
//     unbinding one of them (which would let a certificate holder unbind a switch that is
//     briefly away and take its id).

// maxPins bounds the datapath-to-certificate bindings kept across sessions.
func (s *Server) maxPins() int { return 4 * s.cfg.MaxSwitches }

// maxPinsPerIdentity bounds the bindings of one certificate identity.
func (s *Server) maxPinsPerIdentity() int {
	return min(s.cfg.MaxBindingsPerCertificate, s.cfg.MaxSwitches)
}

// bindLocked binds dpid to sw's identity, or refuses; s.mu is held. A claim of an id already
// bound to the same identity only refreshes it (the caller checked the identity).
func (s *Server) bindLocked(sw *Switch) error {
	dpid, id, now := sw.DatapathID(), sw.identity, s.now()
	if id == "" || s.cfg.CertNamesDatapath {
		return nil
	}
	if b, ok := s.pins[dpid]; ok {
		b.seen = now
		return nil
	}
	if s.pinsOf[id] >= s.maxPinsPerIdentity() {
		if !s.unbindLocked(func(d uint64, b *binding) bool { return b.identity == id }) {
			return fmt.Errorf("switch %s at %s: %w: its certificate (%s) is bound to %d connected datapaths, limit %d per certificate",
				sw, sw.remote, ErrTooManySwitches, id, s.pinsOf[id], s.maxPinsPerIdentity())
		}
	}
	if len(s.pins) >= s.maxPins() {
		idle := func(d uint64, b *binding) bool { return now.Sub(b.seen) >= s.cfg.BindingIdleTimeout }
		if !s.unbindLocked(idle) {
			return fmt.Errorf("switch %s at %s: %w: %d datapath bindings kept, limit %d, none away for %v",
				sw, sw.remote, ErrTooManySwitches, len(s.pins), s.maxPins(), s.cfg.BindingIdleTimeout)
		}
	}
	s.pins[dpid] = &binding{identity: id, seen: now}
	s.pinsOf[id]++
	return nil
}

// unbindLocked drops, among the bindings that match and whose switch is not connected, the
// one seen longest ago. It reports whether it dropped one.
func (s *Server) unbindLocked(match func(uint64, *binding) bool) bool {
	var (
		victim uint64
		oldest *binding
	)
	for d, b := range s.pins {
		if _, live := s.switches[d]; live || !match(d, b) {
			continue
		}
		if oldest == nil || b.seen.Before(oldest.seen) || (b.seen.Equal(oldest.seen) && d < victim) {
			victim, oldest = d, b
		}
	}
	if oldest == nil {
		return false
	}
	delete(s.pins, victim)
	if s.pinsOf[oldest.identity] <= 1 {
		delete(s.pinsOf, oldest.identity)
	} else {
		s.pinsOf[oldest.identity]--
	}
	return true
}

// touchLocked records that dpid's switch was seen (it disconnected), for the lapse order.
func (s *Server) touchLocked(dpid uint64) {
	if b, ok := s.pins[dpid]; ok {
		b.seen = s.now()
	}
}
