package dataplane

import (
	"fmt"

	"flowweight/internal/slots"
)

// GroupSplit is how a group as a switch holds it divides new flows among a service's
// backends: which backend each bucket sends to, and the slots of the switch's table each
// backend gets. The measured shares (switchsync's group counters) are mapped to backends by
// it, and compared with its planned shares.
type GroupSplit struct {
	// Backend is, per bucket in the group's order, the position in s.Backends it sends to.
	Backend []int
	// Slots is per backend (s.Backends order) its slots of the table; NHash the table's size
	// (0: the switch builds no table for these weights, so no planned share is known).
	Slots []int
	NHash int
}

// Planned is backend i's share of the table (0 without a table).
func (g GroupSplit) Planned(i int) float64 {
	if g.NHash == 0 || i >= len(g.Slots) {
		return 0
	}
	return float64(g.Slots[i]) / float64(g.NHash)
}

// SplitOf maps g's buckets to s's backends by their action bytes, as HeldWeights does, and
// models the table Open vSwitch v builds for g's weights. It fails when a bucket sends to no
// backend of s (another layout, a stale MAC or port, someone else's edit): its counters then
// say nothing about s's backends.
func SplitOf(s Service, g Group, v OVSVersion) (GroupSplit, error) {
	byActions := make(map[string]int, len(s.Backends))
	for i, b := range s.Backends {
		if b.Reachable() {
			byActions[bucketActions(s, b)] = i
		}
	}
	sp := GroupSplit{Backend: make([]int, len(g.Buckets)), Slots: make([]int, len(s.Backends))}
	w := make([]uint16, len(g.Buckets))
	for k, b := range g.Buckets {
		i, ok := byActions[b.Actions]
		if !ok {
			return GroupSplit{}, fmt.Errorf("group %d bucket %d sends to no backend of service %q", g.ID, k, s.Name)
		}
		sp.Backend[k], w[k] = i, b.Weight
	}
	t := slots.OVS(w, v)
	sp.NHash = t.NHash
	if t.NHash > 0 {
		for k, h := range t.Hits {
			sp.Slots[sp.Backend[k]] += h
		}
	}
	return sp, nil
}
