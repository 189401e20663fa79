//go:build integration

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestHostsMultiPortUDP runs the issue "Services as operators write them" on the real
// switch: one VIP with HTTP on 80 and 443 and a UDP request-response service on 53, over
// three [[host]]s with one probe each (the 443 and 53 services take the list with
// backends_from). Every host serves every service; a capacity reload and a drain of a host
// keep 100 established TCP connections and 20 long UDP flows on their backends; a killed
// probe takes its host out of all three groups. The UDP service is hashed per flow (the
// multipath hash into the slot flows of table 7, docs/dataplane.md "UDP per flow"); its
// traffic still comes from 30 client addresses, so the test does not depend on the hash.
func TestHostsMultiPortUDP(t *testing.T) { testHostsMultiPortUDP(t, false) }

// TestHostsMultiPortUDPIPv6 is the same on an IPv6 VIP with IPv6 hosts and clients.
func TestHostsMultiPortUDPIPv6(t *testing.T) { testHostsMultiPortUDP(t, true) }

func testHostsMultiPortUDP(t *testing.T, ipv6 bool) {
	const tlsGroup, dnsGroup = 2, 3
	o := scenario.Options{Net: 51, Hosts: true, AlsoPorts: []int{443}, UDPPort: 53, Work: 2000, IPv6: ipv6}
	// The match words of the family in ovs-ofctl's text.
	udpWord, dstWord, srcWord := "udp", "nw_dst=", "nw_src="
	if ipv6 {
		o.Net = 52
		udpWord, dstWord, srcWord = "udp6", "ipv6_dst=", "ipv6_src="
	}
	o.ExtraTOML = scenario.PortServicesTOML(o,
		scenario.PortService{Name: "tls", Protocol: "tcp", Port: 443, GroupID: tlsGroup},
		scenario.PortService{Name: "dns", Protocol: "udp", Port: 53, GroupID: dnsGroup})
	s := startScenario(t, o)
	ctx := context.Background()
	groups := []uint32{scenario.GroupID, tlsGroup, dnsGroup}
	names := []string{"be1", "be2", "be3"}
	// inAll waits until ok holds for every host's bucket weight in every group.
	inAll := func(what string, bound time.Duration, ok func(name string, w uint16) bool) {
		t.Helper()
		d, err := waitFor(bound, func() error {
			for _, g := range groups {
				w, err := s.GroupWeightsOf(g)
				if err != nil {
					return err
				}
				for _, n := range names {
					if !ok(n, w[n]) {
						return fmt.Errorf("group %d: %s has weight %d (%v)", g, n, w[n], w)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: not within %v: %v", what, bound, err)
		}
		t.Logf("%s in all three groups after %v", what, d.Round(10*time.Millisecond))
	}
	inAll("every host weighted", 20*time.Second, func(_ string, w uint16) bool { return w > 0 })
	// The UDP traffic comes from 30 client addresses (TestUDPPerFlow sends from one).
	clients, err := s.ClientAddrs(30)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("each host serves each service", func(t *testing.T) {
		for _, svc := range []struct {
			name, network string
			port          int
		}{{"web", "tcp", scenario.VIPPort}, {"tls", "tcp", 443}, {"dns", "udp", 53}} {
			var from []netip.Addr // tcp: the client's own address, a new source port each time
			if svc.network == "udp" {
				from = clients
			}
			per, failed, errs := s.Spread(ctx, svc.network, svc.port, 90, from)
			figure(t, fmt.Sprintf("share of 90 new %s flows, service %s (%s/%d)", svc.network, svc.name, svc.network, svc.port),
				"be1 %d / be2 %d / be3 %d, failed %d", per["be1"], per["be2"], per["be3"], failed)
			if failed > 0 {
				t.Errorf("service %s: %d of 90 requests failed: %v", svc.name, failed, errs)
			}
			for _, n := range names {
				if per[n] == 0 {
					t.Errorf("service %s: host %s answered none of 90 new flows (%v)", svc.name, n, per)
				}
			}
		}
	})

	t.Run("udp flows on the switch", func(t *testing.T) {
		out, err := s.Bridge.DumpFlows()
		if err != nil {
			t.Fatal(err)
		}
		var udp []string
		slotFlows := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "table=7,") {
				if slotFlows++; slotFlows <= 3 { // 256 of them: counted, three logged
					udp = append(udp, strings.TrimSpace(l))
				}
				continue
			}
			if strings.Contains(l, "udp") || strings.Contains(l, "group:3") {
				udp = append(udp, strings.TrimSpace(l))
			}
		}
		if slotFlows != 256 {
			t.Errorf("%d slot flows in table 7, want 256", slotFlows)
		}
		gs, err := s.Bridge.DumpGroups()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(gs, "\n") {
			if strings.Contains(l, "group_id=3,") {
				udp = append(udp, strings.TrimSpace(l))
			}
		}
		t.Logf("flows and group of the UDP service (dump-flows, dump-groups):\n%s", strings.Join(udp, "\n"))
		var text string
		for _, l := range udp {
			text += l + "\n"
		}
		for _, want := range []string{udpWord + "," + dstWord + s.VIP.String() + ",tp_dst=53 actions=ct(table=1,zone=3,nat)",
			udpWord + "," + dstWord + s.VIP.String() + ",tp_dst=53 actions=multipath(symmetric_l3l4+udp,0,modulo_n,256,0,NXM_NX_REG4[0..7]),goto_table:7"} {
			if !strings.Contains(text, want) {
				t.Errorf("no UDP flow with %q", want)
			}
		}
		for _, b := range s.Backends {
			if want := udpWord + "," + srcWord + b.Host.Addr().String() + ",tp_src=53 actions=ct(table=3,zone=3,nat)"; !strings.Contains(text, want) {
				t.Errorf("no return flow %q", want)
			}
		}
	})

	t.Run("reweights keep tcp connections and udp flows", func(t *testing.T) {
		lc, err := s.LongConns(100, 200*time.Millisecond, 45*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		uf, err := s.UDPFlows(20, 53, 45*time.Second, clients)
		if err != nil {
			lc.Stop()
			t.Fatal(err)
		}
		defer lc.Stop()
		defer uf.Stop()
		// Every connection and every flow answers 3 more times after each change: one that
		// broke, moved or stalled holds the wait until it fails.
		stillFlowing := func(what string) {
			t.Helper()
			t0, u0 := lc.Status(), uf.Status()
			if _, err := waitFor(15*time.Second, func() error {
				if err := lc.Status().AllGrew(t0, 3); err != nil {
					return fmt.Errorf("tcp: %w", err)
				}
				if err := uf.Status().AllGrew(u0, 3); err != nil {
					return fmt.Errorf("udp: %w", err)
				}
				return nil
			}); err != nil {
				t.Fatalf("after %s: %v", what, err)
			}
		}
		before := map[uint32]map[string]uint16{}
		for _, g := range groups {
			w, err := s.GroupWeightsOf(g)
			if err != nil {
				t.Fatal(err)
			}
			before[g] = w
		}
		caps := s.Capacities()
		caps[0] = 4 // be1 declared four times stronger, in every service it backs
		if err := s.Reload(caps, ""); err != nil {
			t.Fatal(err)
		}
		_, err = waitFor(10*time.Second, func() error {
			for _, g := range groups {
				w, err := s.GroupWeightsOf(g)
				if err != nil {
					return err
				}
				if w["be1"] <= before[g]["be1"] {
					return fmt.Errorf("group %d: be1 weight %d, was %d before its capacity went to 4", g, w["be1"], before[g]["be1"])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		stillFlowing("the capacity reload")
		if err := s.Drain("be2", true); err != nil {
			t.Fatal(err)
		}
		inAll("be2 drained", 10*time.Second, func(n string, w uint16) bool { return (n == "be2") == (w == 0) })
		stillFlowing("the drain of be2") // be2's connections and flows stay on it, at weight 0
		if err := s.Drain("be2", false); err != nil {
			t.Fatal(err)
		}
		inAll("be2 back", 20*time.Second, func(_ string, w uint16) bool { return w > 0 })
		stillFlowing("the undrain of be2")
		tcp, udp := lc.Stop(), uf.Stop()
		figure(t, "broken of 100 established TCP connections over a capacity reload and a drain (3 services)", "%d (opened %d, %d requests, per backend %v)",
			tcp.Broken, tcp.Opened, tcp.Requests, tcp.PerBackend)
		figure(t, "broken of 20 long UDP flows over a capacity reload and a drain", "%d (opened %d, %d datagrams answered, per backend %v)",
			udp.Broken, udp.Opened, udp.Requests, udp.PerBackend)
		if tcp.Broken != 0 || tcp.Opened != 100 {
			t.Errorf("tcp: %d of 100 broken, %d opened: %v", tcp.Broken, tcp.Opened, tcp.Reasons)
		}
		if udp.Broken != 0 || udp.Opened != 20 {
			t.Errorf("udp: %d of 20 broken, %d opened: %v", udp.Broken, udp.Opened, udp.Reasons)
		}
		if len(udp.PerBackend) < 2 {
			t.Errorf("all 20 udp flows on %v: the test moved nothing worth keeping", slices.Sorted(maps.Keys(udp.PerBackend)))
		}
	})

	t.Run("a killed probe takes its host out of every service", func(t *testing.T) {
		if err := s.Backend("be3").KillProbe(); err != nil {
			t.Fatal(err)
		}
		bound := s.Opts.StaleAfter + s.Opts.UpdatePeriod + 5*time.Second
		inAll("be3 evicted", bound, func(n string, w uint16) bool { return (n == "be3") == (w == 0) })
	})
}
