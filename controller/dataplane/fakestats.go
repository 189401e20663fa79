package dataplane

import (
	"fmt"
	"maps"
	"slices"

	"flowweight/controller/ofwire"
)

// counters are a fake switch's group counters: what Open vSwitch reports in an OFPMP_GROUP
// reply. A GROUP_MOD that adds or modifies a group starts its counters from zero (a new group
// object with a new duration); the syncer must cope with a switch that keeps them too.
type counters struct {
	clock uint32 // advances one second per group stats reply: the groups' and flows' durations
	stats map[uint32]*groupCounters
	// flowStats are the flows' packet counters (HitFlow), started from zero when a flow is
	// added (an ADD over a flow replaces it, counters and duration too).
	flowStats map[flowKey]*flowCounter
}

type flowCounter struct {
	born    uint32
	packets uint64
}

func (c *counters) flowBorn(k flowKey) {
	if c.flowStats == nil {
		c.flowStats = map[flowKey]*flowCounter{}
	}
	c.flowStats[k] = &flowCounter{born: c.clock}
}

// HitFlow counts n packets through every flow whose cookie is cookie, as traffic would; it
// fails when there is none.
func (f *FakeSwitch) HitFlow(cookie, n uint64) error {
	hit := false
	for k, fl := range f.flows {
		if fl.Cookie != cookie {
			continue
		}
		if f.flowStats[k] == nil {
			f.flowBorn(k)
		}
		f.flowStats[k].packets += n
		hit = true
	}
	if !hit {
		return fmt.Errorf("fake switch: no flow with cookie %#x", cookie)
	}
	return nil
}

type groupCounters struct {
	born    uint32
	buckets []uint64
}

func (c *counters) born(id uint32, buckets int) {
	if c.stats == nil {
		c.stats = map[uint32]*groupCounters{}
	}
	c.stats[id] = &groupCounters{born: c.clock, buckets: make([]uint64, buckets)}
}

func (c *counters) died(id uint32) { delete(c.stats, id) }

// Hit counts n packets through bucket k of group id, as traffic would.
func (f *FakeSwitch) Hit(id uint32, k int, n uint64) error {
	g, ok := f.stats[id]
	if !ok || k < 0 || k >= len(g.buckets) {
		return fmt.Errorf("fake switch: no bucket %d in group %d", k, id)
	}
	g.buckets[k] += n
	return nil
}

// GroupStatsReply is the OFPMP_GROUP reply body for every group, in id order.
func (f *FakeSwitch) GroupStatsReply() ([]byte, error) {
	f.clock++
	var out []ofwire.GroupStats
	for _, id := range slices.Sorted(maps.Keys(f.stats)) {
		g := f.stats[id]
		gs := ofwire.GroupStats{GroupID: id, RefCount: 1, DurationSec: f.clock - g.born}
		for _, n := range g.buckets {
			gs.Buckets = append(gs.Buckets, ofwire.BucketCounter{Packets: n, Bytes: 60 * n})
			gs.Packets += n
			gs.Bytes += 60 * n
		}
		out = append(out, gs)
	}
	return ofwire.EncodeGroupStats(out)
}

// Recreate starts group id's counters and duration from zero, as someone deleting and adding
// the same group again would.
func (f *FakeSwitch) Recreate(id uint32) {
	if g, ok := f.groups[id]; ok {
		f.born(id, len(g.Buckets))
	}
}
