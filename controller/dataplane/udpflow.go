package dataplane

import (
	"fmt"
	"io"
	"slices"
	"time"

	"flowweight/controller/ofwire"
	"flowweight/internal/slots"

	"github.com/netrack/openflow/ofp"
)

// UDP per flow (docs/dataplane.md, "UDP per flow"). Open vSwitch's select group hashes a new
// flow over OpenFlow 1.3 without UDP ports, so every UDP flow from one client address would
// reach one backend. A UDP service with group dispatch and no affinity is therefore hashed by
// the Nicira multipath action, whose symmetric_l3l4+udp fields take the ports, into a slot
// table of flows the controller writes itself:
//
//   - the new-flow flow (table 1 in conntrack mode, the VIP flow of table 0 in stateless
//     mode): multipath(symmetric_l3l4+udp, 0, modulo_n, 256, 0, reg4[0..7]), goto table 7;
//   - table 7, one flow per slot: the VIP's match and reg4 = slot → the action a bucket of
//     the backend owning the slot would run (ct(commit,nat) to it, or the stateless rewrite
//     and output). The cookie names that backend.
//
// The 256 slots are apportioned exactly as a group's table is (slots.Apportion), and a
// reweight moves only the slots that must move (KeepSlots), so the realised split is the
// computed one to 1/256 whatever the switch's dp_hash limits. The select group is still
// written with the weights, for `ovs-ofctl dump-groups`, but no flow points at it. What it
// costs: the hash is taken in userspace, so each new UDP flow is an upcall where the group's
// dp_hash is not (docs/benchmarks.md). Open vSwitch before 2.5.0 (or a switch whose version
// is unknown) does not know the hash fields: such a switch keeps the per-address group, and
// the controller logs it and shows it (PerFlowUDP false).

// TableUDPSlot holds the per-slot flows of UDP services hashed per flow.
const TableUDPSlot uint8 = 7

// regUDPSlot carries the slot the multipath hash chose from the new-flow flow to table 7.
const regUDPSlot uint8 = 4

// UDPHash is how a switch hashes a UDP service's new flows (GroupLayout.UDPHash).
type UDPHash string

const (
	UDPPerFlow    UDPHash = "per_flow"    // the 5-tuple, ports included: multipath into table 7
	UDPPerAddress UDPHash = "per_address" // the select group's hash, which leaves UDP ports out
)

// UDPSlots is the size of the per-flow slot table: 256, the most one byte of reg4 holds,
// and the size of the largest group table Open vSwitch builds.
const UDPSlots = 256

// PerFlowUDP reports whether a switch with opt hashes service s's new UDP flows per flow (by
// the 5-tuple) rather than per client address: a UDP service with group dispatch and no
// affinity (affinity pins by client address anyway), not configured per address, on Open
// vSwitch 2.5.0 or later.
func PerFlowUDP(s Service, opt Options) bool {
	return s.Protocol == "udp" && s.Dispatch != DispatchReactive && s.AffinityTimeout == 0 &&
		s.UDPHash != UDPPerAddress && opt.OVS.AtLeast(2, 5, 0)
}

// udpPerAddressNote is the layout note of a UDP service that would be hashed per flow but
// whose switch cannot (Open vSwitch before 2.5.0, or a version not known): logged once, so
// an operator learns why one client address's flows all reach one backend.
func udpPerAddressNote(s Service, opt Options) []Note {
	if s.Protocol != "udp" || s.Dispatch == DispatchReactive || s.AffinityTimeout > 0 || s.UDPHash == UDPPerAddress || PerFlowUDP(s, opt) {
		return nil
	}
	return []Note{{Key: s.Name + " udp per address",
		Text: fmt.Sprintf("service %q: the switch (Open vSwitch %v) is not known to hash UDP ports (multipath symmetric_l3l4+udp needs 2.5.0), so UDP is balanced per client address: every flow from one address reaches one backend",
			s.Name, opt.OVS)}}
}

// udpHash is the instructions of a per-flow UDP service's new-flow flow.
func udpHash() ofp.Instructions {
	return ofp.Instructions{
		&ofp.InstructionApplyActions{Actions: ofp.Actions{&ofwire.Multipath{
			Fields: ofwire.HashSymmetricL3L4UDP, Algorithm: ofwire.MultipathModuloN,
			MaxLink: UDPSlots - 1, NBits: 8, Dst: ofwire.NXMReg(regUDPSlot)}}},
		&ofp.InstructionGotoTable{Table: ofp.Table(TableUDPSlot)},
	}
}

// udpSlotFlows writes s's table-7 flows: slot i to the backend the apportioned counts give
// it, the slots of each live backend contiguous in Index order (KeepSlots then keeps what
// the switch holds wherever the counts allow).
func (p *planner) udpSlotFlows(s Service) {
	live := liveBackends(s)
	count, _ := apportionLive(s, live, UDPSlots)
	slot := 0
	for i, b := range live {
		act := apply(bucketAction(s, b)...)
		for range count[i] {
			p.flow(TableUDPSlot, PriorityVIP, MakeCookie(s.Index, b.Index, KindUDPSlot),
				append(toVIP(s), ofwire.RegMatch(regUDPSlot, uint32(slot))), act)
			slot++
		}
	}
}

// udpLayout is the layout of a per-flow UDP service: UDPSlots slots of flows, apportioned
// over its live backends.
func udpLayout(s Service, live []Backend) GroupLayout {
	count, notes := apportionLive(s, live, UDPSlots)
	l := GroupLayout{N: UDPSlots, UDPHash: UDPPerFlow, Notes: notes}
	if len(live) > 0 {
		l.Table = slots.Table{NHash: UDPSlots, Hits: count}
		for i, c := range count {
			for range c {
				l.Table.Bucket = append(l.Table.Bucket, i)
			}
		}
	}
	for i, b := range live {
		l.Backends = append(l.Backends, BackendSlots{Index: b.Index, Name: b.Name, Weight: b.Weight, Slots: count[i]})
	}
	return l
}

// keepUDPSlots returns flows with each per-flow UDP service's slot flows (KindUDPSlot)
// reassigned to agree with current as far as the desired per-backend counts allow: a slot
// keeps the backend the switch holds for it while that backend still has slots to fill, and
// only the rest move, each to a backend still short of slots (in desired's order). A slot
// table whose counts did not change is left exactly as the switch holds it.
func keepUDPSlots(flows []Flow, current []Flow) []Flow {
	held := map[flowKey]Flow{}
	for _, f := range current {
		if _, _, k, ok := ParseCookie(f.Cookie); ok && k == KindUDPSlot {
			held[f.key()] = f
		}
	}
	if len(held) == 0 {
		return flows
	}
	out := slices.Clone(flows)
	// The slot flows of one service, by service index; each backend's flow body (cookie and
	// instructions) as desired writes it.
	type body struct {
		cookie uint64
		instr  string
	}
	bySvc := map[uint16][]int{}
	for i, f := range out {
		if s, _, k, ok := ParseCookie(f.Cookie); ok && k == KindUDPSlot {
			bySvc[s] = append(bySvc[s], i)
		}
	}
	for _, idx := range bySvc {
		need := map[body]int{}
		var order []body // desired's order of backends, for a deterministic fill
		for _, i := range idx {
			b := body{out[i].Cookie, out[i].Instructions}
			if need[b] == 0 {
				order = append(order, b)
			}
			need[b]++
		}
		var open []int
		for _, i := range idx {
			h, ok := held[out[i].key()]
			if b := (body{h.Cookie, h.Instructions}); ok && need[b] > 0 {
				need[b]--
				out[i].Cookie, out[i].Instructions = b.cookie, b.instr
			} else {
				open = append(open, i)
			}
		}
		for _, b := range order {
			for ; need[b] > 0; need[b]-- {
				out[open[0]].Cookie, out[open[0]].Instructions = b.cookie, b.instr
				open = open[1:]
			}
		}
	}
	return out
}

// apportionLive divides n slots over s's live backends by weight (slots.Apportion), with the
// notes a caller logs where the split differs from the computed one by more than rounding.
func apportionLive(s Service, live []Backend, n int) ([]int, []Note) {
	if len(live) == 0 {
		return nil, nil
	}
	w := make([]uint16, len(live))
	for i, b := range live {
		w[i] = b.Weight
	}
	count, plain := slots.Apportion(w, n), slots.Nearest(w, n)
	return count, slotNotes(s, live, count, plain, n)
}

// UDPSlotFlowsRequest asks for the slot flows of every per-flow UDP service (our cookie with
// kind KindUDPSlot): their packet counters count the new flows hashed to each slot, the
// per-flow counterpart of a group's bucket counters. Pass it to ofswitch's Multipart(ctx,
// ofp.MultipartTypeFlow, body).
func UDPSlotFlowsRequest() io.WriterTo {
	return ofwire.FlowStatsRequest(CookieMagic|uint64(KindUDPSlot), CookieMask|0xffff)
}

// UDPSplitOf is the split of per-flow UDP service s as the switch holds it (flows, its slot
// flows among them): "bucket" i is s.Backends[i], and each backend's slots are the slot flows
// whose cookie names it. It fails when a slot flow names no backend of s, or names one but
// sends elsewhere (another configuration's layout: a reload that reordered or replaced
// backends, read before the rewrite): its counters then say nothing about s's backends.
func UDPSplitOf(s Service, flows []Flow) (GroupSplit, error) {
	pos := make(map[uint16]int, len(s.Backends))
	want := make(map[uint16]string, len(s.Backends))
	sp := GroupSplit{Backend: make([]int, len(s.Backends)), Slots: make([]int, len(s.Backends))}
	for i, b := range s.Backends {
		pos[b.Index] = i
		sp.Backend[i] = i
		if b.Reachable() {
			want[b.Index] = encodeInstructions(apply(bucketAction(s, b)...))
		}
	}
	for _, f := range flows {
		svc, b, k, ok := ParseCookie(f.Cookie)
		if !ok || k != KindUDPSlot || svc != s.Index {
			continue
		}
		i, found := pos[b]
		if !found {
			return GroupSplit{}, fmt.Errorf("service %q: a slot flow sends to backend index %d, which it does not have", s.Name, b)
		}
		if f.Instructions != want[b] {
			return GroupSplit{}, fmt.Errorf("service %q: a slot flow of backend %q sends elsewhere (another layout)", s.Name, s.Backends[i].Name)
		}
		sp.Slots[i]++
		sp.NHash++
	}
	return sp, nil
}

// UDPSlotCounts sums the packet counters of service s's slot flows (UDPSlotFlowsRequest's
// reply) per backend, in s.Backends order, with the youngest flow's age: a slot flow replaced
// or re-created behind the controller's back restarts its counter, and its duration says so.
// It fails on a counter that names no backend of s. ok is false when s has no slot flow in
// the reply.
func UDPSlotCounts(s Service, counters []FlowCounter) (perBackend []uint64, youngest time.Duration, ok bool, err error) {
	return KindCounts(s, counters, KindUDPSlot)
}

// KindCounts sums the packet counters of s's per-backend flows of one kind (KindUDPSlot, or
// KindAffinityPinned from AffinityPinnedFlowsRequest: the new connections of returning clients
// sent to their learned backend past the group) per backend, by the rules of UDPSlotCounts.
func KindCounts(s Service, counters []FlowCounter, kind Kind) (perBackend []uint64, youngest time.Duration, ok bool, err error) {
	pos := make(map[uint16]int, len(s.Backends))
	for i, b := range s.Backends {
		pos[b.Index] = i
	}
	perBackend = make([]uint64, len(s.Backends))
	for _, c := range counters {
		svc, b, k, mine := ParseCookie(c.Cookie)
		if !mine || k != kind || svc != s.Index {
			continue
		}
		i, found := pos[b]
		if !found {
			return nil, 0, false, fmt.Errorf("service %q: a %s flow's counter names backend index %d, which it does not have", s.Name, kind, b)
		}
		age := c.Age()
		if !ok || age < youngest {
			youngest = age
		}
		ok = true
		perBackend[i] += c.Packets
	}
	return perBackend, youngest, ok, nil
}
