// Package dataplane decides which OpenFlow flows and groups a switch must hold for the
// configured services, and plans the ordered messages that take a switch from what it holds to
// that state. It is pure: no sockets, no clock, no logging. controller/ofswitch sends the
// planned stages (each followed by a Barrier) and returns the raw multipart read-back that
// DecodeGroupDesc and DecodeFlowStats turn back into a State, so drift shows up as a
// non-empty Plan.
//
// Two modes (docs/design.md, "Data plane on Open vSwitch"):
//
//   - conntrack (default, Open vSwitch only): only new connections consult the select group,
//     so reweighting never moves an established TCP connection. Tables:
//     0 classify (VIP → ct(zone,nat,table=1); backend replies → ct(zone,nat,table=3);
//     ARP for the VIP → CONTROLLER, or for an IPv6 VIP neighbour solicitations for it and
//     advertisements to it; optional NORMAL at priority 0),
//     1 conntrack state (+new+trk to the VIP → group; +est+trk and +rel+trk → table 2),
//     2 forward (per backend: ip,nw_dst=IP → eth_dst, output),
//     3 return (ip,nw_src=VIP → eth_src=VIP MAC, NORMAL; anything else NORMAL).
//     With client affinity (Service.AffinityTimeout, affinity.go) new connections also pass
//     4 (learned client → backend, written by the switch's learn action), 5 (learned backend →
//     commit to it, else the group) and 6 (after a bucket: learn the client).
//   - stateless (plain OpenFlow 1.3, any switch): the select group rewrites eth_dst/ipv4_dst
//     or ipv6_dst (and the L4 port) per bucket and replies are rewritten back in table 0. A weight change
//     re-hashes live connections (measured: 80/20 → 70/30 broke 19 of 40). Its return flow
//     matches everything a backend sends from its service port, so direct (non-VIP) clients
//     of that port see the VIP as source: give such backends another port for direct use.
//
// An IPv6 service is the same design with IPv6 matches (eth_type 0x86dd, ipv6_src/ipv6_dst)
// and NAT to 16-byte addresses; a service and its backends are one family (Validate).
//
// Select groups are laid out as the switch's whole slot table (layout.go, slots.go,
// docs/dataplane.md "Exact shares"): Open vSwitch hashes new flows into 16–256 slots sized from
// the bucket weights, so the planner apportions 256 slots (64 on old or unknown switches) from
// the computed weights and writes bucket weights that make the switch build exactly that table
// (internal/slots models it per version, for the planner and the simulator alike). Options.OVS carries the switch's version; KeepSlots keeps
// stateless groups' slots in place across reweights; Layout reports the realised shares.
//
// The bytes are controller/ofwire's (flow and group mods, the read-back replies, the Nicira
// actions); this package keeps what is planning: its Flow (ofwire.Flow named by the cookie
// layout), canonical order, and which flows are its own (OwnFlowsRequest). It must not
// import controller/ofswitch's session, only its Message type.
package dataplane
