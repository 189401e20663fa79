//go:build integration

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/controller/arp"
	"flowweight/e2e/scenario"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TestIPv6VIP runs an IPv6 service end to end on the real switch, in conntrack mode: IPv6
// client, controller and backends (fd00:77:0:76::/64), the probes pushing to the
// controller's IPv6 address. The controller locates the backends by neighbour solicitation
// (they are not pinned), the client's kernel resolves the VIP by neighbour solicitation and
// gets the VIP's MAC from the controller, requests through the VIP reach every backend,
// dump-flows holds the IPv6 flows, and three reweights break none of 40 established TCP
// connections.
func TestIPv6VIP(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 76, IPv6: true})
	if !s.VIP.Is6() {
		t.Fatalf("scenario VIP %v is not IPv6", s.VIP)
	}
	if !t.Run("vip reachable and all backends serve", func(t *testing.T) { testReach(t, s) }) {
		t.FailNow()
	}
	t.Run("client resolved the VIP by neighbour discovery", func(t *testing.T) {
		out, err := s.Client.Run(context.Background(), "ip", "-6", "neigh", "show", s.VIP.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("client: ip -6 neigh show %s: %s", s.VIP, strings.TrimSpace(out))
		if want := "lladdr " + arp.VIPMAC(s.VIP).String(); !strings.Contains(out, want) {
			t.Fatalf("client's neighbour entry for the VIP %q, want %q", strings.TrimSpace(out), want)
		}
	})
	t.Run("dump-flows shows the IPv6 flows", func(t *testing.T) {
		flows, err := s.Flows()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("dump-flows:\n%s", strings.Join(flows, "\n"))
		vip := s.VIP.String()
		want := []string{
			"icmp6,icmp_type=135,nd_target=" + vip + " actions=CONTROLLER:65535",
			"icmp6,ipv6_dst=" + vip + ",icmp_type=136 actions=CONTROLLER:65535",
			"tcp6,ipv6_dst=" + vip + ",tp_dst=80 actions=ct(",
			"ipv6,ipv6_src=" + vip + " actions=set_field:" + arp.VIPMAC(s.VIP).String() + "->eth_src,NORMAL",
		}
		for _, b := range s.Backends {
			ip := b.Host.Addr().String()
			want = append(want,
				"ipv6,ipv6_dst="+ip+" actions=set_field:"+b.Host.MAC.String()+"->eth_dst,output:",
				"tcp6,ipv6_src="+ip+",tp_src=8080 actions=ct(")
		}
		text := strings.Join(flows, "\n")
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("no flow containing %q", w)
			}
		}
		groups, err := s.Bridge.DumpGroups()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("dump-groups:\n%s", groups)
		// Both ND punts carried packets: the client's solicitations for the VIP, and the
		// backends' advertisements answering the controller's solicitations.
		raw, err := s.Bridge.DumpFlows()
		if err != nil {
			t.Fatal(err)
		}
		for _, punt := range []string{"icmp_type=135,nd_target=" + vip, "ipv6_dst=" + vip + ",icmp_type=136"} {
			found := false
			for _, line := range strings.Split(raw, "\n") {
				found = found || (strings.Contains(line, punt) && !strings.Contains(line, "n_packets=0,"))
			}
			if !found {
				t.Errorf("the ND flow %s counted no packet:\n%s", punt, raw)
			}
		}
	})
	t.Run("backends located by neighbour discovery", func(t *testing.T) {
		log, err := os.ReadFile(s.ControllerLog())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range s.Backends {
			found := false
			for _, line := range strings.Split(string(log), "\n") {
				found = found || (strings.Contains(line, "backend located") && strings.Contains(line, b.Host.Addr().String()) &&
					strings.Contains(line, b.Host.MAC.String()))
			}
			if !found {
				t.Errorf("no \"backend located\" line for %s at %s in the controller log", b.Host.Addr(), b.Host.MAC)
			}
		}
	})
	t.Run("forged neighbour discovery moves nothing", func(t *testing.T) { testNDSpoofing(t, s) })
	t.Run("reweights keep established connections", func(t *testing.T) {
		if broken := longConnsAcrossReweights(t, s, nil); broken != 0 {
			t.Fatalf("%d of 40 long-lived IPv6 connections broke across three reweights in conntrack mode, want 0", broken)
		}
	})
	t.Run("stateless mode serves over IPv6", func(t *testing.T) {
		if err := s.Reload(nil, scenario.ModeStateless); err != nil {
			t.Fatal(err)
		}
		if _, err := waitFor(10*time.Second, func() error {
			flows, err := s.Flows()
			if err != nil {
				return err
			}
			if !strings.Contains(strings.Join(flows, "\n"), "tcp6,ipv6_dst="+s.VIP.String()+",tp_dst=80 actions=group:1") {
				return fmt.Errorf("no stateless VIP flow yet")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		testReach(t, s)
	})
}

// testNDSpoofing is TestARPSpoofing's attack in neighbour discovery: for 4 s the client forges
// advertisements claiming be1's address from its own port and MAC (unsolicited, solicited but
// outside any round, with an Ethernet source that disagrees with the target link-layer
// option, without that option), solicitations for the VIP with be1's address as source, and
// malformed advertisements (hop limit 64, a bad checksum) that the switch still punts. be1's
// flows and bucket must not change, be1 must still serve, and the refusals must be counted.
func testNDSpoofing(t *testing.T, s *scenario.Scenario) {
	be1 := s.Backend("be1").Host
	mine := func() (string, error) {
		flows, err := s.Flows()
		if err != nil {
			return "", err
		}
		var out []string
		for _, f := range flows {
			if mentionsAddr(f, be1.Addr().String()) {
				out = append(out, f)
			}
		}
		groups, err := s.Bridge.DumpGroups()
		return strings.Join(out, "\n") + "\n" + bucketsOf(groups, be1.Addr().String()), err
	}
	before, err := mine()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before, be1.MAC.String()) {
		t.Fatalf("no forwarding flow for be1 (%s at %s) before the attack:\n%s", be1.Addr(), be1.MAC, before)
	}
	frames := forgedND(t, s.Client.MAC, be1.Addr(), s.VIP, arp.VIPMAC(s.VIP))
	const attack = 4 * time.Second
	start := time.Now()
	sent := 0
	pace := time.NewTicker(20 * time.Millisecond)
	for time.Since(start) < attack {
		for _, f := range frames {
			if err := s.Client.SendFrame(f); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		<-pace.C
	}
	pace.Stop()
	t.Logf("sent %d forged ND frames from %s (port %d) over %v", sent, s.Client.MAC, s.Client.OFPort, attack)
	settle := 2*arp.DefaultRequestTTL + s.Opts.UpdatePeriod + time.Second
	check := time.NewTicker(250 * time.Millisecond)
	defer check.Stop()
	for deadline := time.Now().Add(settle); time.Now().Before(deadline); <-check.C {
		got, err := mine()
		if err != nil {
			t.Fatal(err)
		}
		if got != before {
			t.Fatalf("be1's flows or bucket changed under forged ND:\nbefore:\n%s\nafter:\n%s", before, got)
		}
	}
	res, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 4, Duration: 10 * time.Second, MaxRequests: 200})
	if err != nil {
		t.Fatal(err)
	}
	if res.PerBackend["be1"] == 0 || res.Errors != 0 {
		t.Fatalf("after the attack be1 served %d of %d requests, %d errors: %v", res.PerBackend["be1"], res.OK, res.Errors, res.ErrSamples)
	}
	refused, err := refusedCounts(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flowweight_arp_refused_total after forged ND: %v", refused)
	for _, r := range []arp.Reason{arp.ReasonUnsolicited, arp.ReasonGratuitous, arp.ReasonRequest, arp.ReasonInconsistent,
		arp.ReasonBadAddress, arp.ReasonMalformed} {
		if refused[string(r)] == 0 {
			t.Errorf("no refusal counted with reason %q", r)
		}
	}
}

// mentionsAddr: the flow names addr as a whole IPv6 address (fd00::b, not fd00::bc).
func mentionsAddr(flow, addr string) bool {
	for _, sep := range []string{"=", ":", "[", "-"} {
		for _, end := range []string{",", " ", "]", "-"} {
			if strings.Contains(flow, sep+addr+end) {
				return true
			}
		}
	}
	return false
}

// bucketsOf returns the actions of every bucket naming addr in dump-groups output, sorted.
func bucketsOf(groups, addr string) string {
	var out []string
	for _, part := range strings.Split(groups, "bucket=") {
		if mentionsAddr(part+" ", addr) {
			_, actions, _ := strings.Cut(part, "actions=") // weight may move; where it goes may not
			out = append(out, strings.TrimSpace(actions))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// forgedND builds the attacker's frames; each reaches the controller through an ND punt
// and none may locate victim anywhere but where it is.
func forgedND(t *testing.T, attacker net.HardwareAddr, victim, vip netip.Addr, vipMAC net.HardwareAddr) [][]byte {
	t.Helper()
	type nd struct {
		ethSrc      net.HardwareAddr
		src, dst    netip.Addr
		ethDst      net.HardwareAddr
		hop         uint8
		ns          bool
		flags       uint8
		target      netip.Addr
		lla         net.HardwareAddr
		badChecksum bool
	}
	build := func(f nd) []byte {
		eth := &layers.Ethernet{SrcMAC: f.ethSrc, DstMAC: f.ethDst, EthernetType: layers.EthernetTypeIPv6}
		ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: f.hop, SrcIP: f.src.AsSlice(), DstIP: f.dst.AsSlice()}
		typ := uint8(layers.ICMPv6TypeNeighborAdvertisement)
		if f.ns {
			typ = layers.ICMPv6TypeNeighborSolicitation
		}
		icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
		if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
			t.Fatal(err)
		}
		var body gopacket.SerializableLayer
		if f.ns {
			body = &layers.ICMPv6NeighborSolicitation{TargetAddress: f.target.AsSlice(),
				Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: f.lla}}}
		} else {
			var opts layers.ICMPv6Options
			if f.lla != nil {
				opts = layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: f.lla}}
			}
			body = &layers.ICMPv6NeighborAdvertisement{Flags: f.flags, TargetAddress: f.target.AsSlice(), Options: opts}
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip6, icmp, body); err != nil {
			t.Fatal(err)
		}
		b := bytes.Clone(buf.Bytes())
		if f.badChecksum {
			b[14+40+2] ^= 0x5a
		}
		return b
	}
	const solicited, override = 0x40, 0x20
	na := func(mut func(*nd)) []byte {
		f := nd{ethSrc: attacker, src: victim, dst: vip, ethDst: vipMAC, hop: 255, flags: solicited | override, target: victim, lla: attacker}
		mut(&f)
		return build(f)
	}
	v := vip.As16()
	return [][]byte{
		na(func(f *nd) { f.flags = override }), // unsolicited advertisement: gratuitous
		na(func(*nd) {}),                       // solicited flag, but no round of ours (or a disagreeing answer in one)
		na(func(f *nd) { f.ethSrc = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99} }), // Ethernet source disagrees with the option
		na(func(f *nd) { f.lla = nil }),                                         // no target link-layer option
		na(func(f *nd) { f.hop = 64 }),                                          // from off-link: malformed
		na(func(f *nd) { f.badChecksum = true }),                                // malformed
		build(nd{ethSrc: attacker, src: victim, ethDst: net.HardwareAddr{0x33, 0x33, 0xff, v[13], v[14], v[15]}, // NS for the VIP claiming be1's address
			dst: netip.AddrFrom16([16]byte{0xff, 2, 11: 1, 12: 0xff, 13: v[13], 14: v[14], 15: v[15]}), hop: 255, ns: true, target: vip, lla: attacker}),
	}
}
