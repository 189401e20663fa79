package balancer

import (
	"flowweight/controller/ofswitch"
	"flowweight/controller/switchsync"
	"flowweight/controller/view"
)

// PacketIn implements ofswitch.Handler: the frame goes to its switch's syncer, which answers
// ARP/ND for the VIPs placed there and hands the frame to the learner (switchsync/arp.go). The
// syncer is the only writer to its switch; the balancer sends nothing.
//
// It reads the registry the board publishes, not the update loop's state: a packet-in never
// waits for an update to finish (the session's packet-in queue is bounded, and ARP replies
// for the VIPs would wait behind it).
func (b *Balancer) PacketIn(sw *ofswitch.Switch, pi ofswitch.PacketIn) {
	if sy := b.board.Syncer(sw.DatapathID()); sy != nil && sy.Serves(sw) {
		sy.PacketIn(pi)
	}
}

// newNeighbours is where backends are on each switch, shared by the syncers.
func newNeighbours(b *Balancer) *switchsync.Neighbours {
	m := b.metrics
	return switchsync.NewNeighbours(switchsync.NeighboursConfig{Logger: b.log, Limited: b.plog, Now: b.now, Up: upward{b},
		Metrics: switchsync.ARPMetrics{Replies: m.arpReplies, Requests: m.arpRequests, RequestsDropped: m.arpRequestsDropped,
			Refused: m.arpRefused, Changes: m.arpChanges, Faults: m.arpFaults}})
}

// upward is what the syncers and Neighbours tell the balancer (switchsync.Upward): kicks for
// an early update, and events about a switch, which go to the peers' ring.
type upward struct{ b *Balancer }

func (u upward) Kick() { u.b.Kick() }

func (u upward) Event(kind, service, text string) {
	u.b.events.AddPeer(view.Event{Time: u.b.now(), Kind: kind, Service: service, Text: text})
}
