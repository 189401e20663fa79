//go:build integration

package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestUDPPerFlow runs issue 25's first target on the real switch: one client address opens
// 5,000 UDP flows (distinct random source ports, one datagram and its answer each) to a UDP
// VIP whose backends have static weights 1:2:4 (their CPU quotas). The select group would send every one of them
// to one backend (it hashes UDP by address only, docs/dataplane.md); hashed per flow, each
// backend's share of the flows is its share of the switch's slot flows within four sampling
// errors (the split of random 5-tuples is binomial around the slot shares), and the slot
// shares are the computed weights' to one slot.
func TestUDPPerFlow(t *testing.T) { testUDPPerFlow(t, false) }

// TestUDPPerFlowIPv6 is the same on an IPv6 VIP.
func TestUDPPerFlowIPv6(t *testing.T) { testUDPPerFlow(t, true) }

func testUDPPerFlow(t *testing.T, ipv6 bool) {
	const n, dnsGroup = 5000, 3
	// CPU quotas 0.25 / 0.5 / 1 core with capacity from CPU alone: weights 1:2:4.
	o := scenario.Options{Net: 55, UDPPort: 53, Work: 200, IPv6: ipv6,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}}
	udpWord, dstWord := "udp", "nw_dst="
	if ipv6 {
		o.Net = 56
		udpWord, dstWord = "udp6", "ipv6_dst="
	}
	o.ExtraTOML = scenario.PortServicesTOML(o, scenario.PortService{Name: "dns", Protocol: "udp", Port: 53, GroupID: dnsGroup})
	s := startScenario(t, o)
	waitWarmedUp(t, s, 60*time.Second)
	stableSync(t, s, 30*time.Second)

	// Settled: the slot flows on the switch give each backend what the group's weights do
	// (both are the same apportioning of 256 slots), on two reads in a row.
	var slots map[string]int
	var weights map[string]uint16
	if _, err := waitFor(30*time.Second, func() error {
		var err error
		if weights, err = s.GroupWeightsOf(dnsGroup); err != nil {
			return err
		}
		a, err := udpSlotFlows(s)
		if err != nil {
			return err
		}
		b, err := udpSlotFlows(s)
		if err != nil {
			return err
		}
		total := 0
		for _, be := range s.Backends {
			if a[be.Name] != int(weights[be.Name]) || a[be.Name] != b[be.Name] {
				return fmt.Errorf("slot flows %v then %v, group weights %v", a, b, weights)
			}
			total += a[be.Name]
		}
		if total != 256 {
			return fmt.Errorf("%d slot flows, want 256 (%v)", total, a)
		}
		slots = b
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("slot flows per backend: %v (group weights %v)", slots, weights)

	flows, err := s.Bridge.DumpFlows()
	if err != nil {
		t.Fatal(err)
	}
	hash := fmt.Sprintf("%s,%s%s,tp_dst=53 actions=multipath(symmetric_l3l4+udp,0,modulo_n,256,0,NXM_NX_REG4[0..7]),goto_table:7", udpWord, dstWord, s.VIP)
	if !strings.Contains(flows, hash) {
		t.Fatalf("no per-flow hash %q on the switch:\n%s", hash, flows)
	}

	// Distinct source ports drawn at random (the kernel's own are near-sequential).
	ports := make([]uint16, 0, n)
	for _, p := range rand.Perm(40000)[:n] {
		ports = append(ports, uint16(20000+p))
	}
	// Nothing but this test's flows reaches the VIP: the measured counters stand still now.
	before := waitCountersStillOf(t, s, "dns")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	per, failed, resends, errs := s.SpreadUDPFromPorts(ctx, 53, ports, 8)
	t.Logf("%d flows in %v, %d datagrams sent again", n, time.Since(start).Round(time.Millisecond), resends)
	if failed > 0 || len(errs) > 0 {
		t.Fatalf("%d of %d flows failed: %v", failed, n, errs)
	}

	// The controller measures the same split from the slot flows' counters (each counts the
	// first packet of every new flow hashed to it; a datagram sent again is one more).
	var after map[string]float64
	if _, err := waitFor(15*time.Second, func() error {
		after = measuredCountersOf(t, s, "dns")
		if got := sum(after) - sum(before); got != float64(n+resends) {
			return fmt.Errorf("measured %v new flows of %d (before %v, now %v)", got, n+resends, before, after)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if resends == 0 {
		for _, be := range s.Backends {
			if got := after[be.Name] - before[be.Name]; got != float64(per[be.Name]) {
				t.Errorf("%s: measured %v new flows, answered %d", be.Name, got, per[be.Name])
			}
		}
	}
	worst := 0.0
	var cells []string
	for _, be := range s.Backends {
		p := float64(slots[be.Name]) / 256
		got := float64(per[be.Name]) / n
		sigma := math.Sqrt(p * (1 - p) / n)
		worst = max(worst, math.Abs(got-p))
		cells = append(cells, fmt.Sprintf("%s %d (%.2f%%, slots %.2f%%)", be.Name, per[be.Name], 100*got, 100*p))
		if math.Abs(got-p) > 4*sigma {
			t.Errorf("%s: %.2f%% of the flows, its slots are %.2f%%: more than four sampling errors (%.2f points) apart", be.Name, 100*got, 100*p, 400*sigma)
		}
	}
	if log := controllerLogText(t, s); strings.Contains(log, "drift detected") {
		t.Errorf("the controller repaired drift: what it wrote does not read back as written:\n%s", log)
	}
	figure(t, fmt.Sprintf("UDP per flow (%s): %d flows from one client address at weights 1:2:4", udpWord, n),
		"%s; worst %.2f points from the slots", strings.Join(cells, " / "), 100*worst)
}

var natDst = regexp.MustCompile(`nat\(dst=\[?([0-9a-f.:]+?)\]?(:\d+)?\)`)

// udpSlotFlows counts the switch's table-7 flows (a per-flow UDP service's slots) per backend,
// by the address their ct(commit,nat(dst=...)) sends to.
func udpSlotFlows(s *scenario.Scenario) (map[string]int, error) {
	out, err := s.Bridge.DumpFlows()
	if err != nil {
		return nil, err
	}
	byIP := map[string]string{}
	for _, b := range s.Backends {
		byIP[b.Host.Addr().String()] = b.Name
	}
	per := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "table=7,") {
			continue
		}
		m := natDst.FindStringSubmatch(l)
		if m == nil || byIP[m[1]] == "" {
			return nil, fmt.Errorf("table-7 flow sends to no backend: %s", l)
		}
		per[byIP[m[1]]]++
	}
	return per, nil
}
