package dataplane

import (
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
//     pick flow is missing matches nothing in table 1 and is dropped, never sent back.
//   - the controller answers with a packet-out of the same frame from the same in_port:
//     set_field reg3 = the chosen backend's index + 1, output:TABLE. The frame runs the
//     pipeline again from table 0, as if it had just arrived.
//   - table 1, per reachable backend: a new connection to the VIP with reg3 = its index + 1
//     → ct(commit,nat) to it, then table 2: the same commit a bucket does.
//
// Registers start at zero for every packet the switch receives, so only a packet-out can
// match a pick flow. Established connections never reach table 1's new-connection flows, so
// a reweight, a controller restart or a lost controller moves none of them; what a lost
// controller costs is new connections (their first packet is dropped and the client
// retransmits) until a controller is back. The group is still written with the weights, for
// `ovs-ofctl dump-groups` and for a switch back to group dispatch, but nothing points at it.

// regDispatch carries the chosen backend (its index + 1) from the packet-out to table 1.
const regDispatch uint8 = 3

// PriorityDispatchPick is the priority of the per-backend pick flows of table 1, above the
// new-connection flow that sends to the controller.
const PriorityDispatchPick = PriorityVIP + 10

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
	// switch (yet, or any more) is dropped, and the client retransmits, instead of coming
	// back to the controller in a loop.
	newConn := append(toVIP(s), ofwire.CTStateMatch(ofwire.CTNew|ofwire.CTTrk, 0), ofwire.RegMatch(regDispatch, 0))
	p.flow(TableCT, PriorityVIP, MakeCookie(s.Index, NoIndex, KindDispatch), newConn,
		apply(output(ofp.PortController, ofp.ContentLenNoBuffer)))
	for _, b := range sortedBackends(s) {
		if !b.Reachable() {
			continue
		}
		p.flow(TableCT, PriorityDispatchPick, MakeCookie(s.Index, b.Index, KindDispatchPick),
			append(append(toVIP(s), ofwire.CTStateMatch(ofwire.CTNew|ofwire.CTTrk, 0)), ofwire.RegMatch(regDispatch, uint32(b.Index)+1)),
			apply(commitNAT(s, b, TableForward)))
	}
}
