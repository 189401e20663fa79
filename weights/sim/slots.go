package sim

import "flowweight/internal/slots"

// Open vSwitch's default select-group method hashes each new connection into a table of slots,
// each slot naming a bucket, rebuilt on every group change: the realised split is the slot
// split, not the weight split. The controller lays each group out so that the table is the
// computed weights apportioned over 256 slots (64 before Open vSwitch 2.17), and the switch's
// table for that layout is modelled exactly in internal/slots (checked against Open vSwitch's
// own log by controller/dataplane's integration test). The simulator uses that model, the one
// the planner lays groups out with, not a copy: a connection's hash is uniform over the slots
// (the 5-tuple of a new connection is effectively random), so a backend receives its slots'
// share of new connections.

// SimOVS is the Open vSwitch release the simulator's slot table models: the one measured here.
var SimOVS = slots.Version{Major: 3, Minor: 1, Patch: 0}

// ovsSlots returns how many slots of the switch's table each weight gets.
func ovsSlots(w []uint16) []int {
	s, _ := slots.For(w, SimOVS)
	return s
}
