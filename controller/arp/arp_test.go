package arp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

var (
	vip       = netip.MustParseAddr("10.77.0.100")
	client    = netip.MustParseAddr("10.77.0.2")
	clientMAC = net.HardwareAddr{0x3a, 0x11, 0x22, 0x33, 0x44, 0x55}
)

func ours(a netip.Addr) (net.HardwareAddr, bool) {
	if a == vip {
		return VIPMAC(a), true
	}
	return nil, false
}

// frameOf serialises a frame with gopacket, independently of the package's builder.
func frameOf(t testing.TB, ethDst net.HardwareAddr, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr, vlan int) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: sha, DstMAC: ethDst, EthernetType: layers.EthernetTypeARP}
	a := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: op, SourceHwAddress: sha, SourceProtAddress: spa.AsSlice(), DstHwAddress: tha, DstProtAddress: tpa.AsSlice()}
	ls := []gopacket.SerializableLayer{eth, a}
	if vlan >= 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = []gopacket.SerializableLayer{eth, &layers.Dot1Q{VLANIdentifier: uint16(vlan), Type: layers.EthernetTypeARP}, a}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func request(t testing.TB, target netip.Addr) []byte {
	return frameOf(t, broadcast, layers.ARPRequest, clientMAC, client, make(net.HardwareAddr, 6), target, -1)
}

func TestReply(t *testing.T) {
	ipv4Frame := func() []byte {
		eth := &layers.Ethernet{SrcMAC: clientMAC, DstMAC: VIPMAC(vip), EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: client.AsSlice(), DstIP: vip.AsSlice()}
		buf := gopacket.NewSerializeBuffer()
		gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, ip, gopacket.Payload("x"))
		return buf.Bytes()
	}()
	good := request(t, vip)
	tests := []struct {
		name    string
		frame   []byte
		ok      bool
		wantErr bool
		vlan    int
	}{
		{"request for VIP", good, true, false, -1},
		{"tagged request for VIP", frameOf(t, broadcast, layers.ARPRequest, clientMAC, client, make(net.HardwareAddr, 6), vip, 42), true, false, 42},
		{"unicast re-check for VIP", frameOf(t, VIPMAC(vip), layers.ARPRequest, clientMAC, client, VIPMAC(vip), vip, -1), true, false, -1},
		{"request for other host", request(t, netip.MustParseAddr("10.77.0.3")), false, false, -1},
		{"reply, not request", frameOf(t, clientMAC, layers.ARPReply, clientMAC, client, clientMAC, vip, -1), false, false, -1},
		{"gratuitous for VIP", frameOf(t, broadcast, layers.ARPRequest, clientMAC, vip, make(net.HardwareAddr, 6), vip, -1), false, false, -1},
		{"multicast requester", frameOf(t, broadcast, layers.ARPRequest, net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}, client, make(net.HardwareAddr, 6), vip, -1), false, false, -1},
		{"IPv4 not ARP", ipv4Frame, false, false, -1},
		{"truncated ethernet", good[:10], false, true, -1},
		{"truncated ARP", good[:14+20], false, true, -1},
		{"lying hlen", func() []byte { b := bytes.Clone(good); b[14+4] = 200; return b }(), false, true, -1},
		{"ethernet/IPv4 with hlen 8", func() []byte { b := bytes.Clone(good); b[14+4] = 8; return b }(), false, true, -1},
		{"other hardware type", func() []byte { b := bytes.Clone(good); b[14+1] = 6; return b }(), false, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, ok, err := Reply(tt.frame, ours)
			if (err != nil) != tt.wantErr || ok != tt.ok {
				t.Fatalf("Reply = ok %v err %v, want ok %v wantErr %v", ok, err, tt.ok, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v is not ErrMalformed", err)
			}
			if !ok {
				if out != nil {
					t.Errorf("frame returned with ok=false")
				}
				return
			}
			// Decode the reply with gopacket's full decoder.
			p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
			if el := p.ErrorLayer(); el != nil {
				t.Fatalf("reply does not decode: %v", el.Error())
			}
			eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			a := p.Layer(layers.LayerTypeARP).(*layers.ARP)
			if !bytes.Equal(eth.DstMAC, clientMAC) || !bytes.Equal(eth.SrcMAC, VIPMAC(vip)) {
				t.Errorf("ethernet %v -> %v, want %v -> %v", eth.SrcMAC, eth.DstMAC, VIPMAC(vip), clientMAC)
			}
			if a.Operation != layers.ARPReply ||
				!bytes.Equal(a.SourceHwAddress, VIPMAC(vip)) || !bytes.Equal(a.SourceProtAddress, vip.AsSlice()) ||
				!bytes.Equal(a.DstHwAddress, clientMAC) || !bytes.Equal(a.DstProtAddress, client.AsSlice()) {
				t.Errorf("ARP %+v, want reply VIP %v/%v -> requester %v/%v", a, vip, VIPMAC(vip), client, clientMAC)
			}
			if len(out) < 60 {
				t.Errorf("reply is %d bytes, below the 60-byte Ethernet minimum", len(out))
			}
			tag, tagged := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q)
			if tagged != (tt.vlan >= 0) || (tagged && int(tag.VLANIdentifier) != tt.vlan) {
				t.Errorf("reply tagged=%v (%v), want VLAN %d", tagged, tag, tt.vlan)
			}
			// The reply is something ParseReply learns the VIP from.
			ip, mac, ok := ParseReply(out)
			if !ok || ip != vip || !bytes.Equal(mac, VIPMAC(vip)) {
				t.Errorf("ParseReply(reply) = %v %v %v", ip, mac, ok)
			}
		})
	}
}

func TestReplyBadLookup(t *testing.T) {
	_, _, err := Reply(request(t, vip), func(netip.Addr) (net.HardwareAddr, bool) { return net.HardwareAddr{1, 2}, true })
	if err == nil {
		t.Fatal("a 2-byte MAC from lookup was accepted")
	}
}

func TestRequest(t *testing.T) {
	backend := netip.MustParseAddr("10.77.0.11")
	tests := []struct {
		name    string
		mac     net.HardwareAddr
		src     netip.Addr
		target  netip.Addr
		wantErr bool
	}{
		{"ipv4", VIPMAC(vip), vip, backend, false},
		{"mapped", VIPMAC(vip), netip.MustParseAddr("::ffff:10.77.0.100"), backend, false},
		{"ipv6 target", VIPMAC(vip), vip, netip.MustParseAddr("2001:db8::1"), true},
		{"ipv6 source", VIPMAC(vip), netip.MustParseAddr("2001:db8::1"), backend, true},
		{"broadcast source MAC", broadcast, vip, backend, true},
		{"short MAC", net.HardwareAddr{2, 0, 0}, vip, backend, true},
		{"invalid target", VIPMAC(vip), vip, netip.Addr{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Request(tt.mac, tt.src, tt.target)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
			eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			a, isARP := p.Layer(layers.LayerTypeARP).(*layers.ARP)
			if !isARP || !bytes.Equal(eth.DstMAC, broadcast) || a.Operation != layers.ARPRequest ||
				!bytes.Equal(a.DstProtAddress, tt.target.AsSlice()) || !bytes.Equal(a.SourceProtAddress, tt.src.Unmap().AsSlice()) ||
				!bytes.Equal(a.SourceHwAddress, tt.mac) || !bytes.Equal(a.DstHwAddress, make([]byte, 6)) {
				t.Fatalf("request decodes as %v", p)
			}
			// A backend's answer to it is learnt.
			backendMAC := net.HardwareAddr{0x3a, 0, 0, 0, 0, 0x0b}
			ans := frameOf(t, tt.mac, layers.ARPReply, backendMAC, tt.target, tt.mac, tt.src.Unmap(), -1)
			ip, mac, ok := ParseReply(ans)
			if !ok || ip != tt.target || !bytes.Equal(mac, backendMAC) {
				t.Errorf("ParseReply(answer) = %v %v %v", ip, mac, ok)
			}
		})
	}
}

func TestParseReply(t *testing.T) {
	backend := netip.MustParseAddr("10.77.0.11")
	bmac := net.HardwareAddr{0x3a, 0, 0, 0, 0, 0x0b}
	good := frameOf(t, clientMAC, layers.ARPReply, bmac, backend, clientMAC, client, -1)
	tests := []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"reply", good, true},
		{"tagged reply", frameOf(t, clientMAC, layers.ARPReply, bmac, backend, clientMAC, client, 7), true},
		{"request", request(t, backend), false},
		{"zero sender MAC", frameOf(t, clientMAC, layers.ARPReply, make(net.HardwareAddr, 6), backend, clientMAC, client, -1), false},
		{"multicast sender MAC", frameOf(t, clientMAC, layers.ARPReply, net.HardwareAddr{1, 2, 3, 4, 5, 6}, backend, clientMAC, client, -1), false},
		{"unspecified sender IP", frameOf(t, clientMAC, layers.ARPReply, bmac, netip.IPv4Unspecified(), clientMAC, client, -1), false},
		{"truncated", good[:20], false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip, mac, ok := ParseReply(tt.frame)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if ok && (ip != backend || !bytes.Equal(mac, bmac)) {
				t.Errorf("learnt %v %v, want %v %v", ip, mac, backend, bmac)
			}
		})
	}
	// The learnt MAC must not alias the frame.
	_, mac, _ := ParseReply(good)
	for i := range good {
		good[i] = 0
	}
	if !bytes.Equal(mac, bmac) {
		t.Error("ParseReply's MAC aliases the caller's frame buffer")
	}
}

func TestVIPMAC(t *testing.T) {
	tests := []struct {
		vip  string
		want string
	}{
		{"10.77.0.100", "02:77:0a:4d:00:64"},
		{"192.168.1.1", "02:77:c0:a8:01:01"},
		{"::ffff:192.168.1.1", "02:77:c0:a8:01:01"},
		{"2001:db8::a:b", "02:77:00:0a:00:0b"},
		{"", "02:77:00:00:00:00"},
	}
	for _, tt := range tests {
		var a netip.Addr
		if tt.vip != "" {
			a = netip.MustParseAddr(tt.vip)
		}
		got := VIPMAC(a)
		if got.String() != tt.want {
			t.Errorf("VIPMAC(%s) = %s, want %s", tt.vip, got, tt.want)
		}
		if got[0]&0x01 != 0 || got[0]&0x02 == 0 {
			t.Errorf("VIPMAC(%s) = %s is not a locally administered unicast MAC", tt.vip, got)
		}
	}
}

func FuzzReply(f *testing.F) {
	f.Add(request(f, vip))
	f.Add(frameOf(f, broadcast, layers.ARPRequest, clientMAC, client, make(net.HardwareAddr, 6), vip, 5))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		out, ok, err := Reply(frame, ours)
		if ok != (out != nil) || (err != nil && ok) {
			t.Fatalf("ok=%v out=%d bytes err=%v", ok, len(out), err)
		}
		if ok {
			// Every reply we produce is itself well-formed and names the VIP.
			ip, mac, learnt := ParseReply(out)
			if !learnt || ip != vip || !bytes.Equal(mac, VIPMAC(vip)) {
				t.Fatalf("reply %x does not parse back: %v %v %v", out, ip, mac, learnt)
			}
		}
	})
}

func FuzzParseReply(f *testing.F) {
	f.Add(frameOf(f, clientMAC, layers.ARPReply, clientMAC, client, clientMAC, vip, -1))
	f.Add(frameOf(f, clientMAC, layers.ARPReply, clientMAC, client, clientMAC, vip, 3))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		ip, mac, ok := ParseReply(frame)
		if ok && (!ip.Is4() || len(mac) != 6 || mac[0]&1 != 0) {
			t.Fatalf("learnt %v %v from %x", ip, mac, frame)
		}
	})
}
