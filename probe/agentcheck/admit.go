package agentcheck

import (
	"net"
	"net/netip"
	"sync"
)

// Defaults for the admission of connections.
const (
	// DefaultMaxPerSource bounds the connections one source (an IPv4 address, or an IPv6 /64)
	// holds at once. HAProxy opens one per server line naming this probe; a client holding
	// every slot from one address once left HAProxy's check with an empty reply.
	DefaultMaxPerSource = 4
	// DefaultReserved is how many of MaxConns only the configured checkers may use, so that
	// many other sources together cannot crowd HAProxy out either.
	DefaultReserved = 4
)

// admission decides, when a connection arrives, whether it is served: every connection
// within MaxConns; a source that is not a checker only within MaxConns less the reserved
// slots, and only up to its per-source budget. Checkers are not held to a per-source budget:
// one HAProxy opens a connection per server line from one address.
type admission struct {
	maxConns, maxPerSource, reserved int
	checkers                         []netip.Prefix

	mu        sync.Mutex
	total     int
	perSource map[netip.Addr]int
}

// refusal says why admit refused a connection.
type refusal int

const (
	admitted      refusal = iota
	full                  // MaxConns connections are being served
	reservedSlots         // only the reserved slots are free, and the source is not a checker
	sourceBudget          // the source holds its per-source budget already
)

// admit takes a slot for a connection from addr, or says why not. A slot taken is given back
// with release(key).
func (a *admission) admit(addr netip.Addr) (key netip.Addr, why refusal) {
	addr = addr.Unmap()
	key = sourceKey(addr)
	checker := a.isChecker(addr)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.total >= a.maxConns:
		return key, full
	case !checker && a.total >= a.maxConns-a.reserved:
		return key, reservedSlots
	case !checker && a.perSource[key] >= a.maxPerSource:
		return key, sourceBudget
	}
	a.total++
	a.perSource[key]++
	return key, admitted
}

func (a *admission) release(key netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total--
	if a.perSource[key]--; a.perSource[key] <= 0 {
		delete(a.perSource, key)
	}
}

func (a *admission) isChecker(addr netip.Addr) bool {
	for _, p := range a.checkers {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// sourceKey is what one source is: an IPv4 address, or the /64 of an IPv6 address (one host
// commonly has a whole /64, as the push collector counts sources too).
func sourceKey(addr netip.Addr) netip.Addr {
	if addr.Is4() {
		return addr
	}
	p, err := addr.WithZone("").Prefix(64)
	if err != nil {
		return addr
	}
	return p.Addr()
}

// remoteAddr is the IP address of a connection's peer; the zero Addr when it has none (a
// listener that is not TCP), which then counts as one source.
func remoteAddr(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
