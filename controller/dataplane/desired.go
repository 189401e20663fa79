package dataplane

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

// Mode selects the data-plane design of one service.
type Mode string

const (
	// ModeConntrack keeps established connections on their backend across reweights (Open
	// vSwitch only). It is the default (the empty Mode).
	ModeConntrack Mode = "conntrack"
	// ModeStateless uses standard OpenFlow 1.3 only; reweighting moves live connections.
	ModeStateless Mode = "stateless"
)

// Dispatch says who chooses a new connection's backend.
type Dispatch string

const (
	// DispatchGroup: the switch, by hashing into the select group's slot table (the default,
	// the empty Dispatch).
	DispatchGroup Dispatch = "group"
	// DispatchReactive: the controller, per connection, from work in flight (dispatch.go).
	// Conntrack mode without affinity.
	DispatchReactive Dispatch = "reactive"
)

// Service is one load-balanced virtual service as the controller wants it on a switch, with
// weights already chosen (panic policy included).
type Service struct {
	Name     string
	Index    uint16 // stable across restarts; goes into cookies; NoIndex is reserved
	VIP      netip.Addr
	VIPMAC   net.HardwareAddr // the MAC the controller answers ARP (IPv4) or ND (IPv6) for the VIP with
	Protocol string           // "tcp" or "udp"
	Port     uint16
	Mode     Mode   // "" means ModeConntrack
	GroupID  uint32 // select group id, at most ofp.GroupMax
	Zone     uint16 // conntrack zone (conntrack mode)
	// AffinityTimeout is client affinity's idle timeout in seconds (affinity.go); 0 is off.
	// Conntrack mode only.
	AffinityTimeout uint16
	// Dispatch is who chooses each new connection's backend; "" means DispatchGroup.
	Dispatch Dispatch
	// UDPHash is how a UDP service's new flows are hashed (udpflow.go): "" or UDPPerFlow
	// per flow where the switch can, UDPPerAddress by the select group.
	UDPHash  UDPHash
	Backends []Backend
}

// Backend is one server behind a service.
//
// A backend is "reachable" when its MAC and SwitchPort are known: only then does it get its
// per-backend flows (delivery in table 2 and the return path). It gets a bucket when it is
// reachable and Weight > 0. A reachable backend at weight 0 therefore keeps its flows, so in
// conntrack mode its established connections drain instead of breaking.
type Backend struct {
	Name       string
	Index      uint16 // stable per service; goes into cookies; NoIndex is reserved
	IP         netip.Addr
	Port       uint16           // 0 means the service's Port
	MAC        net.HardwareAddr // nil until the controller has learned it
	SwitchPort uint32           // 0 until the controller has learned it
	Weight     uint16
	// OutOfService: the weight is 0 because the backend is drained, down or stale (not
	// because the weights computed it so): its clients' affinities end (AffinityDelete).
	OutOfService bool
}

// Options apply to every service on one switch.
type Options struct {
	// Normal installs a priority-0 NORMAL flow in table 0 so that traffic that is not for a
	// VIP keeps working. DefaultOptions sets it; the zero Options does not.
	Normal bool
	// OVS is the switch's Open vSwitch version (from OFPMP_DESC): it decides the slot table
	// the groups are laid out for (LayoutSlots: 256 from 2.17, else 64). The zero value, an
	// unknown version or a switch that is not Open vSwitch, gets the 64-slot layout.
	OVS OVSVersion
}

// DefaultOptions returns the options for an Open vSwitch bridge that also carries ordinary
// traffic.
func DefaultOptions() Options { return Options{Normal: true} }

// Tables and priorities of the design (see the package comment).
const (
	TableClassify uint8 = 0
	TableCT       uint8 = 1
	TableForward  uint8 = 2
	TableReturn   uint8 = 3
	// Client affinity (affinity.go): 4 holds the learned flows, 5 acts on what they set, 6
	// learns after a bucket chose, 8 counts what a learned flow pinned.
	TableAffinity      uint8 = 4
	TableAffinityPick  uint8 = 5
	TableAffinityLearn uint8 = 6
	TableAffinityCount uint8 = 8

	PriorityARP     uint16 = 300
	PriorityVIP     uint16 = 200 // above PriorityBackend: a backend talking to a VIP is a client
	PriorityBackend uint16 = 100
	PriorityState   uint16 = 100
	PriorityNormal  uint16 = 0
)

// Validate reports every problem with the service's configuration, naming the field.
func (s Service) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("service %q: "+format, append([]any{s.Name}, a...)...))
	}
	if s.Name == "" {
		bad("name is empty")
	}
	if s.Index == NoIndex {
		bad("index %#x is reserved", NoIndex)
	}
	if !s.VIP.Is4() && !(s.VIP.Is6() && !s.VIP.Is4In6() && s.VIP.Zone() == "") {
		bad("vip %v is neither an IPv4 nor a plain IPv6 address", s.VIP)
	}
	if len(s.VIPMAC) != 6 {
		bad("vip mac %q is not a 6-byte MAC", s.VIPMAC)
	}
	if _, ok := ipProto[s.Protocol]; !ok {
		bad("protocol %q is neither tcp nor udp", s.Protocol)
	}
	if s.Port == 0 {
		bad("port is 0")
	}
	if s.Mode != "" && s.Mode != ModeConntrack && s.Mode != ModeStateless {
		bad("mode %q is neither %q nor %q", s.Mode, ModeConntrack, ModeStateless)
	}
	if s.AffinityTimeout > 0 && s.Mode == ModeStateless {
		bad("affinity_timeout needs mode %q (stateless mode has no connection tracking to pin a learned backend with)", ModeConntrack)
	}
	switch s.Dispatch {
	case "", DispatchGroup:
	case DispatchReactive:
		if s.Mode == ModeStateless || s.AffinityTimeout > 0 {
			bad("dispatch %q needs mode %q without affinity (the switch's connection tracking carries each connection the controller placed)", s.Dispatch, ModeConntrack)
		}
	default:
		bad("dispatch %q is neither %q nor %q", s.Dispatch, DispatchGroup, DispatchReactive)
	}
	if s.UDPHash != "" && s.UDPHash != UDPPerFlow && s.UDPHash != UDPPerAddress {
		bad("udp hash %q is neither %q nor %q", s.UDPHash, UDPPerFlow, UDPPerAddress)
	}
	if s.GroupID > uint32(ofp.GroupMax) {
		bad("group id %d above %d", s.GroupID, uint32(ofp.GroupMax))
	}
	seen := map[uint16]bool{}
	for _, b := range s.Backends {
		if b.Index == NoIndex {
			bad("backend %q: index %#x is reserved", b.Name, NoIndex)
		}
		if seen[b.Index] {
			bad("backend %q: index %d used twice", b.Name, b.Index)
		}
		seen[b.Index] = true
		if !b.IP.IsValid() || b.IP.Is4() != s.VIP.Is4() || b.IP.Is4In6() || b.IP.Zone() != "" {
			bad("backend %q: ip %v is not of the family of vip %v", b.Name, b.IP, s.VIP)
		}
		if b.MAC != nil && len(b.MAC) != 6 {
			bad("backend %q: mac %q is not a 6-byte MAC", b.Name, b.MAC)
		}
		if b.SwitchPort > uint32(ofp.PortMax) {
			bad("backend %q: switch port %d above %d", b.Name, b.SwitchPort, uint32(ofp.PortMax))
		}
	}
	return errors.Join(errs...)
}

// ValidateServices validates each service and the ways services can collide on one switch.
func ValidateServices(services []Service) error {
	var errs []error
	index := map[uint16]string{}
	group := map[uint32]string{}
	listen := map[string]string{}
	for _, s := range services {
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
		}
		if o, ok := index[s.Index]; ok {
			errs = append(errs, fmt.Errorf("service %q: index %d already used by %q", s.Name, s.Index, o))
		}
		index[s.Index] = s.Name
		if o, ok := group[s.GroupID]; ok {
			errs = append(errs, fmt.Errorf("service %q: group id %d already used by %q", s.Name, s.GroupID, o))
		}
		group[s.GroupID] = s.Name
		l := s.Protocol + " " + netip.AddrPortFrom(s.VIP, s.Port).String() // [fd00::1]:80 for IPv6
		if o, ok := listen[l]; ok {
			errs = append(errs, fmt.Errorf("service %q: %s already served by %q", s.Name, l, o))
		}
		listen[l] = s.Name
	}
	return errors.Join(errs...)
}

var ipProto = map[string]byte{"tcp": 6, "udp": 17}

// Reachable reports whether the backend's location is known, so that it has its per-backend
// flows (delivery, return, and in reactive dispatch its pick flow).
func (b Backend) Reachable() bool {
	return len(b.MAC) == 6 && b.SwitchPort != 0 && b.SwitchPort <= uint32(ofp.PortMax)
}

func (b Backend) port(s Service) uint16 { return cmp.Or(b.Port, s.Port) }

// Desired returns every flow and group that services need on one switch, in canonical order.
//
// Services failing Validate are left out (the controller validates configuration first and
// reports it). Services are taken in Index order and backends in Index order; where two
// services would install a flow with the same identity (table, priority, match) — a shared
// VIP's ARP and return flows, or a backend address used by two services — the first one's
// flow is kept, so such services must agree on MAC, port and zone. Each valid service gets its
// group even with no bucket (its flows point at it; packets to it are then dropped).
func Desired(services []Service, opt Options) State {
	ss := slices.Clone(services)
	slices.SortStableFunc(ss, func(a, b Service) int { return cmp.Compare(a.Index, b.Index) })
	p := planner{seen: map[flowKey]bool{}, groups: map[uint32]bool{}, opt: opt}
	conntrack, affinity := false, false
	for _, s := range ss {
		if s.Validate() != nil {
			continue
		}
		if s.Mode == ModeStateless {
			p.stateless(s)
		} else {
			conntrack = true
			affinity = affinity || s.AffinityTimeout > 0
			p.conntrack(s)
		}
	}
	if conntrack {
		shared := func(k Kind) uint64 { return MakeCookie(NoIndex, NoIndex, k) }
		p.flow(TableCT, PriorityState, shared(KindEst), fields(ofwire.CTStateMatch(ofwire.CTEst|ofwire.CTTrk, 0)), gotoTable(TableForward))
		p.flow(TableCT, PriorityState, shared(KindRel), fields(ofwire.CTStateMatch(ofwire.CTRel|ofwire.CTTrk, 0)), gotoTable(TableForward))
		p.flow(TableReturn, PriorityNormal, shared(KindReturnNormal), nil, apply(output(ofp.PortNormal, 0)))
	}
	if affinity {
		p.affinityShared()
	}
	if opt.Normal {
		p.flow(TableClassify, PriorityNormal, MakeCookie(NoIndex, NoIndex, KindNormal), nil, apply(output(ofp.PortNormal, 0)))
	}
	return p.state.Canonical()
}

// planner accumulates a State, dropping later flows with an identity already taken.
type planner struct {
	state  State
	seen   map[flowKey]bool
	groups map[uint32]bool
	opt    Options
}

func (p *planner) flow(table uint8, prio uint16, cookie uint64, match []ofp.XM, instr ofp.Instructions) {
	p.leased(table, prio, cookie, match, instr, 0)
}

// leased is flow with a hard timeout of lease seconds (0: none), which the switch's syncer
// renews (Renewals): a flow that must not outlive the controller that keeps it.
func (p *planner) leased(table uint8, prio uint16, cookie uint64, match []ofp.XM, instr ofp.Instructions, lease uint16) {
	m, err := ofwire.EncodeFields(match)
	if err != nil {
		panic(fmt.Sprintf("dataplane: encoding a validated match: %v", err))
	}
	f := Flow{Table: table, Priority: prio, Cookie: cookie, HardTimeout: lease, Match: m, Instructions: encodeInstructions(instr)}
	if p.seen[f.key()] {
		return
	}
	p.seen[f.key()] = true
	p.state.Flows = append(p.state.Flows, f)
}

func (p *planner) group(id uint32, buckets []Bucket) {
	if p.groups[id] {
		return
	}
	p.groups[id] = true
	p.state.Groups = append(p.state.Groups, Group{ID: id, Type: ofp.GroupTypeSelect, Buckets: buckets})
}

// arp sends ARP for the VIP to the controller whole (no buffering), so it can answer for
// the VIP and learn backends from replies to the requests it sends from the VIP.
func (p *planner) arp(s Service) {
	p.flow(TableClassify, PriorityARP, MakeCookie(s.Index, NoIndex, KindARP),
		fields(ethType(0x0806), xm(ofp.XMTypeARPTPA, s.VIP.AsSlice())),
		apply(output(ofp.PortController, ofp.ContentLenNoBuffer)))
}

// nd sends IPv6 neighbour discovery for the VIP to the controller whole: solicitations whose
// target is the VIP (the controller answers them, as ARP requests), and advertisements
// addressed to the VIP (answers to the solicitations the controller sends from the VIP to
// locate backends). Every other ICMPv6, other hosts' ND included, stays with NORMAL.
func (p *planner) nd(s Service) {
	p.flow(TableClassify, PriorityARP, MakeCookie(s.Index, NoIndex, KindNS),
		fields(ethType(ethTypeIPv6), xm(ofp.XMTypeIPProto, []byte{ipProtoICMPv6}), xm(ofp.XMTypeICMPv6Type, []byte{icmpv6NS}),
			xm(ofp.XMTypeIPv6NDTarget, s.VIP.AsSlice())),
		apply(output(ofp.PortController, ofp.ContentLenNoBuffer)))
	p.flow(TableClassify, PriorityARP, MakeCookie(s.Index, NoIndex, KindNA),
		fields(ethType(ethTypeIPv6), xm(ofp.XMTypeIPv6Dst, s.VIP.AsSlice()), xm(ofp.XMTypeIPProto, []byte{ipProtoICMPv6}),
			xm(ofp.XMTypeICMPv6Type, []byte{icmpv6NA})),
		apply(output(ofp.PortController, ofp.ContentLenNoBuffer)))
}

// resolution installs the service's neighbour-resolution punt: ARP for IPv4, ND for IPv6.
func (p *planner) resolution(s Service) {
	if s.VIP.Is4() {
		p.arp(s)
	} else {
		p.nd(s)
	}
}

const (
	ethTypeIPv4   uint16 = 0x0800
	ethTypeIPv6   uint16 = 0x86dd
	ipProtoICMPv6 byte   = 58
	icmpv6NS      byte   = 135
	icmpv6NA      byte   = 136
)

// family gives the EtherType and the source and destination address fields of an address's
// family: IPv4 or IPv6 (Validate keeps a service and its backends in one family).
func family(a netip.Addr) (eth uint16, src, dst ofp.XMType) {
	if a.Is4() {
		return ethTypeIPv4, ofp.XMTypeIPv4Src, ofp.XMTypeIPv4Dst
	}
	return ethTypeIPv6, ofp.XMTypeIPv6Src, ofp.XMTypeIPv6Dst
}

// ipDst matches packets of a's family to a; ipSrc from a.
func ipDst(a netip.Addr) []ofp.XM {
	eth, _, dst := family(a)
	return fields(ethType(eth), xm(dst, a.AsSlice()))
}

func ipSrc(a netip.Addr) []ofp.XM {
	eth, src, _ := family(a)
	return fields(ethType(eth), xm(src, a.AsSlice()))
}

// toVIP matches the service's traffic from clients.
func toVIP(s Service) []ofp.XM {
	eth, _, dst := family(s.VIP)
	return fields(ethType(eth), ipProtoField(s), xm(dst, s.VIP.AsSlice()), l4(s, true, s.Port))
}

// fromBackend matches a backend's replies.
func fromBackend(s Service, b Backend) []ofp.XM {
	eth, src, _ := family(b.IP)
	return fields(ethType(eth), ipProtoField(s), xm(src, b.IP.AsSlice()), l4(s, false, b.port(s)))
}

func (p *planner) conntrack(s Service) {
	p.resolution(s)
	p.flow(TableClassify, PriorityVIP, MakeCookie(s.Index, NoIndex, KindVIP), toVIP(s),
		apply(&ofwire.CT{Zone: s.Zone, Table: TableCT, Actions: ofp.Actions{&ofwire.NAT{}}}))
	if s.Dispatch == DispatchReactive {
		p.dispatch(s)
	} else if s.AffinityTimeout > 0 {
		p.affinity(s)
	} else if PerFlowUDP(s, p.opt) {
		p.flow(TableCT, PriorityVIP, MakeCookie(s.Index, NoIndex, KindUDPHash),
			append(toVIP(s), ofwire.CTStateMatch(ofwire.CTNew|ofwire.CTTrk, 0)), udpHash())
		p.udpSlotFlows(s)
	} else {
		p.flow(TableCT, PriorityVIP, MakeCookie(s.Index, NoIndex, KindNew),
			append(toVIP(s), ofwire.CTStateMatch(ofwire.CTNew|ofwire.CTTrk, 0)),
			apply(&ofp.ActionGroup{Group: ofp.Group(s.GroupID)}))
	}
	var actions []string // of the live backends, in order
	for _, b := range sortedBackends(s) {
		if !b.Reachable() {
			continue
		}
		p.flow(TableForward, PriorityBackend, MakeCookie(s.Index, b.Index, KindForward),
			ipDst(b.IP),
			apply(setField(ofp.XMTypeEthDst, b.MAC), output(ofp.PortNo(b.SwitchPort), 0)))
		p.flow(TableClassify, PriorityBackend, MakeCookie(s.Index, b.Index, KindReturn), fromBackend(s, b),
			apply(&ofwire.CT{Zone: s.Zone, Table: TableReturn, Actions: ofp.Actions{&ofwire.NAT{}}}))
		if b.Weight > 0 {
			actions = append(actions, bucketActions(s, b))
		}
	}
	p.flow(TableReturn, PriorityBackend, MakeCookie(s.Index, NoIndex, KindReturnVIP),
		ipSrc(s.VIP),
		apply(setField(ofp.XMTypeEthSrc, s.VIPMAC), output(ofp.PortNormal, 0)))
	p.group(s.GroupID, p.buckets(s, actions))
}

// buckets lays out the group of s over its live backends (liveBackends order), whose bucket
// actions are given; see layout.go.
func (p *planner) buckets(s Service, actions []string) []Bucket {
	plan, _, _ := layoutBuckets(s, liveBackends(s), p.opt, func(i int) int { return len(actions[i]) })
	var out []Bucket
	for _, b := range plan {
		out = append(out, Bucket{Weight: b.weight, Actions: actions[b.backend]})
	}
	return out
}

func (p *planner) stateless(s Service) {
	p.resolution(s)
	if PerFlowUDP(s, p.opt) {
		p.flow(TableClassify, PriorityVIP, MakeCookie(s.Index, NoIndex, KindVIP), toVIP(s), udpHash())
		p.udpSlotFlows(s)
	} else {
		p.flow(TableClassify, PriorityVIP, MakeCookie(s.Index, NoIndex, KindVIP), toVIP(s),
			apply(&ofp.ActionGroup{Group: ofp.Group(s.GroupID)}))
	}
	var actions []string // of the live backends, in order
	for _, b := range sortedBackends(s) {
		if !b.Reachable() {
			continue
		}
		_, src, _ := family(s.VIP)
		back := ofp.Actions{setField(src, s.VIP.AsSlice())}
		if b.port(s) != s.Port {
			back = append(back, setField(l4Type(s, false), port16(s.Port)))
		}
		back = append(back, setField(ofp.XMTypeEthSrc, s.VIPMAC), output(ofp.PortNormal, 0))
		p.flow(TableClassify, PriorityBackend, MakeCookie(s.Index, b.Index, KindReturn), fromBackend(s, b), apply(back...))
		if b.Weight > 0 {
			actions = append(actions, bucketActions(s, b))
		}
	}
	p.group(s.GroupID, p.buckets(s, actions))
}

// bucketActions is the action list of a backend's bucket in the service's group: in
// conntrack mode a committing ct with destination NAT, in stateless mode the rewrites and the
// output. One definition serves the planner and the read-back (HeldWeights).
func bucketActions(s Service, b Backend) string { return encodeActions(bucketAction(s, b)) }

// bucketAction is bucketActions before encoding; a per-flow UDP slot flow runs the same.
func bucketAction(s Service, b Backend) ofp.Actions {
	if s.Mode == ModeStateless {
		_, _, dst := family(b.IP)
		fwd := ofp.Actions{setField(ofp.XMTypeEthDst, b.MAC), setField(dst, b.IP.AsSlice())}
		if b.port(s) != s.Port {
			fwd = append(fwd, setField(l4Type(s, true), port16(b.port(s))))
		}
		return append(fwd, output(ofp.PortNo(b.SwitchPort), 0))
	}
	if s.AffinityTimeout > 0 {
		return affinityBucket(s, b)
	}
	return ofp.Actions{commitNAT(s, b, TableForward)}
}

// commitNAT commits a new connection with destination NAT to backend b, recirculating to
// table next.
func commitNAT(s Service, b Backend, next uint8) ofp.Action {
	return &ofwire.CT{Flags: ofwire.CTCommit, Zone: s.Zone, Table: next, Actions: ofp.Actions{
		&ofwire.NAT{Flags: ofwire.NATDst, IPMin: b.IP, PortMin: b.port(s)}}}
}

func sortedBackends(s Service) []Backend {
	bs := slices.Clone(s.Backends)
	slices.SortStableFunc(bs, func(a, b Backend) int { return cmp.Compare(a.Index, b.Index) })
	return bs
}

func fields(f ...ofp.XM) []ofp.XM { return f }

func xm(t ofp.XMType, v []byte) ofp.XM {
	return ofp.XM{Class: ofp.XMClassOpenflowBasic, Type: t, Value: ofp.XMValue(slices.Clone(v))}
}

func ethType(t uint16) ofp.XM { return xm(ofp.XMTypeEthType, port16(t)) }

func ipProtoField(s Service) ofp.XM { return xm(ofp.XMTypeIPProto, []byte{ipProto[s.Protocol]}) }

func port16(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }

func l4Type(s Service, dst bool) ofp.XMType {
	switch {
	case s.Protocol == "udp" && dst:
		return ofp.XMTypeUDPDst
	case s.Protocol == "udp":
		return ofp.XMTypeUDPSrc
	case dst:
		return ofp.XMTypeTCPDst
	default:
		return ofp.XMTypeTCPSrc
	}
}

func l4(s Service, dst bool, port uint16) ofp.XM { return xm(l4Type(s, dst), port16(port)) }

func setField(t ofp.XMType, v []byte) ofp.Action { return &ofp.ActionSetField{Field: xm(t, v)} }

func output(port ofp.PortNo, maxLen uint16) ofp.Action {
	return &ofp.ActionOutput{Port: port, MaxLen: maxLen}
}

func apply(a ...ofp.Action) ofp.Instructions {
	return ofp.Instructions{&ofp.InstructionApplyActions{Actions: a}}
}

func gotoTable(t uint8) ofp.Instructions {
	return ofp.Instructions{&ofp.InstructionGotoTable{Table: ofp.Table(t)}}
}
