package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"flowweight/e2e/scenario"
)

// dropCounts are where a reactive run's first packets can be lost: Open vSwitch's packet-in
// queue to the controller (the rconn_overflow coverage counter: a packet-in dropped because
// controller_queue_size, default 100, were already queued) and the controller's own
// flowweight_dispatch_dropped_total, by reason. A dropped first packet costs the client a SYN
// retransmission (1 s).
type dropCounts struct {
	overflow uint64
	dropped  map[string]float64
}

// readDrops reads both; err when either cannot be read.
func readDrops(s *scenario.Scenario) (dropCounts, error) {
	out, err := s.OVS.Appctl("coverage/read-counter", "rconn_overflow")
	if err != nil {
		return dropCounts{}, fmt.Errorf("rconn_overflow: %w", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return dropCounts{}, fmt.Errorf("rconn_overflow: %q: %w", out, err)
	}
	var text string
	if err := s.APIText(0, "/metrics", &text); err != nil {
		return dropCounts{}, err
	}
	d := dropCounts{overflow: n, dropped: map[string]float64{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "flowweight_dispatch_dropped_total{") {
			continue
		}
		i := strings.Index(line, `reason="`)
		j := strings.LastIndexByte(line, ' ')
		if i < 0 || j < 0 {
			continue
		}
		reason := line[i+len(`reason="`):]
		reason = reason[:strings.IndexByte(reason, '"')]
		v, err := strconv.ParseFloat(line[j+1:], 64)
		if err != nil {
			return dropCounts{}, fmt.Errorf("metric line %q: %w", line, err)
		}
		d.dropped[reason] += v
	}
	return d, sc.Err()
}

// since renders what was lost between before and d.
func (d dropCounts) since(before dropCounts) string {
	var parts []string
	for r, v := range d.dropped {
		if dv := v - before.dropped[r]; dv > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", r, dv))
		}
	}
	ctl := "0"
	if len(parts) > 0 {
		ctl = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("switch queue %d / controller %s", d.overflow-before.overflow, ctl)
}
