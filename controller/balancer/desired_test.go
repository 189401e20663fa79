package balancer

import (
	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"
)

// desiredFor is what the switch dpid should hold by b's running state, and the planner's
// input for it, with the backends located as that switch taught b: what the tests compare a
// switch against.
func desiredFor(b *Balancer, dpid uint64) (dataplane.State, []dataplane.Service) {
	b.mu.Lock()
	in := b.intentLocked(false)
	var ovs dataplane.OVSVersion
	if sy, ok := b.switches[dpid]; ok {
		ovs = sy.OVS()
	}
	b.mu.Unlock()
	return switchsync.Desired(in, dpid, ovs, b.nb.Locator(dpid))
}
