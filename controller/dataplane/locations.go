package dataplane

import (
	"net"
	"net/netip"

	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

// Location is where a backend was found on a switch.
type Location struct {
	MAC  net.HardwareAddr
	Port uint32
}

// Locations recovers backends' MACs and switch ports from a state read back from a switch:
// the per-backend forwarding flows of conntrack mode (ipv4_dst or ipv6_dst=IP -> set eth_dst,
// output) and the buckets of stateless mode (set eth_dst, set ipv4_dst or ipv6_dst, output). A controller that
// restarts knows no MAC until ARP answers again; planning without these would delete every
// backend's flows and add them back a moment later, breaking connections in between.
// Entries it cannot read are skipped.
func Locations(s State) map[netip.Addr]Location {
	out := map[netip.Addr]Location{}
	for _, f := range s.Flows {
		if _, _, kind, ok := ParseCookie(f.Cookie); !ok || kind != KindForward {
			continue
		}
		fields, err := ofwire.ParseOXM([]byte(f.Match))
		if err != nil {
			continue
		}
		var ip netip.Addr
		for _, x := range fields {
			if a, ok := addrField(x, ofp.XMTypeIPv4Dst, ofp.XMTypeIPv6Dst); ok && x.Class == ofp.XMClassOpenflowBasic && len(x.Mask) == 0 {
				ip = a
			}
		}
		ins, err := ofwire.ParseInstructions([]byte(f.Instructions))
		if err != nil || !ip.IsValid() {
			continue
		}
		for _, in := range ins {
			if loc, _, ok := locate(in.Actions); ok {
				out[ip] = loc
			}
		}
	}
	for _, g := range s.Groups {
		for _, b := range g.Buckets {
			acts, err := ofwire.ParseActions([]byte(b.Actions))
			if err != nil {
				continue
			}
			if loc, ip, ok := locate(acts); ok && ip.IsValid() {
				out[ip] = loc
			}
		}
	}
	return out
}

// addrField reads an IPv4 address from a field of type v4 (4 bytes) or an IPv6 one from a
// field of type v6 (16 bytes).
func addrField(x ofp.XM, v4, v6 ofp.XMType) (netip.Addr, bool) {
	switch {
	case x.Type == v4 && len(x.Value) == 4:
		return netip.AddrFrom4([4]byte(x.Value)), true
	case x.Type == v6 && len(x.Value) == 16:
		return netip.AddrFrom16([16]byte(x.Value)), true
	}
	return netip.Addr{}, false
}

// locate reads set eth_dst, an optional set ipv4_dst or ipv6_dst, and output to a physical port.
func locate(acts ofp.Actions) (loc Location, ip netip.Addr, ok bool) {
	for _, a := range acts {
		switch a := a.(type) {
		case *ofp.ActionSetField:
			v := a.Field.Value
			switch {
			case a.Field.Type == ofp.XMTypeEthDst && len(v) == 6:
				loc.MAC = append(net.HardwareAddr(nil), v...)
			default:
				if a, ok := addrField(a.Field, ofp.XMTypeIPv4Dst, ofp.XMTypeIPv6Dst); ok {
					ip = a
				}
			}
		case *ofp.ActionOutput:
			if a.Port > 0 && a.Port <= ofp.PortMax {
				loc.Port = uint32(a.Port)
			}
		}
	}
	return loc, ip, loc.MAC != nil && loc.Port != 0
}
