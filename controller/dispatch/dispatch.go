package dispatch

import (
	"slices"
	"sync"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/weights"
)

// Counts reads the latest in-flight count of each named backend no older than maxAge
// (collector.Pool.ReadInFlight).
type Counts func(dst []weights.InFlight, names []string, maxAge time.Duration) []weights.InFlight

// Config is what a Dispatcher is given. Zero fields take defaults.
type Config struct {
	// Counts is where work in flight comes from; nil: nowhere, every choice is round-robin
	// by weight.
	Counts Counts
	// MaxAge is how old a count may be and still be used: DefaultMaxAge when zero. Past it
	// the service falls back to round-robin by weight, which is what least connections over
	// counts that only grow (nothing seen closing) comes to anyway.
	MaxAge time.Duration
	Now    func() time.Time
}

// DefaultMaxAge is how old a count may be by default: several of a probe's in-flight
// intervals as configured in practice (10–100 ms), so that a lost datagram or two keeps
// least connections, while a probe that stopped sending counts does not.
const DefaultMaxAge = 2 * time.Second

// handshakeAllowance is how long before a count's arrival a connection sent may still be
// missing from it, its handshake unfinished. One handshake through a loaded userspace switch
// takes 0.6 ms at the median and 3.9 ms at the 99th percentile (5,000 new connections a
// second, docs/results/reactive-dispatch.md), but a burst's handshakes queue behind each other
// in the switch's upcalls: with 10 ms, 12 connections opened at once lost one from a count in
// 2 of 10 e2e runs. Longer only blurs the counts: the sends within it that the count did hold
// are counted twice, as many as the backend is sent in that time.
const handshakeAllowance = 20 * time.Millisecond

// maxPending bounds the sends remembered per backend between two of its counts: at a few
// thousand new connections per second and counts every 50 ms, a few hundred.
const maxPending = 4096

// Dispatcher chooses backends for new connections; safe for concurrent use by every
// switch's packet-in goroutine.
type Dispatcher struct {
	cfg Config

	mu       sync.Mutex
	services map[string]*serviceState
}

// serviceState is what one service's choices remember.
type serviceState struct {
	names  []string  // the candidates credit belongs to
	credit []float64 // smooth round-robin's, per candidate
	turn   int       // where least connections' ties start
	sent   map[string]*sent
}

// sent is what the Dispatcher sent one backend: in all, and what its counts may not hold yet.
type sent struct {
	total   uint64
	pending []time.Time // send times from handshakeAllowance before its latest count, in order
	n       float64     // work in flight as last estimated
}

// New returns a Dispatcher.
func New(cfg Config) *Dispatcher {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Dispatcher{cfg: cfg, services: map[string]*serviceState{}}
}

// Choice is one decision.
type Choice struct {
	Backend uint16 // the backend's dataplane index: its pick flow's register value less 1
	Name    string
	// LeastConn: chosen by work in flight; false: by smooth round-robin on the weights.
	LeastConn bool
	InFlight  float64 // the chosen backend's estimated work in flight before this connection
}

// Choose picks the backend of one new connection of s, as s is on the switch that asked
// (its backends' weights and locations): one with a positive weight and a location, so that
// its pick flow is there. ok is false when there is none.
func (d *Dispatcher) Choose(s *dataplane.Service) (c Choice, ok bool) {
	var idx [16]int
	cand := idx[:0]
	for i := range s.Backends {
		if b := &s.Backends[i]; b.Weight > 0 && b.Reachable() {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return Choice{}, false
	}
	names := make([]string, len(cand))
	w := make([]float64, len(cand))
	for j, i := range cand {
		names[j], w[j] = s.Backends[i].Name, float64(s.Backends[i].Weight)
	}
	var counts []weights.InFlight
	if d.cfg.Counts != nil {
		counts = d.cfg.Counts(make([]weights.InFlight, 0, len(names)), names, d.cfg.MaxAge)
	}
	now := d.cfg.Now()

	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.services[s.Name]
	if st == nil {
		st = &serviceState{sent: map[string]*sent{}}
		d.services[s.Name] = st
	}
	if !slices.Equal(st.names, names) {
		st.names, st.credit = names, make([]float64, len(names))
	}
	n := make([]float64, len(names))
	least := len(counts) == len(names)
	failing := 0
	for j, name := range names {
		b := st.sent[name]
		if b == nil {
			b = &sent{}
			st.sent[name] = b
		}
		if j >= len(counts) || !counts[j].OK {
			least = false
			b.pending = b.pending[:0]
			continue
		}
		// A connection sent just before the probe took its count is not established in it yet:
		// its handshake still crosses the switch twice (SYN-ACK, ACK). So the sends of the last
		// handshakeAllowance before the count arrived stay counted on top of it: one that the
		// count did hold is counted twice for that long, which spreads a burst, where dropping
		// one it did not hold would send the next connections to the backend that just got it
		// (a burst herded onto one backend).
		count := counts[j]
		k := 0
		for k < len(b.pending) && !b.pending[k].After(count.At.Add(-handshakeAllowance)) {
			k++
		}
		b.pending = b.pending[:copy(b.pending, b.pending[k:])]
		n[j] = max(count.N, 0) + float64(len(b.pending))
		b.n = n[j]
		if count.Failing {
			failing++
		}
	}
	pick := -1
	if least {
		// A backend whose last health check failed gets nothing while another can take it:
		// its queue is empty because it refuses (least connections' black hole).
		if failing > 0 && failing < len(names) {
			for j := range names {
				if counts[j].Failing {
					w[j] = 0
				}
			}
		}
		pick = leastLoaded(w, n, st.turn)
		st.turn = (st.turn + 1) % len(names)
	} else {
		pick = smoothRR(w, st.credit)
	}
	if pick < 0 {
		return Choice{}, false
	}
	b := st.sent[names[pick]]
	b.total++
	if least {
		if len(b.pending) >= maxPending {
			b.pending = b.pending[:copy(b.pending, b.pending[1:])]
		}
		b.pending = append(b.pending, now)
		b.n++
	}
	be := &s.Backends[cand[pick]]
	return Choice{Backend: be.Index, Name: be.Name, LeastConn: least, InFlight: n[pick]}, true
}

// Sent is one backend's dispatch figures, for the views.
type Sent struct {
	Total    uint64  // connections sent to it since the controller started
	InFlight float64 // its work in flight as last estimated (0 without counts)
}

// Stats returns what was sent to each backend of the service, by name.
func (d *Dispatcher) Stats(service string) map[string]Sent {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.services[service]
	if st == nil {
		return nil
	}
	out := make(map[string]Sent, len(st.sent))
	for name, b := range st.sent {
		out[name] = Sent{Total: b.total, InFlight: b.n}
	}
	return out
}

// Forget drops the services not in keep (after a reload removed them).
func (d *Dispatcher) Forget(keep func(service string) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name := range d.services {
		if !keep(name) {
			delete(d.services, name)
		}
	}
}
