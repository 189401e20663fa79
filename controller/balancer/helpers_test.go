package balancer

import (
	"maps"

	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"
)

// desiredFor is what the switch dpid should hold by the running state, and the planner's
// input for it.
func desiredFor(b *Balancer, dpid uint64) (dataplane.State, []dataplane.Service) {
	b.mu.Lock()
	in := b.intentLocked(false)
	var ovs dataplane.OVSVersion
	if sy, ok := b.switches[dpid]; ok {
		ovs = sy.OVS()
	}
	b.mu.Unlock()
	return switchsync.Desired(in, dpid, ovs, b.locator(dpid))
}

// maybeSaveState is the update loop's periodic write.
func maybeSaveState(b *Balancer) {
	if b.st.due() {
		b.saveState()
	}
}

// publishLocked publishes the running state as an update and a connect would: tests that set
// services or the registry by hand call it before reading the views. b.mu must be held.
func publishLocked(b *Balancer) {
	b.board.PublishSwitches(maps.Clone(b.switches))
	b.board.Publish(snapshotOf(b.services, b.intentLocked(false)))
}
