package arp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/gopacket/layers"
)

// IPv6 neighbour discovery (RFC 4861) for the VIPs and backends of IPv6 services: the same
// two jobs as ARP for IPv4, answering solicitations for a VIP (ReplyND, reached through
// Reply) and soliciting backends (Solicit, reached through Request) whose advertisements the
// Learner judges by the same rules (Observe).
//
// The frames are read and written here by hand on top of gopacket's Ethernet and 802.1Q
// layers, rather than with github.com/mdlayher/ndp or gopacket's ICMPv6 layers: ndp encodes
// only the ICMPv6 body (the Ethernet and IPv6 headers and the pseudo-header checksum would
// still be ours), and an NS or NA with its one link-layer option is 72 fixed bytes whose
// every validity rule (hop limit 255, code 0, checksum, option lengths) the decoder must
// check itself anyway; a new dependency would buy nothing.

const (
	ipv6HeaderLen = 40
	ndLen         = 24 // ICMPv6 type, code, checksum, flags/reserved, target
	optSourceLL   = 1
	optTargetLL   = 2
	naRouter      = 0x80
	naSolicited   = 0x40
	naOverride    = 0x20
)

// ndMsg is one decoded neighbour solicitation or advertisement.
type ndMsg struct {
	l2       decoded // Ethernet and the optional 802.1Q tag; arp unused
	src, dst netip.Addr
	typ      uint8 // icmpv6NS or icmpv6NA
	flags    uint8 // NA: R, S, O
	target   netip.Addr
	lla      net.HardwareAddr // NS: source link-layer option; NA: target link-layer option; nil if absent
}

const (
	icmpv6NS = 135
	icmpv6NA = 136
)

// decodeND reads an Ethernet frame as IPv6 neighbour discovery. isND is false, with no error,
// for a well-formed frame that is not an NS or NA (other IPv6, other ICMPv6, ICMPv6 behind a
// routing header); err is set for an NS or NA that fails RFC 4861's validity
// checks (§7.1.1, §7.1.2): hop limit not 255, code not 0, bad checksum, short body, a
// multicast target, a zero-length or overrunning option, a source link-layer option with an
// unspecified source, or the solicited flag on an advertisement to a multicast address; and
// for a fragment or an extension header that runs past the packet.
func decodeND(frame []byte) (m ndMsg, isND bool, err error) {
	typ, payload, err := decodeL2(frame, &m.l2)
	if err != nil || typ != layers.EthernetTypeIPv6 {
		return m, false, err
	}
	if len(payload) < ipv6HeaderLen {
		return m, false, fmt.Errorf("%w: IPv6 header is %d bytes, need 40", ErrMalformed, len(payload))
	}
	if payload[0]>>4 != 6 {
		return m, false, nil // not IPv6: not ours to judge
	}
	plen := int(binary.BigEndian.Uint16(payload[4:6]))
	if plen > len(payload)-ipv6HeaderLen {
		return m, false, fmt.Errorf("%w: IPv6 payload length %d, %d bytes present", ErrMalformed, plen, len(payload)-ipv6HeaderLen)
	}
	body := payload[ipv6HeaderLen : ipv6HeaderLen+plen] // drops Ethernet padding
	// Open vSwitch matches nd_target through extension headers, so a solicitation behind a
	// hop-by-hop or destination options header reaches us too: skip those. A fragment header
	// makes it malformed (RFC 6980 forbids fragmented neighbour discovery); after any other
	// header it is not ICMPv6 we know how to read.
	next := payload[6]
	for next == 0 || next == 60 || next == 44 {
		if next == 44 {
			return m, false, fmt.Errorf("%w: fragmented IPv6 packet (RFC 6980: neighbour discovery is never fragmented)", ErrMalformed)
		}
		if len(body) < 8 || len(body) < 8+int(body[1])*8 {
			return m, false, fmt.Errorf("%w: IPv6 extension header runs past the %d bytes left", ErrMalformed, len(body))
		}
		next, body = body[0], body[8+int(body[1])*8:]
	}
	if next != 58 || len(body) < 1 || (body[0] != icmpv6NS && body[0] != icmpv6NA) {
		return m, false, nil
	}
	m.typ = body[0]
	m.src = netip.AddrFrom16([16]byte(payload[8:24]))
	m.dst = netip.AddrFrom16([16]byte(payload[24:40]))
	switch {
	case payload[7] != 255:
		return m, false, fmt.Errorf("%w: neighbour discovery with hop limit %d, want 255 (sent from off-link)", ErrMalformed, payload[7])
	case len(body) < ndLen:
		return m, false, fmt.Errorf("%w: neighbour discovery message is %d bytes, need 24", ErrMalformed, len(body))
	case body[1] != 0:
		return m, false, fmt.Errorf("%w: neighbour discovery code %d, want 0", ErrMalformed, body[1])
	case icmpv6Checksum(m.src, m.dst, body) != 0:
		return m, false, fmt.Errorf("%w: ICMPv6 checksum mismatch", ErrMalformed)
	}
	m.flags = body[4]
	m.target = netip.AddrFrom16([16]byte(body[8:24]))
	if m.target.IsMulticast() {
		return m, false, fmt.Errorf("%w: neighbour discovery target %v is multicast", ErrMalformed, m.target)
	}
	want := uint8(optSourceLL)
	if m.typ == icmpv6NA {
		want = optTargetLL
	}
	for opts := body[ndLen:]; len(opts) > 0; {
		if len(opts) < 2 || opts[1] == 0 || int(opts[1])*8 > len(opts) {
			return m, false, fmt.Errorf("%w: neighbour discovery option of length %d in %d bytes", ErrMalformed, optLen(opts), len(opts))
		}
		n := int(opts[1]) * 8
		if opts[0] == want && m.lla == nil {
			if n != 8 {
				return m, false, fmt.Errorf("%w: link-layer address option of %d bytes, want 8 for Ethernet", ErrMalformed, n)
			}
			m.lla = bytes.Clone(opts[2:8])
		}
		opts = opts[n:]
	}
	if m.typ == icmpv6NS && m.src.IsUnspecified() && m.lla != nil {
		return m, false, fmt.Errorf("%w: solicitation from :: with a source link-layer option", ErrMalformed)
	}
	if m.typ == icmpv6NA && m.dst.IsMulticast() && m.flags&naSolicited != 0 {
		return m, false, fmt.Errorf("%w: solicited advertisement to multicast %v", ErrMalformed, m.dst)
	}
	return m, true, nil
}

func optLen(o []byte) int {
	if len(o) < 2 {
		return 0
	}
	return int(o[1]) * 8
}

// icmpv6Checksum is the Internet checksum of the IPv6 pseudo-header and body: 0 for a body
// whose checksum field is right, the value to store for one whose field is zero.
func icmpv6Checksum(src, dst netip.Addr, body []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	var l [8]byte
	binary.BigEndian.PutUint32(l[0:], uint32(len(body)))
	l[7] = 58
	add(l[:])
	add(body)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// ReplyND answers a neighbour solicitation for an IPv6 VIP with an advertisement from the
// VIP's MAC (solicited and override set, router clear, the target link-layer option
// carrying the MAC), sent to the solicitor's address and MAC (its source link-layer option,
// or the Ethernet source when a unicast solicitation omits it), keeping the 802.1Q tag.
//
// ok is false, with no error, for anything that is not a solicitation for one of ours, and
// for duplicate address detection (source ::): a host probing for the VIP's address is told
// nothing, as gratuitous ARP for a VIP is not answered. err is set for a malformed NS.
func ReplyND(frame []byte, lookup func(netip.Addr) (net.HardwareAddr, bool)) ([]byte, bool, error) {
	m, isND, err := decodeND(frame)
	if err != nil || !isND || m.typ != icmpv6NS || m.src.IsUnspecified() {
		return nil, false, err
	}
	requester := m.lla
	if requester == nil {
		requester = m.l2.eth.SrcMAC
	}
	if !usableMAC(requester) || m.src.IsMulticast() {
		return nil, false, nil
	}
	vipMAC, ours := lookup(m.target)
	if !ours {
		return nil, false, nil
	}
	if len(vipMAC) != 6 {
		return nil, false, fmt.Errorf("arp: lookup gave %d-byte MAC %v for %v, want 6", len(vipMAC), vipMAC, m.target)
	}
	return buildND(m.l2, vipMAC, requester, m.target, m.src, icmpv6NA, naSolicited|naOverride, m.target, optTargetLL, vipMAC), true, nil
}

// Solicit builds a neighbour solicitation for target from srcMAC/srcIP (the VIP), to the
// target's solicited-node multicast address, carrying srcMAC as the source link-layer
// option so the backend can answer without soliciting the VIP in turn. Both addresses must
// be IPv6 and not IPv4-mapped.
func Solicit(srcMAC net.HardwareAddr, srcIP, target netip.Addr) ([]byte, error) {
	if !usableMAC(srcMAC) {
		return nil, fmt.Errorf("arp: solicitation source MAC %v is not a unicast 6-byte address", srcMAC)
	}
	if !srcIP.Is6() || srcIP.Is4In6() || srcIP.IsMulticast() || srcIP.IsUnspecified() {
		return nil, fmt.Errorf("arp: solicitation source %v is not an IPv6 unicast address", srcIP)
	}
	if !target.Is6() || target.Is4In6() || target.IsMulticast() || target.IsUnspecified() {
		return nil, fmt.Errorf("arp: solicitation target %v is not an IPv6 unicast address", target)
	}
	t := target.As16()
	group := netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 1, 12: 0xff, 13: t[13], 14: t[14], 15: t[15]})
	ethDst := net.HardwareAddr{0x33, 0x33, 0xff, t[13], t[14], t[15]}
	return buildND(decoded{}, srcMAC, ethDst, srcIP, group, icmpv6NS, 0, target, optSourceLL, srcMAC), nil
}

// buildND serialises Ethernet (+ the tag of req if any), IPv6 and an NS or NA with one
// link-layer option: 86 bytes untagged, above the Ethernet minimum.
func buildND(req decoded, ethSrc, ethDst net.HardwareAddr, src, dst netip.Addr, typ, flags uint8, target netip.Addr, opt uint8, lla net.HardwareAddr) []byte {
	var out []byte
	out = append(out, ethDst...)
	out = append(out, ethSrc...)
	if req.tagged {
		tci := uint16(req.dot1q.Priority)<<13 | uint16(req.dot1q.VLANIdentifier)&0x0fff
		if req.dot1q.DropEligible {
			tci |= 1 << 12
		}
		out = binary.BigEndian.AppendUint16(out, uint16(layers.EthernetTypeDot1Q))
		out = binary.BigEndian.AppendUint16(out, tci)
	}
	out = binary.BigEndian.AppendUint16(out, uint16(layers.EthernetTypeIPv6))
	body := make([]byte, ndLen+8)
	body[0] = typ
	body[4] = flags
	t := target.As16()
	copy(body[8:24], t[:])
	body[24], body[25] = opt, 1
	copy(body[26:32], lla)
	binary.BigEndian.PutUint16(body[2:], icmpv6Checksum(src, dst, body))
	hdr := make([]byte, ipv6HeaderLen)
	hdr[0] = 6 << 4
	binary.BigEndian.PutUint16(hdr[4:], uint16(len(body)))
	hdr[6], hdr[7] = 58, 255
	s, d := src.As16(), dst.As16()
	copy(hdr[8:24], s[:])
	copy(hdr[24:40], d[:])
	out = append(out, hdr...)
	return append(out, body...)
}
