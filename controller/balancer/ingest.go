package balancer

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"flowweight/collector/push"
)

// pushSide is the balancer's side of the push server: the probe keys it looks up per
// datagram and each probe backend's configured address, both replaced whole by a reload, and
// the server itself once Run made it. Its own lock serialises a reload with Run, so the
// server never misses the addresses of a reload that crossed its start.
type pushSide struct {
	// keys maps backend names to push keys: an immutable map swapped whole, read per datagram
	// without a lock.
	keys atomic.Pointer[map[string][]byte]

	mu  sync.Mutex
	srv *push.Server // nil before Run
	// addrs is each probe backend's configured address, which the push server never sheds or
	// has the kernel drop for others' traffic (push.Server.SetBackendAddrs).
	addrs map[string][]netip.Addr
}

// keyFor is the push server's key lookup; unknown backends have no key.
func (p *pushSide) keyFor(id string) ([]byte, bool) {
	m := p.keys.Load()
	if m == nil {
		return nil, false
	}
	k, ok := (*m)[id]
	return k, ok
}

// configure installs a configuration's keys and addresses, and returns the server (nil
// before Run) for what else the reload must tell it.
func (p *pushSide) configure(keys map[string][]byte, addrs map[string][]netip.Addr) *push.Server {
	p.keys.Store(&keys)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addrs = addrs
	if p.srv != nil {
		p.srv.SetBackendAddrs(addrs)
	}
	return p.srv
}

// attach hands the server the running addresses before its first datagram: a restart trusts
// them at once.
func (p *pushSide) attach(srv *push.Server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.srv = srv
	srv.SetBackendAddrs(p.addrs)
}

// server is the push server (nil before Run).
func (p *pushSide) server() *push.Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.srv
}
