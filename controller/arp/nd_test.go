package arp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

var (
	vip6    = netip.MustParseAddr("fd00:77::100")
	vip6MAC = VIPMAC(vip6)
	c6      = netip.MustParseAddr("fd00:77::2")  // a client
	b61     = netip.MustParseAddr("fd00:77::11") // a backend, learnt
	b62     = netip.MustParseAddr("fd00:77::12") // a backend, switch_port 7 configured
)

func ours6(a netip.Addr) (net.HardwareAddr, bool) { return VIPMAC(a), a == vip6 }

func pins6(ip netip.Addr) (Pin, bool) {
	switch ip {
	case b61:
		return Pin{}, true
	case b62:
		return Pin{Port: 7}, true
	}
	return Pin{}, false
}

// ndFrame builds an NS or NA with gopacket's layers and checksum, an implementation
// independent of buildND. lla nil leaves the link-layer option out; vlan >= 0 tags it.
type ndSpec struct {
	ethSrc, ethDst net.HardwareAddr
	src, dst       netip.Addr
	hop            uint8
	typ            uint8
	flags          uint8
	target         netip.Addr
	lla            net.HardwareAddr
	vlan           int
}

func ndFrame(t testing.TB, s ndSpec) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: s.ethSrc, DstMAC: s.ethDst, EthernetType: layers.EthernetTypeIPv6}
	ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: s.hop, SrcIP: s.src.AsSlice(), DstIP: s.dst.AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(s.typ, 0)}
	if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	var opts layers.ICMPv6Options
	var body gopacket.SerializableLayer
	if s.typ == icmpv6NS {
		if s.lla != nil {
			opts = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: s.lla}}
		}
		body = &layers.ICMPv6NeighborSolicitation{TargetAddress: s.target.AsSlice(), Options: opts}
	} else {
		if s.lla != nil {
			opts = layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: s.lla}}
		}
		body = &layers.ICMPv6NeighborAdvertisement{Flags: s.flags, TargetAddress: s.target.AsSlice(), Options: opts}
	}
	ls := []gopacket.SerializableLayer{eth, ip6, icmp, body}
	if s.vlan >= 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = []gopacket.SerializableLayer{eth, &layers.Dot1Q{VLANIdentifier: uint16(s.vlan), Type: layers.EthernetTypeIPv6}, ip6, icmp, body}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}

var clientMAC6 = net.HardwareAddr{0x3a, 0, 0, 0, 0, 0x02}

// clientNS is a client's multicast solicitation for target, as Linux sends it.
func clientNS(target netip.Addr) ndSpec {
	t := target.As16()
	return ndSpec{ethSrc: clientMAC6, ethDst: net.HardwareAddr{0x33, 0x33, 0xff, t[13], t[14], t[15]}, src: c6,
		dst: netip.AddrFrom16([16]byte{0xff, 2, 11: 1, 12: 0xff, 13: t[13], 14: t[14], 15: t[15]}), hop: 255, typ: icmpv6NS,
		target: target, lla: clientMAC6, vlan: -1}
}

// backendNA is a backend's answer to our solicitation from the VIP.
func backendNA(ip netip.Addr, mac net.HardwareAddr) ndSpec {
	return ndSpec{ethSrc: mac, ethDst: vip6MAC, src: ip, dst: vip6, hop: 255, typ: icmpv6NA, flags: naSolicited | naOverride,
		target: ip, lla: mac, vlan: -1}
}

func TestReplyND(t *testing.T) {
	mut := func(f func(*ndSpec)) ndSpec { s := clientNS(vip6); f(&s); return s }
	cases := []struct {
		name   string
		spec   ndSpec
		raw    func([]byte) []byte // applied after building, for what gopacket will not build
		ok     bool
		bad    bool // malformed: an error
		wantTo net.HardwareAddr
	}{
		{name: "multicast solicitation", spec: clientNS(vip6), ok: true, wantTo: clientMAC6},
		{name: "unicast NUD probe without SLLA: answered to the Ethernet source", spec: mut(func(s *ndSpec) {
			s.ethDst, s.dst, s.lla = vip6MAC, vip6, nil
		}), ok: true, wantTo: clientMAC6},
		{name: "tagged", spec: mut(func(s *ndSpec) { s.vlan = 42 }), ok: true, wantTo: clientMAC6},
		{name: "not our VIP", spec: clientNS(netip.MustParseAddr("fd00:77::99"))},
		{name: "duplicate address detection (source ::)", spec: mut(func(s *ndSpec) { s.src, s.lla = netip.IPv6Unspecified(), nil })},
		{name: "an advertisement", spec: backendNA(b61, macA)},
		{name: "multicast SLLA", spec: mut(func(s *ndSpec) { s.lla = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1} })},
		{name: "hop limit 64 (off-link)", spec: mut(func(s *ndSpec) { s.hop = 64 }), bad: true},
		{name: "bad checksum", spec: clientNS(vip6), raw: func(b []byte) []byte { b[14+40+2] ^= 0xff; return b }, bad: true},
		{name: "code 1", spec: clientNS(vip6), raw: func(b []byte) []byte { b[14+40+1] = 1; return b }, bad: true},
		{name: "truncated body", spec: clientNS(vip6), raw: func(b []byte) []byte { return b[:14+40+20] }, bad: true},
		{name: "multicast target", spec: clientNS(netip.MustParseAddr("ff02::1")), bad: true},
		{name: "SLLA from ::", spec: mut(func(s *ndSpec) { s.src = netip.IPv6Unspecified() }), bad: true},
		{name: "SLLA of 4 bytes", spec: mut(func(s *ndSpec) { s.lla = s.lla[:4] }), raw: nil, bad: true},
		{name: "behind a hop-by-hop header", spec: clientNS(vip6), raw: extHeader(0), ok: true, wantTo: clientMAC6},
		{name: "behind a destination options header", spec: clientNS(vip6), raw: extHeader(60), ok: true, wantTo: clientMAC6},
		{name: "fragmented", spec: clientNS(vip6), raw: extHeader(44), bad: true},
		{name: "behind a routing header: not read", spec: clientNS(vip6), raw: extHeader(43)},
		{name: "extension header past the end", spec: clientNS(vip6), raw: func(b []byte) []byte {
			b = extHeader(0)(b)
			b[14+40+1] = 200
			return b
		}, bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frame := ndFrame(t, tc.spec)
			if tc.raw != nil {
				frame = tc.raw(frame)
			}
			out, ok, err := Reply(frame, ours6)
			if (err != nil) != tc.bad || ok != tc.ok {
				t.Fatalf("Reply = ok %v err %v; want ok %v malformed %v", ok, err, tc.ok, tc.bad)
			}
			if !ok {
				return
			}
			// Read the answer with gopacket, not our decoder.
			p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
			eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			ip6 := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
			na, isNA := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
			if !isNA {
				t.Fatalf("answer is not an NA: %v", p)
			}
			if !bytes.Equal(eth.SrcMAC, vip6MAC) || !bytes.Equal(eth.DstMAC, tc.wantTo) {
				t.Errorf("answer %v -> %v, want %v -> %v", eth.SrcMAC, eth.DstMAC, vip6MAC, tc.wantTo)
			}
			if !ip6.SrcIP.Equal(vip6.AsSlice()) || !ip6.DstIP.Equal(c6.AsSlice()) || ip6.HopLimit != 255 {
				t.Errorf("answer %v -> %v hop %d", ip6.SrcIP, ip6.DstIP, ip6.HopLimit)
			}
			if !na.Solicited() || !na.Override() || na.Router() || !na.TargetAddress.Equal(vip6.AsSlice()) {
				t.Errorf("answer flags %#x target %v", na.Flags, na.TargetAddress)
			}
			if len(na.Options) != 1 || na.Options[0].Type != layers.ICMPv6OptTargetAddress || !bytes.Equal(na.Options[0].Data, vip6MAC) {
				t.Errorf("answer options %v, want the VIP's MAC", na.Options)
			}
			if (tc.spec.vlan >= 0) != (p.Layer(layers.LayerTypeDot1Q) != nil) {
				t.Errorf("tag kept %v, want %v", p.Layer(layers.LayerTypeDot1Q) != nil, tc.spec.vlan >= 0)
			}
			// Our decoder agrees, checksum included.
			if m, isND, err := decodeND(out); err != nil || !isND || m.typ != icmpv6NA {
				t.Errorf("our decoder reads the answer as %+v %v %v", m, isND, err)
			}
		})
	}
}

// extHeader puts an 8-byte IPv6 extension header of type typ (PadN inside) between the IPv6
// header and the ICMPv6 message of an untagged frame; the ICMPv6 checksum stays right.
func extHeader(typ byte) func([]byte) []byte {
	return func(b []byte) []byte {
		const ip = 14
		out := append([]byte(nil), b[:ip+40]...)
		out = append(out, 58, 0, 1, 4, 0, 0, 0, 0)
		out = append(out, b[ip+40:]...)
		out[ip+6] = typ
		binary.BigEndian.PutUint16(out[ip+4:], binary.BigEndian.Uint16(out[ip+4:])+8)
		return out
	}
}

func TestSolicit(t *testing.T) {
	out, err := Request(vip6MAC, vip6, b61)
	if err != nil {
		t.Fatal(err)
	}
	p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip6 := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	ns, ok := p.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	if !ok {
		t.Fatalf("not an NS: %v", p)
	}
	if eth.DstMAC.String() != "33:33:ff:00:00:11" || !bytes.Equal(eth.SrcMAC, vip6MAC) {
		t.Errorf("ethernet %v -> %v", eth.SrcMAC, eth.DstMAC)
	}
	if ip6.DstIP.String() != "ff02::1:ff00:11" || !ip6.SrcIP.Equal(vip6.AsSlice()) || ip6.HopLimit != 255 {
		t.Errorf("ipv6 %v -> %v hop %d", ip6.SrcIP, ip6.DstIP, ip6.HopLimit)
	}
	if !ns.TargetAddress.Equal(b61.AsSlice()) || len(ns.Options) != 1 || !bytes.Equal(ns.Options[0].Data, vip6MAC) {
		t.Errorf("ns target %v options %v", ns.TargetAddress, ns.Options)
	}
	if _, isND, err := decodeND(out); err != nil || !isND {
		t.Errorf("our decoder refuses our solicitation: %v %v", isND, err)
	}
	for _, bad := range []struct {
		mac      net.HardwareAddr
		src, dst netip.Addr
	}{
		{vip6MAC, vip6, netip.MustParseAddr("ff02::1")},
		{vip6MAC, netip.IPv6Unspecified(), b61},
		{vip6MAC, netip.MustParseAddr("10.0.0.1"), b61},
		{net.HardwareAddr{1, 0, 0, 0, 0, 1}, vip6, b61},
	} {
		if _, err := Request(bad.mac, bad.src, bad.dst); err == nil {
			t.Errorf("Request(%v, %v, %v) built a frame", bad.mac, bad.src, bad.dst)
		}
	}
}

// TestObserveND: the learner's rules, applied to advertisements.
func TestObserveND(t *testing.T) {
	mut := func(f func(*ndSpec)) ndSpec { s := backendNA(b61, macA); f(&s); return s }
	cases := []struct {
		name   string
		spec   ndSpec
		port   uint32
		asked  bool
		reason Reason
	}{
		{"solicited answer", backendNA(b61, macA), 3, true, ""},
		{"unsolicited (S clear)", mut(func(s *ndSpec) { s.flags = naOverride }), 3, true, ReasonGratuitous},
		{"to all nodes", mut(func(s *ndSpec) {
			s.flags, s.dst, s.ethDst = naOverride, netip.MustParseAddr("ff02::1"), net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
		}), 3, true, ReasonGratuitous},
		{"no target link-layer option", mut(func(s *ndSpec) { s.lla = nil }), 3, true, ReasonBadAddress},
		{"option differs from the Ethernet source", mut(func(s *ndSpec) { s.lla = macB }), 3, true, ReasonInconsistent},
		{"not asked", backendNA(b61, macA), 3, false, ReasonUnsolicited},
		{"not a backend", backendNA(netip.MustParseAddr("fd00:77::99"), macA), 3, true, ReasonNotBackend},
		{"configured port", backendNA(b62, macA), 3, true, ReasonWrongPort},
		{"addressed to another host", mut(func(s *ndSpec) { s.dst = c6 }), 3, true, ReasonWrongDestination},
		{"to another MAC", mut(func(s *ndSpec) { s.ethDst = clientMAC6 }), 3, true, ReasonWrongDestination},
		{"hop limit 254", mut(func(s *ndSpec) { s.hop = 254 }), 3, true, ReasonMalformed},
		{"LOCAL port", backendNA(b61, macA), 0xfffffffe, true, ReasonBadPort},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLearner()
			if tc.asked {
				for _, ip := range []netip.Addr{b61, b62, netip.MustParseAddr("fd00:77::99")} {
					if err := l.Ask(dpid, ip, vip6MAC, vip6, t0); err != nil {
						t.Fatal(err)
					}
				}
			}
			v := l.Observe(dpid, tc.port, ndFrame(t, tc.spec), pins6, t0.Add(time.Millisecond))
			if !v.ARP || v.Reason != tc.reason {
				t.Fatalf("verdict %+v, want reason %q", v, tc.reason)
			}
			l.Expire(t0.Add(time.Hour))
			loc, _, ok := l.Usable(dpid, b61)
			if want := tc.reason == ""; ok != want || (ok && !loc.Equal(Location{macA, tc.port})) {
				t.Fatalf("b61 usable %v at %v, want %v", ok, loc, want)
			}
		})
	}
	// A client's solicitation for the VIP teaches nothing and is not refused.
	l := newTestLearner()
	if v := l.Observe(dpid, 3, ndFrame(t, clientNS(vip6)), pins6, t0); !v.ARP || v.Reason != "" || v.Deadline != (time.Time{}) {
		t.Fatalf("client NS verdict %+v", v)
	}
	// A solicitation claiming a located backend's address from elsewhere is counted.
	now := learnAt6(t, l, b61, Location{macA, 3}, t0)
	ns := clientNS(vip6)
	ns.src, ns.lla, ns.ethSrc = b61, macB, macB
	if v := l.Observe(dpid, 4, ndFrame(t, ns), pins6, now); v.Reason != ReasonRequest {
		t.Fatalf("NS from b61's address elsewhere: %+v", v)
	}
	// Other IPv6 is not ND: nothing to count.
	other := ndFrame(t, clientNS(vip6))
	other[14+6] = 6 // next header TCP
	if v := l.Observe(dpid, 3, other, pins6, now); v.ARP {
		t.Fatalf("TCP counted as ND: %+v", v)
	}
}

// learnAt6 confirms ip at loc through one clean round of ND.
func learnAt6(t testing.TB, l *Learner, ip netip.Addr, loc Location, now time.Time) time.Time {
	t.Helper()
	if err := l.Ask(dpid, ip, vip6MAC, vip6, now); err != nil {
		t.Fatal(err)
	}
	if v := l.Observe(dpid, loc.Port, ndFrame(t, backendNA(ip, loc.MAC)), pins6, now.Add(time.Millisecond)); v.Reason != "" {
		t.Fatalf("clean answer refused: %s", v.Reason)
	}
	end := now.Add(l.Config().RequestTTL)
	l.Expire(end)
	if got, _, ok := l.Usable(dpid, ip); !ok || !got.Equal(loc) {
		t.Fatalf("after a clean round %v is at %v (%v), want %v", ip, got, ok, loc)
	}
	return end
}

// TestNDMoveNeedsTwoRounds: as with ARP, one advertisement from elsewhere never moves a
// located backend; two rounds answered only from the new place do.
func TestNDMoveNeedsTwoRounds(t *testing.T) {
	l := newTestLearner()
	home, away := Location{macA, 3}, Location{macB, 4}
	now := learnAt6(t, l, b61, home, t0)
	for round := 1; round <= 2; round++ {
		if err := l.Ask(dpid, b61, vip6MAC, vip6, now); err != nil {
			t.Fatal(err)
		}
		if v := l.Observe(dpid, away.Port, ndFrame(t, backendNA(b61, away.MAC)), pins6, now.Add(time.Millisecond)); v.Reason != ReasonDisagrees {
			t.Fatalf("round %d: %+v", round, v)
		}
		now = now.Add(l.Config().RequestTTL)
		l.Expire(now)
		loc, _, _ := l.Usable(dpid, b61)
		if want := map[int]Location{1: home, 2: away}[round]; !loc.Equal(want) {
			t.Fatalf("after round %d at %v, want %v", round, loc, want)
		}
	}
}

func FuzzND(f *testing.F) {
	f.Add(ndFrame(f, clientNS(vip6)), uint32(3))
	f.Add(ndFrame(f, backendNA(b61, macA)), uint32(3))
	f.Add(ndFrame(f, backendNA(b62, macA)), uint32(7))
	tagged := clientNS(vip6)
	tagged.vlan = 5
	f.Add(ndFrame(f, tagged), uint32(1))
	f.Add([]byte{}, uint32(1))
	home := Location{macA, 3}
	f.Fuzz(func(t *testing.T, frame []byte, port uint32) {
		if out, ok, err := Reply(frame, ours6); ok {
			if err != nil {
				t.Fatalf("ok with error %v", err)
			}
			m, isND, err := decodeND(out)
			if err != nil || !isND || m.typ != icmpv6NA || m.target != vip6 || !bytes.Equal(m.lla, vip6MAC) || !usableMAC(m.l2.eth.DstMAC) {
				t.Fatalf("answer %x reads as %+v %v %v", out, m, isND, err)
			}
		}
		if m, isND, err := decodeND(frame); isND && (err != nil || m.target.IsMulticast() || (m.lla != nil && len(m.lla) != 6)) {
			t.Fatalf("accepted %+v with %v", m, err)
		}
		l := newTestLearner()
		now := learnAt6(t, l, b61, home, t0)
		for _, ip := range []netip.Addr{b61, b62} {
			if err := l.Ask(dpid, ip, vip6MAC, vip6, now); err != nil {
				t.Fatal(err)
			}
		}
		l.Observe(dpid, port, frame, pins6, now)
		l.Expire(now.Add(time.Hour))
		if loc, _, _ := l.Usable(dpid, b61); !loc.Equal(home) {
			t.Fatalf("one frame moved b61 to %v", loc)
		}
		if loc, _, ok := l.Usable(dpid, b62); ok && (loc.Port != 7 || loc.Port != port || !usableMAC(loc.MAC)) {
			t.Fatalf("b62 located at %v from in_port %d", loc, port)
		}
	})
}
