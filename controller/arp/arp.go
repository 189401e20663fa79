package arp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// ErrMalformed marks a frame that claims to be ARP but cannot be decoded.
var ErrMalformed = errors.New("malformed ARP frame")

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// decoded is one Ethernet (optionally 802.1Q-tagged) ARP frame.
type decoded struct {
	eth    layers.Ethernet
	dot1q  layers.Dot1Q
	tagged bool
	arp    layers.ARP
}

// decode reads an Ethernet frame. isARP is false, with no error, for a well-formed frame
// that is not Ethernet/IPv4 ARP; err is set when the frame is truncated or the ARP header
// is inconsistent.
func decode(frame []byte) (d decoded, isARP bool, err error) {
	typ, payload, err := decodeL2(frame, &d)
	if err != nil {
		return d, false, err
	}
	if typ != layers.EthernetTypeARP {
		return d, false, nil
	}
	// gopacket v1.1.19's ARP decoder computes offsets from the address lengths in 8-bit
	// arithmetic, which wraps (hlen 150 slices past the end: a panic found by FuzzReply,
	// kept in testdata/fuzz). So the fixed header is checked here, and only Ethernet/IPv4
	// ARP with 6/4-byte addresses ever reaches gopacket.
	if len(payload) < 8 {
		return d, false, fmt.Errorf("%w: ARP header is %d bytes, need 8", ErrMalformed, len(payload))
	}
	htype, ptype := binary.BigEndian.Uint16(payload[0:2]), binary.BigEndian.Uint16(payload[2:4])
	if htype != uint16(layers.LinkTypeEthernet) || ptype != uint16(layers.EthernetTypeIPv4) {
		return d, false, nil // ARP for other link or network types is not ours to judge
	}
	if hl, pl := payload[4], payload[5]; hl != 6 || pl != 4 {
		return d, false, fmt.Errorf("%w: Ethernet/IPv4 ARP with hlen %d plen %d, want 6 and 4", ErrMalformed, hl, pl)
	}
	if len(payload) < 28 {
		return d, false, fmt.Errorf("%w: Ethernet/IPv4 ARP is %d bytes, need 28", ErrMalformed, len(payload))
	}
	if err := d.arp.DecodeFromBytes(payload, gopacket.NilDecodeFeedback); err != nil {
		return d, false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return d, true, nil
}

// decodeL2 reads the Ethernet header and an optional 802.1Q tag into d and returns the inner
// EtherType and payload.
func decodeL2(frame []byte, d *decoded) (layers.EthernetType, []byte, error) {
	if err := d.eth.DecodeFromBytes(frame, gopacket.NilDecodeFeedback); err != nil {
		return 0, nil, fmt.Errorf("%w: ethernet: %v", ErrMalformed, err)
	}
	typ, payload := d.eth.EthernetType, d.eth.Payload
	if typ == layers.EthernetTypeDot1Q {
		if err := d.dot1q.DecodeFromBytes(payload, gopacket.NilDecodeFeedback); err != nil {
			return 0, nil, fmt.Errorf("%w: 802.1Q: %v", ErrMalformed, err)
		}
		d.tagged = true
		typ, payload = d.dot1q.Type, d.dot1q.Payload
	}
	return typ, payload, nil
}

// usableMAC is a unicast, non-zero hardware address: something a reply may be sent to or
// a backend may be learnt as.
func usableMAC(mac net.HardwareAddr) bool {
	return len(mac) == 6 && mac[0]&1 == 0 && !bytes.Equal(mac, make(net.HardwareAddr, 6))
}

// Reply answers an ARP request for an address we own, or an IPv6 neighbour solicitation for
// one (ReplyND, whose rules apply to those), so the caller has one entry point for both
// families. lookup says whether an address is one of our VIPs and gives the MAC to answer
// with (typically VIPMAC). The reply goes to the requester: its target MAC/IP are the
// request's sender MAC/IP, its sender is the VIP and its MAC, and it keeps the request's
// 802.1Q tag if any. The frame is complete and padded to the Ethernet minimum, ready for a
// packet-out with no buffer.
//
// ok is false, with no error, for anything that is not an Ethernet/IPv4 ARP request (or a
// neighbour solicitation) for one of ours — other traffic, replies, gratuitous ARP (sender
// IP = target IP, an announcement, not a question), requests from a multicast or zero sender
// MAC. err is set for a malformed frame.
func Reply(frame []byte, lookup func(netip.Addr) (net.HardwareAddr, bool)) ([]byte, bool, error) {
	d, isARP, err := decode(frame)
	if err == nil && !isARP {
		return ReplyND(frame, lookup)
	}
	if err != nil || d.arp.Operation != layers.ARPRequest {
		return nil, false, err
	}
	target, _ := netip.AddrFromSlice(d.arp.DstProtAddress)
	sender, _ := netip.AddrFromSlice(d.arp.SourceProtAddress)
	requester := net.HardwareAddr(d.arp.SourceHwAddress)
	if target == sender || !usableMAC(requester) {
		return nil, false, nil
	}
	vipMAC, ours := lookup(target)
	if !ours {
		return nil, false, nil
	}
	if len(vipMAC) != 6 {
		return nil, false, fmt.Errorf("arp: lookup gave %d-byte MAC %v for %v, want 6", len(vipMAC), vipMAC, target)
	}
	out, err := build(d, vipMAC, requester, layers.ARPReply, vipMAC, target.AsSlice(), requester, sender.AsSlice())
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// Request builds a broadcast ARP request asking who has target, from srcMAC/srcIP, to
// resolve a backend's MAC; the controller opens a round with Learner.Ask, sends it by
// packet-out to FLOOD and lets Learner.Observe judge the answers. Both addresses must be IPv4
// (or IPv4-mapped IPv6); for an IPv6 target (and source) it builds the neighbour solicitation
// instead (Solicit).
func Request(srcMAC net.HardwareAddr, srcIP, target netip.Addr) ([]byte, error) {
	if target.Is6() && !target.Is4In6() {
		return Solicit(srcMAC, srcIP, target)
	}
	if !usableMAC(srcMAC) {
		return nil, fmt.Errorf("arp: request source MAC %v is not a unicast 6-byte address", srcMAC)
	}
	srcIP, target = srcIP.Unmap(), target.Unmap()
	if !srcIP.Is4() {
		return nil, fmt.Errorf("arp: request source %v is not IPv4", srcIP)
	}
	if !target.Is4() {
		return nil, fmt.Errorf("arp: request target %v is not IPv4", target)
	}
	return build(decoded{}, srcMAC, broadcast, layers.ARPRequest, srcMAC, srcIP.AsSlice(), make([]byte, 6), target.AsSlice())
}

// ParseReply reads the sender's IPv4 address and MAC from an ARP reply. It is a decoder,
// not a trust decision: whether a reply may locate a backend is the Learner's call.
// ok is false for anything else, including malformed frames and replies claiming a
// multicast or zero MAC, which must never be installed as a backend's address.
func ParseReply(frame []byte) (ip netip.Addr, mac net.HardwareAddr, ok bool) {
	d, isARP, err := decode(frame)
	if err != nil || !isARP || d.arp.Operation != layers.ARPReply {
		return netip.Addr{}, nil, false
	}
	ip, _ = netip.AddrFromSlice(d.arp.SourceProtAddress)
	mac = bytes.Clone(d.arp.SourceHwAddress)
	if !usableMAC(mac) || !ip.IsValid() || ip.IsUnspecified() {
		return netip.Addr{}, nil, false
	}
	return ip, mac, true
}

// build serialises Ethernet (+ the request's VLAN tag) + ARP, padded to 60 bytes.
func build(req decoded, ethSrc, ethDst net.HardwareAddr, op uint16, sha, spa, tha, tpa []byte) ([]byte, error) {
	eth := layers.Ethernet{SrcMAC: ethSrc, DstMAC: ethDst, EthernetType: layers.EthernetTypeARP}
	a := layers.ARP{
		AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: op,
		SourceHwAddress: sha, SourceProtAddress: spa, DstHwAddress: tha, DstProtAddress: tpa,
	}
	ls := []gopacket.SerializableLayer{&eth, &a}
	if req.tagged {
		eth.EthernetType = layers.EthernetTypeDot1Q
		tag := layers.Dot1Q{Priority: req.dot1q.Priority, DropEligible: req.dot1q.DropEligible,
			VLANIdentifier: req.dot1q.VLANIdentifier, Type: layers.EthernetTypeARP}
		ls = []gopacket.SerializableLayer{&eth, &tag, &a}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		return nil, fmt.Errorf("arp: serialise: %w", err)
	}
	return bytes.Clone(buf.Bytes()), nil
}

// VIPMAC is the MAC the controller answers with for a VIP: 02:77:a:b:c:d for IPv4 VIP
// a.b.c.d. The first octet 0x02 marks it locally administered (so it cannot clash with a
// vendor-assigned NIC address) and unicast; 0x77 ('w') keeps it apart from other local
// schemes such as Docker's 02:42. Being a pure function of the VIP, every controller
// instance and restart answers the same, and clients' ARP caches stay valid. For a non-IPv4
// address (not resolvable by ARP) the last four bytes of the address are used.
func VIPMAC(vip netip.Addr) net.HardwareAddr {
	b := vip.Unmap().AsSlice()
	if len(b) < 4 {
		b = make([]byte, 4)
	}
	b = b[len(b)-4:]
	return net.HardwareAddr{0x02, 0x77, b[0], b[1], b[2], b[3]}
}
