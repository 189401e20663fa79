//go:build integration

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	"flowweight/controller/arp"
	"flowweight/e2e/scenario"
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
	t.Run("reweights keep established connections", func(t *testing.T) {
		if broken := longConnsAcrossReweights(t, s, nil); broken != 0 {
			t.Fatalf("%d of 40 long-lived IPv6 connections broke across three reweights in conntrack mode, want 0", broken)
		}
	})
}
