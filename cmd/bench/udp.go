package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"flowweight/e2e/scenario"
)

// The cost of hashing UDP per flow (docs/dataplane.md, "UDP per flow"), against the select
// group's per-address hash on the same switch, backends and clients, interleaved: the hash
// per flow is taken in userspace, so each new UDP flow is an upcall where the group's dp_hash
// is not. Both modes are one service, `udp_hash` switched by a reload.
//
// Latency: udpSerial new flows one after another (a new socket, one datagram, its answer),
// timed from send to answer. Rate: udpSenders clients open new flows as fast as they can for
// udpFor (bounded in count too), each flow from one of udpClientAddrs client addresses in
// turn, so the per-address hash spreads them too and the backends are not what limits it;
// ovs-vswitchd's CPU over the run gives its cost per new flow. Split: udpSplitFlows new flows
// from one client address, the share of the busiest backend.

const (
	udpSerial      = 500
	udpSenders     = 16
	udpFor         = 10 * time.Second
	udpMax         = 200000
	udpClientAddrs = 30
	udpSplitFlows  = 1000
	udpGroup       = 3
)

func (b *bench) udpCost() error {
	reps := b.repeat
	if reps == 0 {
		reps = 3
	}
	o := scenario.Options{Quotas: []float64{0.5, 0.5, 0.5}, Work: 100, UDPPort: 53,
		Weighting: map[string]string{"policy": `"static"`}}
	s, stop, err := b.start(o)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := waitShares(s, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, 0.01, 30*time.Second); err != nil {
		return err
	}
	clients, err := s.ClientAddrs(udpClientAddrs)
	if err != nil {
		return err
	}
	fmt.Printf("## UDP per flow: what the hash per flow costs, against the select group's per-address hash\n\n")
	fmt.Printf("Three backends (quota 0.5 core each, equal weights), one UDP service on port 53, the same switch and client; `udp_hash` switched by a reload. Latency: %d new flows one after another (a new socket, one datagram and its answer). Rate: %d senders opening new flows for %v (at most %d), each from one of %d client addresses in turn; CPU is utime+stime over the run. Split: %d new flows from one client address, the busiest backend's share. Runs interleaved, %d repetitions, every run listed.\n\n",
		udpSerial, udpSenders, udpFor, udpMax, udpClientAddrs, udpSplitFlows, reps)
	fmt.Println("| run | udp_hash | first answer p50 | p99 | max | failed | rate run: new flows/s | failed | ovs-vswitchd CPU (cores) | ovs-vswitchd CPU per new flow | one address: busiest backend's share |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	type row struct{ p50, p99, rate, perFlow float64 }
	rows := map[string][]row{}
	for rep := range reps {
		modes := []string{"per_flow", "per_address"}
		if rep%2 == 1 {
			slices.Reverse(modes)
		}
		for _, mode := range modes {
			if err := setUDPHash(s, mode); err != nil {
				return err
			}
			if err := flushConntrack(s); err != nil {
				return err
			}
			lat, failed, err := serialUDP(s, udpSerial)
			if err != nil {
				return err
			}
			if err := flushConntrack(s); err != nil {
				return err
			}
			r, err := udpRate(s, clients)
			if err != nil {
				return err
			}
			if err := flushConntrack(s); err != nil {
				return err
			}
			per, splitFailed, errs := s.Spread(context.Background(), "udp", 53, udpSplitFlows, nil)
			if splitFailed > 0 {
				return fmt.Errorf("udp split (%s): %d of %d flows failed: %v", mode, splitFailed, udpSplitFlows, errs)
			}
			busiest := 0
			for _, n := range per {
				busiest = max(busiest, n)
			}
			perFlow := 0.0
			if r.conns > 0 {
				perFlow = r.ovs.cpu.Seconds() / float64(r.conns)
			}
			p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
			rows[mode] = append(rows[mode], row{p50, p99, r.rate(), perFlow})
			fmt.Printf("| %d | %s | %.3f ms | %.3f ms | %.3f ms | %d | %.0f | %d | %s | %.1f µs | %.1f %% |\n", rep+1, mode,
				msOf(p50), msOf(p99), msOf(quantile(lat, 1)), failed, r.rate(), r.failed, r.ovs, perFlow*1e6,
				100*float64(busiest)/udpSplitFlows)
		}
	}
	med := medianBy[row]
	pf, pa := rows["per_flow"], rows["per_address"]
	fmt.Printf("\nMedians: first answer p50 %.3f ms (per flow) / %.3f ms (per address), p99 %.3f / %.3f ms. Rate %.0f / %.0f new flows/s; ovs-vswitchd spends %.1f / %.1f µs of CPU per new flow.\n\n",
		msOf(med(pf, func(x row) float64 { return x.p50 })), msOf(med(pa, func(x row) float64 { return x.p50 })),
		msOf(med(pf, func(x row) float64 { return x.p99 })), msOf(med(pa, func(x row) float64 { return x.p99 })),
		med(pf, func(x row) float64 { return x.rate }), med(pa, func(x row) float64 { return x.rate }),
		1e6*med(pf, func(x row) float64 { return x.perFlow }), 1e6*med(pa, func(x row) float64 { return x.perFlow }))
	return setUDPHash(s, "per_flow")
}

// setUDPHash reloads the controller with the UDP service hashed by mode and waits until the
// switch holds the matching new-flow flow (the multipath hash only per flow).
func setUDPHash(s *scenario.Scenario, mode string) error {
	svc := strings.TrimRight(scenario.PortServicesTOML(s.Opts, scenario.PortService{Name: "dns", Protocol: "udp", Port: 53, GroupID: udpGroup}), "\n")
	s.Opts.ExtraTOML = svc + "\nudp_hash = " + strconv.Quote(mode) + "\n"
	if err := s.Reload(nil, ""); err != nil {
		return err
	}
	return until(20*time.Second, func() error {
		flows, err := s.Flows()
		if err != nil {
			return err
		}
		perFlow := slices.ContainsFunc(flows, func(f string) bool { return strings.Contains(f, "multipath(symmetric_l3l4+udp") })
		perAddress := slices.ContainsFunc(flows, func(f string) bool {
			return strings.Contains(f, "udp") && strings.Contains(f, "actions=group:"+strconv.Itoa(udpGroup))
		})
		if perFlow != (mode == "per_flow") || perAddress != (mode == "per_address") {
			return fmt.Errorf("switch does not hold udp_hash %q yet", mode)
		}
		_, err = s.InSync()
		return err
	})
}

// serialUDP opens n new UDP flows to the VIP one after another (a new socket, one datagram,
// its answer) and returns the send-to-answer times of those answered, and how many were not.
func serialUDP(s *scenario.Scenario, n int) ([]time.Duration, int, error) {
	addr := net.JoinHostPort(s.VIP.String(), "53")
	var lat []time.Duration
	failed := 0
	for i := range n {
		d, err := udpFlow(context.Background(), s, addr, netip.Addr{}, i)
		if err != nil {
			failed++
			continue
		}
		lat = append(lat, d)
	}
	if len(lat) == 0 {
		return nil, failed, fmt.Errorf("no udp flow of %d answered", n)
	}
	slices.Sort(lat)
	return lat, failed, nil
}

// udpFlow opens one new UDP flow from local (the zero address: the client's own), sends one
// datagram and waits up to a second for its answer.
func udpFlow(ctx context.Context, s *scenario.Scenario, addr string, local netip.Addr, i int) (time.Duration, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var c net.Conn
	var err error
	if local.IsValid() {
		c, err = s.Client.DialFrom(dctx, "udp", addr, local)
	} else {
		c, err = s.Client.DialContext(dctx, "udp", addr)
	}
	if err != nil {
		return 0, err
	}
	defer c.Close()
	payload := "u" + strconv.Itoa(i)
	_ = c.SetDeadline(time.Now().Add(time.Second))
	t0 := time.Now()
	if _, err := c.Write([]byte(payload)); err != nil {
		return 0, err
	}
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return 0, err
		}
		if _, got, ok := strings.Cut(string(buf[:n]), " "); ok && got == payload {
			return time.Since(t0), nil
		}
	}
}

// udpRate runs udpSenders clients opening new UDP flows for udpFor or udpMax flows, flow i
// from clients[i % len(clients)], measuring ovs-vswitchd's and the controller's CPU.
func udpRate(s *scenario.Scenario, clients []netip.Addr) (rateResult, error) {
	addr := net.JoinHostPort(s.VIP.String(), "53")
	return runRate(s, udpSenders, udpFor, udpMax, func(ctx context.Context, i int64) error {
		_, err := udpFlow(ctx, s, addr, clients[int(i)%len(clients)], int(i))
		return err
	})
}
