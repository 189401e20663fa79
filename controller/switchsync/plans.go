package switchsync

import (
	"encoding/binary"
	"sync"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
)

// Plans shares the planner's output between syncers. Switches with the same slot table whose
// backends are located alike (pinned in the config, or learned at the same MACs and ports)
// must hold the same state, and a fleet should compute it once per update, not once per
// switch: planning is the bulk of a syncer's CPU (docs/benchmarks.md, "Fleet"). It keeps the
// entries of the newest intent generation only, so it holds at most one state per distinct
// switch layout.
//
// A shared state is never modified: Hold, KeepSlots and Plan return new values.
type Plans struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]dataplane.State
	// Hits and Misses count lookups, for tests and the benchmark.
	hits, misses uint64
}

// NewPlans is an empty cache.
func NewPlans() *Plans { return &Plans{m: map[string]dataplane.State{}} }

// Desired is switchsync.Desired through the cache. hit reports whether another switch had
// already planned the same state for this intent generation.
func (p *Plans) Desired(in *intent.Intent, dpid uint64, ovs dataplane.OVSVersion, locate Locator) (st dataplane.State, svcs []dataplane.Service, hit bool) {
	svcs = Located(in, dpid, locate)
	st, hit = p.DesiredOf(in, svcs, ovs)
	return st, svcs, hit
}

// DesiredOf is Desired for a planner input svcs already located (and corrected) for one
// switch.
func (p *Plans) DesiredOf(in *intent.Intent, svcs []dataplane.Service, ovs dataplane.OVSVersion) (st dataplane.State, hit bool) {
	opt := Options(in, ovs)
	key := planKey(svcs, opt)
	p.mu.Lock()
	if in.Gen != p.gen {
		if in.Gen < p.gen {
			// An older intent than the cache's: plan it alone, leaving the newer entries.
			p.mu.Unlock()
			return dataplane.Desired(svcs, opt), false
		}
		p.gen = in.Gen
		clear(p.m)
	}
	st, hit = p.m[key]
	if hit {
		p.hits++
	} else {
		p.misses++
	}
	p.mu.Unlock()
	if hit {
		return st, true
	}
	// Planned outside the lock: syncers of different layouts plan in parallel, and two of the
	// same layout at once both plan (the same result) rather than wait.
	st = dataplane.Desired(svcs, opt)
	p.mu.Lock()
	if p.gen == in.Gen {
		p.m[key] = st
	}
	p.mu.Unlock()
	return st, false
}

// Stats returns the lookups that found a shared state and those that planned.
func (p *Plans) Stats() (hits, misses uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits, p.misses
}

// planKey is everything Desired's result depends on besides the intent generation: the slot
// table, whether the switch hashes UDP per flow, the NORMAL flow, which services are placed,
// and every backend's location and weight as planned for this switch (a canary switch plans
// the shadow policy's weights). Addresses and modes are the generation's.
func planKey(svcs []dataplane.Service, opt dataplane.Options) string {
	n := 8
	for _, s := range svcs {
		n += 4 + len(s.Backends)*13
	}
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(dataplane.LayoutSlots(opt.OVS)))
	b = append(b, flag(opt.Normal), flag(opt.OVS.AtLeast(2, 5, 0)))
	for _, s := range svcs {
		b = binary.BigEndian.AppendUint32(b, s.GroupID)
		for _, be := range s.Backends {
			b = append(b, byte(len(be.MAC)))
			b = append(b, be.MAC...)
			b = binary.BigEndian.AppendUint32(b, be.SwitchPort)
			b = binary.BigEndian.AppendUint16(b, be.Weight)
		}
	}
	return string(b)
}

func flag(v bool) byte {
	if v {
		return 1
	}
	return 0
}
