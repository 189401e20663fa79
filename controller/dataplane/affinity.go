package dataplane

import (
	"encoding/binary"
	"io"

	"flowweight/controller/ofswitch"
	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// Client affinity (Service.AffinityTimeout > 0, conntrack mode): a client address keeps
// reaching the backend it was first given while it opens new connections at least every
// AffinityTimeout seconds; new clients are split by the weights as without affinity.
//
// The design is OVN's load-balancer affinity (a learn action into a table keyed by client and
// VIP, consulted before the load balancer, and fed after it) fitted to our tables,
// docs/dataplane.md "Client affinity":
//
//   - table 1, a new connection to the VIP: resubmit(,4), then goto_table:5.
//   - table 4 holds only learned flows (and a priority-0 flow with no action): client
//     address, VIP, protocol and port → reg0 = backend address, reg1 = backend port, with the
//     idle timeout and the cookie (service, backend, KindAffinity). A learned flow can only
//     load fields, hence the resubmit: the packet comes back with the registers set.
//   - table 5, per backend with a bucket: VIP and reg0/reg1 = that backend → tag reg2 with
//     the service and ct(commit,nat) to it, recirculating to table 8, bypassing the group;
//     anything else to the VIP → the group.
//   - table 8, per backend: reg2 = the service's tag, reg0/reg1 = the backend → table 2. It
//     only counts: each flow's counter is the backend's pinned new connections. Table 5's
//     own counters cannot be: Open vSwitch credits a datapath flow's packets to the rules of
//     its translation when its revalidator pushes them, and a client's datapath flow from
//     before its learn (which still sends it through the group) is credited to table 5's
//     backend flow once revalidated. After a recirculation the translation is the one
//     executed, as the group's buckets (chosen after the dp_hash recirculation) show:
//     measured on Open vSwitch 3.1, the buckets and the table-8 flows sum to every new
//     connection and match what the clients saw, where the bucket and table-5 counters
//     counted a returning client's connections twice.
//   - each bucket sets reg2 to the service's tag and commits with NAT to its backend, as
//     without affinity, but recirculates to table 6 instead of 2. The learn cannot sit in the
//     bucket: Open vSwitch runs a bucket as an OpenFlow action set, which keeps set-field and
//     one final action (ct, output, group, resubmit) and silently drops learn.
//   - table 6, per backend: reg2 = the service's tag, nw_dst and port = the backend (after
//     NAT) → learn the client's flow in table 4, then resubmit(,2) (goto_table only goes
//     forward). Learning again for a
//     known client only replaces its flow, so there is one per client.
//
// Only new connections ever reach tables 4 to 6, so the idle timeout counts from the
// client's last new connection, like Kubernetes' ClientIP timeout. A backend that loses its
// bucket (weight 0, or not reachable) loses its table-5 flow in the same plan: its clients'
// next connections go through the group and learn a new backend at once, whatever flows are
// left in table 4. The controller also deletes those flows by cookie when the backend goes
// out of service (AffinityDelete), so clients that have not come back yet are not sent to it
// when it returns. Registers start at zero for every packet, and no backend has address
// 0.0.0.0, so a client with no learned flow never matches a table-5 backend flow.

// PriorityAffinity is the priority of the learned flows (table 4) and of the per-backend
// flows of tables 5 and 6; the group flow of table 5 is PriorityBackend.
const PriorityAffinity uint16 = 200

// Registers: the learned flows set the backend's address and port; the buckets set the
// service's tag (its index + 1, so 0 is none) for table 6.
const (
	regAffinityIP      uint8 = 0
	regAffinityPort    uint8 = 1
	regAffinityService uint8 = 2
)

// affinity writes a service's new-connection flow and its flows in tables 5 and 6.
func (p *planner) affinity(s Service) {
	p.flow(TableCT, PriorityVIP, MakeCookie(s.Index, NoIndex, KindNew),
		append(toVIP(s), ofwire.CTStateMatch(ofwire.CTNew|ofwire.CTTrk, 0)),
		ofp.Instructions{
			&ofp.InstructionApplyActions{Actions: ofp.Actions{&ofwire.Resubmit{InPort: ofwire.InPortUnchanged, Table: TableAffinity}}},
			&ofp.InstructionGotoTable{Table: ofp.Table(TableAffinityPick)},
		})
	p.flow(TableAffinityPick, PriorityBackend, MakeCookie(s.Index, NoIndex, KindAffinityMiss), toVIP(s),
		apply(&ofp.ActionGroup{Group: ofp.Group(s.GroupID)}))
	for _, b := range sortedBackends(s) {
		if !b.Reachable() || b.Weight == 0 {
			continue
		}
		p.flow(TableAffinityPick, PriorityAffinity, MakeCookie(s.Index, b.Index, KindAffinityHit),
			append(toVIP(s), ofwire.RegMatch(regAffinityIP, ipv4Uint(b)), ofwire.RegMatch(regAffinityPort, uint32(b.port(s)))),
			apply(setField32(regAffinityService, serviceTag(s)), commitNAT(s, b, TableAffinityCount)))
		p.flow(TableAffinityCount, PriorityAffinity, MakeCookie(s.Index, b.Index, KindAffinityPinned),
			fields(ofwire.RegMatch(regAffinityService, serviceTag(s)), ofwire.RegMatch(regAffinityIP, ipv4Uint(b)),
				ofwire.RegMatch(regAffinityPort, uint32(b.port(s)))),
			apply(toForward()))
		p.flow(TableAffinityLearn, PriorityAffinity, MakeCookie(s.Index, b.Index, KindAffinityLearn),
			fields(ethType(0x0800), ipProtoField(s), xm(ofp.XMTypeIPv4Dst, b.IP.AsSlice()), l4(s, true, b.port(s)),
				ofwire.RegMatch(regAffinityService, serviceTag(s))),
			apply(affinityLearn(s, b), toForward()))
	}
}

// AffinityPinnedFlowsRequest asks for the table-8 flows of every affinity service (kind
// KindAffinityPinned, one per backend with a bucket): each counts the new connections of
// returning clients sent to that backend past the group, which the group's bucket counters
// never see (docs/dataplane.md, "Correcting the measured share"). Pass it to ofswitch's
// Multipart(ctx, ofp.MultipartTypeFlow, body); sum the reply with KindCounts.
func AffinityPinnedFlowsRequest() io.WriterTo {
	return ofwire.FlowStatsRequest(CookieMagic|uint64(KindAffinityPinned), CookieMask|0xffff)
}

// affinityShared is table 4's lowest-priority flow, with no action: a client with no learned
// flow comes back from the resubmit unchanged (a lookup miss there must not become a
// packet-in); table 6's, which forwards without learning should a bucket's backend have no
// table-6 flow; and table 8's, which forwards uncounted should a pinned backend have none.
func (p *planner) affinityShared() {
	p.flow(TableAffinity, PriorityNormal, MakeCookie(NoIndex, NoIndex, KindAffinityNone), nil, nil)
	p.flow(TableAffinityLearn, PriorityNormal, MakeCookie(NoIndex, NoIndex, KindAffinityLearnNone), nil, apply(toForward()))
	p.flow(TableAffinityCount, PriorityNormal, MakeCookie(NoIndex, NoIndex, KindAffinityPinnedNone), nil, apply(toForward()))
}

// toForward continues in table 2 from table 6: goto_table may only go forward.
func toForward() ofp.Action {
	return &ofwire.Resubmit{InPort: ofwire.InPortUnchanged, Table: TableForward}
}

// affinityBucket is backend b's bucket with affinity: tag the service, commit with NAT, and
// learn in table 6.
func affinityBucket(s Service, b Backend) ofp.Actions {
	return ofp.Actions{setField32(regAffinityService, serviceTag(s)), commitNAT(s, b, TableAffinityLearn)}
}

func serviceTag(s Service) uint32 { return uint32(s.Index) + 1 }

func setField32(reg uint8, v uint32) ofp.Action {
	return &ofp.ActionSetField{Field: ofwire.RegMatch(reg, v)}
}

// affinityLearn is the learn action of backend b's table-6 flow: it writes (or refreshes) the
// table-4 flow that sends this client of the service to b. The packet is already NATed to b,
// so the VIP and its port are immediates.
func affinityLearn(s Service, b Backend) *ofwire.Learn {
	l4 := ofwire.NXMTCPDst
	if s.Protocol == "udp" {
		l4 = ofwire.NXMUDPDst
	}
	return &ofwire.Learn{
		IdleTimeout: s.AffinityTimeout,
		Priority:    PriorityAffinity,
		Cookie:      MakeCookie(s.Index, b.Index, KindAffinity),
		Table:       TableAffinity,
		Specs: []ofwire.LearnSpec{
			ofwire.LearnMatchValue(ofwire.NXMEthType, 16, 0x0800),
			ofwire.LearnMatchValue(ofwire.NXMIPProto, 8, uint64(ipProto[s.Protocol])),
			ofwire.LearnMatchField(ofwire.NXMIPSrc, 32),
			ofwire.LearnMatchValue(ofwire.NXMIPDst, 32, uint64(ipv4Uint(Backend{IP: s.VIP}))),
			ofwire.LearnMatchValue(l4, 16, uint64(s.Port)),
			ofwire.LearnLoadValue(uint64(ipv4Uint(b)), 32, ofwire.NXMReg(regAffinityIP), 0),
			ofwire.LearnLoadValue(uint64(b.port(s)), 32, ofwire.NXMReg(regAffinityPort), 0),
		},
	}
}

func ipv4Uint(b Backend) uint32 {
	a := b.IP.As4()
	return binary.BigEndian.Uint32(a[:])
}

// IsLearned reports whether f was written by a switch's learn action rather than planned.
func IsLearned(f Flow) bool {
	_, _, k, ours := ParseCookie(f.Cookie)
	return ours && k == KindAffinity
}

// WithoutLearned drops the learned flows from a read-back: they are the switch's, come and
// go with traffic, and are neither drift nor to be deleted.
func (s State) WithoutLearned() State {
	out := State{Groups: s.Groups, Flows: make([]Flow, 0, len(s.Flows))}
	for _, f := range s.Flows {
		if !IsLearned(f) {
			out.Flows = append(out.Flows, f)
		}
	}
	return out
}

// AffinityDelete is the message that ends every affinity of one backend of one service: an
// OFPFC_DELETE in table 4 of the flows with exactly that backend's learned cookie.
func AffinityDelete(service, backend uint16) ofswitch.Message {
	c := MakeCookie(service, backend, KindAffinity)
	return ofswitch.Message{
		Type: of.TypeFlowMod,
		Body: flowMod(ofp.FlowDelete, Flow{Table: TableAffinity, Cookie: c}, ^uint64(0)),
		Desc: "flow delete table=4 " + describeCookie(c) + " (learned affinities)",
	}
}
