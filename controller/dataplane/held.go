package dataplane

// HeldWeights reads the weight each of s's backends has in g, a group as a switch holds it,
// in s.Backends order: the sum of its buckets' weights, which in the slot layout are slots of
// the switch's table (so the values are shares of their sum, not weights of the total the
// controller computes). A restarted controller starts from these: its weights engine moves
// from the shares the switch serves, under the same damping and step limit as a running
// controller, instead of jumping to a fresh target.
//
// A bucket is matched to a backend by its action bytes, which the planner builds the same way
// (bucketActions); a backend with several buckets gets their sum. ok is false when some bucket
// matches no backend of s (another layout, a stale MAC or port, someone else's edit) or no
// bucket carries weight: then the group says nothing reliable about s's shares.
func HeldWeights(s Service, g Group) (weights []uint16, ok bool) {
	byActions := make(map[string]int, len(s.Backends))
	for i, b := range s.Backends {
		if b.Reachable() {
			byActions[bucketActions(s, b)] = i
		}
	}
	sums := make([]uint32, len(s.Backends))
	var total uint32
	for _, k := range g.Buckets {
		i, found := byActions[k.Actions]
		if !found {
			return nil, false
		}
		sums[i] += uint32(k.Weight)
		total += uint32(k.Weight)
	}
	if total == 0 {
		return nil, false
	}
	weights = make([]uint16, len(s.Backends))
	for i, v := range sums {
		weights[i] = uint16(min(v, 0xffff))
	}
	return weights, true
}
