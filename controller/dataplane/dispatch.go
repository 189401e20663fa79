package dataplane

import (
	"time"

	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

// Reactive dispatch (Service.Dispatch == DispatchReactive, conntrack mode): the controller
// chooses the backend of every new connection, from live counts of work in flight (weighted
// least connections, controller/dispatch), and the switch carries the connection from then
// on (docs/dataplane.md, "Reactive dispatch"):
//
//   - table 1, a new connection to the VIP with reg3 = 0: CONTROLLER (the whole frame, no
//     buffer). The packet-in's cookie names the service. A frame marked for a backend whose
//     pick flow is missing does not match it again (reg3 is not 0): it falls through to the
//     group (below), never back to the controller.
//   - the controller answers with a packet-out of the same frame from the same in_port:
//     set_field reg3 = the chosen backend's index + 1, output:TABLE. The frame runs the
//     pipeline again from table 0, as if it had just arrived.
//   - table 1, per reachable backend: a new connection to the VIP with reg3 = its index + 1
//     → ct(commit,nat) to it, then table 2: the same commit a bucket does.
//
// Registers start at zero for every packet the switch receives, so only a packet-out can
// match a pick flow. Established connections never reach table 1's new-connection flows, so
// a reweight, a controller restart or a lost controller moves none of them.
//
// The flow to the controller is leased: it carries a hard timeout of DispatchLease, and the
// switch's syncer adds it again every LeaseRefresh (an OFPFC_ADD of the same flow replaces
// it, and Open vSwitch counts the hard timeout from the replacement). Below it, a fallback
// flow sends new connections to the group, which carries the weights. While a controller
// leads, its refreshes keep the lease and the group sees nothing; when none does (killed,
// cut off, or the leader changing), the lease runs out within DispatchLease plus Open
// vSwitch's one-second expiry sweep, and the switch serves new connections from the group
// alone, as group dispatch would, until a controller adds the flow back. Without the lease,
// a lost controller cost every new connection until one was back. A frame the controller
// marked for a backend whose pick flow is gone falls through to the group as well.

// regDispatch carries the chosen backend (its index + 1) from the packet-out to table 1.
const regDispatch uint8 = 3

// PriorityDispatchPick is the priority of the per-backend pick flows of table 1, above the
// new-connection flow that sends to the controller.
const PriorityDispatchPick = PriorityVIP + 10

// PriorityDispatchFallback is the priority of the fallback flow to the group, below the
// leased flow to the controller (and above the est/rel flows, whose ct_state differs anyway).
const PriorityDispatchFallback = PriorityVIP - 1

// DispatchLease is the hard timeout of the flow to the controller, in seconds, and
// LeaseRefresh how often a leading syncer adds it again. A refresh may run late by three
// LeaseRefresh (a sync waiting on barriers of a busy switch) before the lease lapses under a
// live controller; a dead one costs new connections at most DispatchLease plus Open vSwitch's
// one-second expiry sweep, which a client's SYN retransmissions (1 s, then 3 s and 7 s after
// the first) ride out.
const (
	DispatchLease = 4
	LeaseRefresh  = time.Second
)

// DispatchActions is what the controller's packet-out of a new connection's first frame
// does: mark it for backend b and run it through the tables again.
func DispatchActions(backend uint16) ofp.Actions {
	return ofp.Actions{
		&ofp.ActionSetField{Field: ofwire.RegMatch(regDispatch, uint32(backend)+1)},
		&ofp.ActionOutput{Port: ofp.PortTable, MaxLen: 0},
	}
}

// dispatch writes a reactive service's table-1 flows: new connections to the controller,
// and one pick flow per reachable backend.
func (p *planner) dispatch(s Service) {
	// reg3 = 0: a frame the controller marked for a backend whose pick flow is not on the
	// switch (yet, or any more) must not come back to the controller in a loop; it falls
	// through to the fallback below. The fallback is the select group's own hash: per flow
	// for TCP, per client address for UDP (a reactive UDP service has no table-7 slot flows;
	// docs/dataplane.md, "UDP per flow"), which is how it serves while no controller leads.
	newConn := append(toVIP(s), ofwire.CTStateMatch(ofwire.CTNew|ofwire.CTTrk, 0), ofwire.RegMatch(regDispatch, 0))
	p.leased(TableCT, PriorityVIP, MakeCookie(s.Index, NoIndex, KindDispatch), newConn,
		apply(output(ofp.PortController, ofp.ContentLenNoBuffer)), DispatchLease)
	p.flow(TableCT, PriorityDispatchFallback, MakeCookie(s.Index, NoIndex, KindDispatchFallback),
		append(toVIP(s), ofwire.CTStateMatch(ofwire.CTNew|ofwire.CTTrk, 0)),
		apply(&ofp.ActionGroup{Group: ofp.Group(s.GroupID)}))
	for _, b := range sortedBackends(s) {
		if !b.Reachable() {
			continue
		}
		p.flow(TableCT, PriorityDispatchPick, MakeCookie(s.Index, b.Index, KindDispatchPick),
			append(append(toVIP(s), ofwire.CTStateMatch(ofwire.CTNew|ofwire.CTTrk, 0)), ofwire.RegMatch(regDispatch, uint32(b.Index)+1)),
			apply(commitNAT(s, b, TableForward)))
	}
}
