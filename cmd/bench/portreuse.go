package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"flowweight/e2e/scenario"
)

// portReuse measures what source-port reuse from one client address does through Open
// vSwitch's userspace conntrack: 400 new connections a second for four 30 s runs, with the
// lab's wide port range and again with the kernel's default one, counting hung requests,
// the conntrack entries by state and the switch's conntrack_tcp_seq_chk_failed.
func (b *bench) portReuse() error {
	fmt.Printf("## Source-port reuse through conntrack: one client address, 400 new connections a second\n\n")
	fmt.Println("| client port range | run | requests ok | failed (by kind) | p99 of all | conntrack entries after (by state) | conntrack_tcp_seq_chk_failed, total |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, ports := range []string{"1024 65535", "32768 60999"} {
		if err := b.portReuseOne(ports); err != nil {
			return err
		}
	}
	fmt.Println()
	return nil
}

func (b *bench) portReuseOne(ports string) error {
	s, stop, err := b.start(scenario.Options{Quotas: []float64{0.5, 0.5, 0.5}})
	if err != nil {
		return err
	}
	defer stop()
	if out, err := exec.Command("ip", "netns", "exec", s.Client.NS, "sh", "-c",
		"echo "+ports+" > /proc/sys/net/ipv4/ip_local_port_range").CombinedOutput(); err != nil {
		return fmt.Errorf("client port range %q: %v: %s", ports, err, out)
	}
	if _, err := waitShares(s, []float64{1, 1, 1}, 0.01, 30*time.Second); err != nil {
		return err
	}
	for i := range 4 {
		res, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 200, Rate: 400,
			Duration: 30 * time.Second, MaxRequests: 12001})
		if err != nil {
			return err
		}
		states, seqFailed, err := conntrackState(s)
		if err != nil {
			return err
		}
		all := ms(res.P99All)
		if res.P99Failed {
			all = "failed"
		}
		fmt.Printf("| %s | %d | %d | %d %s | %s | %s | %s |\n", ports, i+1, res.OK, res.Errors, res.ErrSummary(), all, states, seqFailed)
	}
	return nil
}

// conntrackState counts the switch's conntrack entries by TCP state and reads the coverage
// counter of TCP packets refused for their sequence numbers.
func conntrackState(s *scenario.Scenario) (states, seqFailed string, err error) {
	out, err := s.OVS.Appctl("dpctl/dump-conntrack")
	if err != nil {
		return "", "", err
	}
	n := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if _, st, ok := strings.Cut(l, "state="); ok {
			n[strings.TrimRight(strings.Fields(st)[0], ")")]++
		}
	}
	var parts []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range n {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	cov, err := s.OVS.Appctl("coverage/show")
	if err != nil {
		return "", "", err
	}
	seqFailed = "0"
	for _, l := range strings.Split(cov, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "conntrack_tcp_seq_chk_failed" {
			seqFailed = f[len(f)-1]
		}
	}
	return strings.Join(parts, ", "), seqFailed, nil
}
