package dataplane

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

// webService6 is webService in IPv6, with its own index, group and zone so that it can share
// a switch with webService.
func webService6(mode Mode) Service {
	return Service{
		Name: "web6", Index: 3, VIP: ip("fd00:77::100"), VIPMAC: mac("02:00:00:00:03:00"),
		Protocol: "tcp", Port: 80, Mode: mode, GroupID: 30, Zone: 9,
		Backends: []Backend{
			{Name: "a6", Index: 0, IP: ip("fd00:77::11"), Port: 8080, MAC: mac("02:00:00:00:00:11"), SwitchPort: 1, Weight: 100},
			{Name: "b6", Index: 1, IP: ip("fd00:77::12"), MAC: mac("02:00:00:00:00:12"), SwitchPort: 2, Weight: 50},
			{Name: "c6", Index: 2, IP: ip("fd00:77::13"), Weight: 30}, // not yet resolved
		},
	}
}

// matchString renders a flow's match in ovs-ofctl's field names, in wire (canonical) order,
// so a test can state it: "eth_type=0x86dd,ip_proto=6,tcp_dst=80,ipv6_dst=fd00:77::100".
func matchString(t *testing.T, f Flow) string {
	t.Helper()
	xs, err := ofwire.ParseOXM([]byte(f.Match))
	if err != nil {
		t.Fatalf("match of %s: %v", describeCookie(f.Cookie), err)
	}
	var out []string
	for _, x := range xs {
		if x.Class != ofp.XMClassOpenflowBasic {
			set, clear, err := ofwire.CTStateOf(x)
			if err != nil {
				t.Fatalf("match of %s: %v", describeCookie(f.Cookie), err)
			}
			out = append(out, "ct_state="+ofwire.CTStateString(set, clear))
			continue
		}
		v := []byte(x.Value)
		switch x.Type {
		case ofp.XMTypeEthType:
			out = append(out, fmt.Sprintf("eth_type=%#04x", binary.BigEndian.Uint16(v)))
		case ofp.XMTypeIPProto:
			out = append(out, fmt.Sprintf("ip_proto=%d", v[0]))
		case ofp.XMTypeICMPv6Type:
			out = append(out, fmt.Sprintf("icmpv6_type=%d", v[0]))
		case ofp.XMTypeIPv6Src, ofp.XMTypeIPv6Dst, ofp.XMTypeIPv6NDTarget, ofp.XMTypeIPv4Src, ofp.XMTypeIPv4Dst, ofp.XMTypeARPTPA:
			a, _ := netip.AddrFromSlice(v)
			name := map[ofp.XMType]string{ofp.XMTypeIPv6Src: "ipv6_src", ofp.XMTypeIPv6Dst: "ipv6_dst", ofp.XMTypeIPv6NDTarget: "nd_target",
				ofp.XMTypeIPv4Src: "ipv4_src", ofp.XMTypeIPv4Dst: "ipv4_dst", ofp.XMTypeARPTPA: "arp_tpa"}[x.Type]
			out = append(out, name+"="+a.String())
		case ofp.XMTypeTCPSrc, ofp.XMTypeTCPDst:
			out = append(out, fmt.Sprintf("%s=%d", map[ofp.XMType]string{ofp.XMTypeTCPSrc: "tcp_src", ofp.XMTypeTCPDst: "tcp_dst"}[x.Type], binary.BigEndian.Uint16(v)))
		default:
			out = append(out, fmt.Sprintf("field%d=%x", x.Type, v))
		}
	}
	return strings.Join(out, ",")
}

// TestDesiredIPv6 states every match of an IPv6 service in both modes: the design of IPv4
// with IPv6 fields, and the ND punt in place of the ARP one.
func TestDesiredIPv6(t *testing.T) {
	const (
		ns    = "eth_type=0x86dd,ip_proto=58,icmpv6_type=135,nd_target=fd00:77::100"
		na    = "eth_type=0x86dd,ip_proto=58,ipv6_dst=fd00:77::100,icmpv6_type=136"
		vip   = "eth_type=0x86dd,ip_proto=6,tcp_dst=80,ipv6_dst=fd00:77::100"
		retA  = "eth_type=0x86dd,ip_proto=6,tcp_src=8080,ipv6_src=fd00:77::11"
		retB  = "eth_type=0x86dd,ip_proto=6,tcp_src=80,ipv6_src=fd00:77::12"
		fwdA  = "eth_type=0x86dd,ipv6_dst=fd00:77::11"
		fwdB  = "eth_type=0x86dd,ipv6_dst=fd00:77::12"
		srcVI = "eth_type=0x86dd,ipv6_src=fd00:77::100"
	)
	cases := []struct {
		mode Mode
		want map[string]string // describeCookie → match
	}{
		{ModeConntrack, map[string]string{
			"ns service=3 backend=-":            ns,
			"na service=3 backend=-":            na,
			"vip service=3 backend=-":           vip,
			"new service=3 backend=-":           "ct_state=+new+trk," + vip,
			"return service=3 backend=0":        retA,
			"return service=3 backend=1":        retB,
			"forward service=3 backend=0":       fwdA,
			"forward service=3 backend=1":       fwdB,
			"return-vip service=3 backend=-":    srcVI,
			"est service=- backend=-":           "ct_state=+est+trk",
			"rel service=- backend=-":           "ct_state=+rel+trk",
			"return-normal service=- backend=-": "",
			"normal service=- backend=-":        "",
		}},
		{ModeStateless, map[string]string{
			"ns service=3 backend=-":     ns,
			"na service=3 backend=-":     na,
			"vip service=3 backend=-":    vip,
			"return service=3 backend=0": retA,
			"return service=3 backend=1": retB,
			"normal service=- backend=-": "",
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			d := Desired([]Service{webService6(tc.mode)}, DefaultOptions())
			got := map[string]string{}
			for _, f := range d.Flows {
				got[describeCookie(f.Cookie)] = matchString(t, f)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("matches\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestBucketActionsIPv6: conntrack buckets NAT to the backend's 16-byte address, stateless
// ones set ipv6_dst.
func TestBucketActionsIPv6(t *testing.T) {
	cases := []struct {
		mode Mode
		want []ofp.Actions
	}{
		{ModeConntrack, []ofp.Actions{
			{&ofwire.CT{Flags: ofwire.CTCommit, Zone: 9, Table: TableForward, Actions: ofp.Actions{&ofwire.NAT{Flags: ofwire.NATDst, IPMin: ip("fd00:77::11"), PortMin: 8080}}}},
			{&ofwire.CT{Flags: ofwire.CTCommit, Zone: 9, Table: TableForward, Actions: ofp.Actions{&ofwire.NAT{Flags: ofwire.NATDst, IPMin: ip("fd00:77::12"), PortMin: 80}}}},
		}},
		{ModeStateless, []ofp.Actions{
			{setField(ofp.XMTypeEthDst, mac("02:00:00:00:00:11")), setField(ofp.XMTypeIPv6Dst, ip("fd00:77::11").AsSlice()),
				setField(ofp.XMTypeTCPDst, port16(8080)), output(1, 0)},
			{setField(ofp.XMTypeEthDst, mac("02:00:00:00:00:12")), setField(ofp.XMTypeIPv6Dst, ip("fd00:77::12").AsSlice()), output(2, 0)},
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			d := Desired([]Service{webService6(tc.mode)}, Options{})
			acts := distinctActions(d.Groups[0])
			if len(acts) != len(tc.want) {
				t.Fatalf("%d distinct bucket actions, want %d", len(acts), len(tc.want))
			}
			for i, b := range acts {
				got, err := ofwire.ParseActions([]byte(b))
				if err != nil {
					t.Fatalf("bucket %d: %v", i, err)
				}
				if !reflect.DeepEqual(got, tc.want[i]) {
					t.Errorf("bucket %d actions %#v, want %#v", i, got, tc.want[i])
				}
			}
		})
	}
	// The stateless return path rewrites the source back to the VIP in IPv6.
	d := Desired([]Service{webService6(ModeStateless)}, Options{})
	for _, f := range d.Flows {
		if _, b, k, _ := ParseCookie(f.Cookie); k == KindReturn && b == 0 {
			ins, err := ofwire.ParseInstructions([]byte(f.Instructions))
			if err != nil || len(ins) != 1 {
				t.Fatalf("return flow instructions %v %v", ins, err)
			}
			want := ofp.Actions{setField(ofp.XMTypeIPv6Src, ip("fd00:77::100").AsSlice()), setField(ofp.XMTypeTCPSrc, port16(80)),
				setField(ofp.XMTypeEthSrc, mac("02:00:00:00:03:00")), output(ofp.PortNormal, 0)}
			if !reflect.DeepEqual(ins[0].Actions, want) {
				t.Errorf("return actions %#v, want %#v", ins[0].Actions, want)
			}
		}
	}
}

// TestLocationsIPv6: a restarted controller reads IPv6 backends' locations back from both
// modes' flows and buckets.
func TestLocationsIPv6(t *testing.T) {
	for _, mode := range []Mode{ModeConntrack, ModeStateless} {
		t.Run(string(mode), func(t *testing.T) {
			fs := NewFakeSwitch()
			if err := fs.ApplyPlan(Plan(Desired([]Service{webService6(mode)}, DefaultOptions()), State{})); err != nil {
				t.Fatal(err)
			}
			got := Locations(fs.State())
			for _, want := range []struct {
				ip, mac string
				port    uint32
			}{{"fd00:77::11", "02:00:00:00:00:11", 1}, {"fd00:77::12", "02:00:00:00:00:12", 2}} {
				l := got[ip(want.ip)]
				if l.MAC.String() != want.mac || l.Port != want.port {
					t.Errorf("%s located at %v port %d; all %v", want.ip, l.MAC, l.Port, got)
				}
			}
			if len(got) != 2 {
				t.Errorf("located %v, want the two reachable backends", got)
			}
		})
	}
}

// TestGroupModSizeIPv6: a 256-slot stateless IPv6 group is 256 buckets of 16 + 72 bytes
// (set eth_dst 16, set ipv6_dst 24, set tcp_dst 16, output 16) plus the 16-byte GROUP_MOD
// header, as docs/dataplane.md says, and still one message: no fallback layout.
func TestGroupModSizeIPv6(t *testing.T) {
	s := webService6(ModeStateless)
	s.Backends = nil
	for i := range 64 {
		s.Backends = append(s.Backends, Backend{Name: fmt.Sprintf("b%d", i), Index: uint16(i),
			IP:   netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x77, 14: byte(i >> 8), 15: byte(i + 1)}),
			Port: 8080, MAC: net.HardwareAddr{2, 0, 0, 1, byte(i >> 8), byte(i)}, SwitchPort: uint32(i + 1), Weight: 1})
	}
	d := Desired([]Service{s}, Options{OVS: ovs310})
	if n := len(d.Groups[0].Buckets); n != 256 {
		t.Fatalf("%d buckets, want the 256-slot layout", n)
	}
	b, err := groupMessage(1, d.Groups[0]).Body.(*ofwire.GroupMod).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(b) + 8; got != 22544 {
		t.Fatalf("GROUP_MOD is %d bytes, want 22544", got)
	}
}
