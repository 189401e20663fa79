//go:build integration

package e2e

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestReactiveDispatchLeastConnections runs reactive dispatch (dispatch = "reactive") on the
// real switch: the controller chooses every new connection's backend from the probes'
// in-flight counts. be1 is drained while 12 long connections open (they go to be2 and be3,
// six each), then put back; 12 more connections must go mostly to be1, the backend with
// nothing in flight, which the weights alone (equal here) would not do: a select group gives
// it a third of them. The switch must hold exactly what the controller planned (no drift, the
// pick flows and the flow to the controller present), and every connection must keep
// working on the backend it was given.
func TestReactiveDispatchLeastConnections(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 101, Quotas: []float64{0.25, 0.25, 0.25}, Work: 2000,
		InFlight: 20 * time.Millisecond, Weighting: map[string]string{"policy": `"static"`},
		ServiceKeys: map[string]string{"dispatch": `"reactive"`}})
	waitWarm(t, s)
	equal := func(what string) {
		t.Helper()
		if _, err := waitFor(30*time.Second, func() error {
			w, err := s.InSync()
			if err != nil {
				return err
			}
			lo, hi := uint16(0xffff), uint16(0)
			for _, v := range w {
				lo, hi = min(lo, v), max(hi, v)
			}
			if len(w) != 3 || lo == 0 || hi-lo > 1 {
				return fmt.Errorf("switch holds %v, want three equal weights", w)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	equal("before the connections")
	flows, err := s.Flows()
	if err != nil {
		t.Fatal(err)
	}
	var toController, picks int
	for _, f := range flows {
		switch {
		case strings.Contains(f, "reg3=0") && strings.Contains(f, "actions=CONTROLLER"):
			toController++
		case strings.Contains(f, "reg3=0x") && strings.Contains(f, "ct(commit"):
			picks++
		}
	}
	if toController != 1 || picks != 3 {
		t.Fatalf("switch has %d flows to the controller and %d pick flows, want 1 and 3:\n%s", toController, picks, strings.Join(flows, "\n"))
	}

	if err := s.Drain("be1", true); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(20*time.Second, func() error {
		w, err := s.GroupWeights()
		if err != nil {
			return err
		}
		if w["be1"] != 0 {
			return fmt.Errorf("switch holds %v, want be1 at 0", w)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first, err := s.LongConns(12, 200*time.Millisecond, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	a := first.Status()
	t.Logf("with be1 drained: %v", a.PerBackend)
	if a.Opened != 12 || a.PerBackend["be1"] != 0 || a.PerBackend["be2"] < 5 || a.PerBackend["be3"] < 5 {
		t.Fatalf("12 connections with be1 drained went %v (%d opened, broken %v): want none on be1 and about six on each other", a.PerBackend, a.Opened, a.Reasons)
	}

	if err := s.Drain("be1", false); err != nil {
		t.Fatal(err)
	}
	equal("after be1 is back")
	// Settled: every probe's in-flight count shows the connections it holds.
	if _, err := waitFor(20*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		for _, b := range v.Backends {
			if b.Connections == nil || int(*b.Connections) != a.PerBackend[b.Name] {
				return fmt.Errorf("%s reports %v connections, holds %d", b.Name, b.Connections, a.PerBackend[b.Name])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	before, err := dispatchedBy(s)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.LongConns(12, 200*time.Millisecond, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Stop()
	b := second.Status()
	t.Logf("after be1 is back: %v", b.PerBackend)
	// 24 in all, eight each: be1 takes eight of the twelve. One fewer where a handshake
	// outlasts the dispatcher's allowance for it (20 ms, a loaded machine).
	if b.Opened != 12 || b.PerBackend["be1"] < 7 {
		t.Fatalf("12 connections after be1 came back empty went %v (%d opened, broken %v): want at least 7 on be1", b.PerBackend, b.Opened, b.Reasons)
	}
	after, err := dispatchedBy(s)
	if err != nil {
		t.Fatal(err)
	}
	if n := after["least_conn"] - before["least_conn"]; n < 12 {
		t.Errorf("flowweight_dispatched_connections_total{by=\"least_conn\"} grew by %v for 12 connections (round_robin %v -> %v)", n, before["round_robin"], after["round_robin"])
	}
	v, err := s.Service()
	if err != nil {
		t.Fatal(err)
	}
	if v.Dispatch != "reactive" {
		t.Errorf("service shows dispatch %q, want reactive", v.Dispatch)
	}
	for _, be := range v.Backends {
		if be.Dispatched == nil || *be.Dispatched == 0 {
			t.Errorf("%s shows dispatched %v", be.Name, be.Dispatched)
		}
	}

	// Every connection still answers from its first backend, and the switch was never found
	// drifted from the plan (the read-back compares every flow, the pick flows' registers
	// included).
	sa, sb := first.Status(), second.Status()
	if _, err := waitFor(10*time.Second, func() error {
		if err := first.Status().AllGrew(sa, 2); err != nil {
			return err
		}
		return second.Status().AllGrew(sb, 2)
	}); err != nil {
		t.Fatal(err)
	}
	if ra, rb := first.Stop(), second.Stop(); ra.Broken+rb.Broken != 0 {
		t.Fatalf("broken connections: %v %v", ra.Reasons, rb.Reasons)
	}
	if d, err := metricValue(s, "flowweight_drift_repairs_total"); err != nil || d != 0 {
		t.Fatalf("drift repairs %v (%v): the switch did not hold what was planned\n%s", d, err, s.ControllerLog())
	}
}

// TestReactiveDispatchRoundRobin: without in-flight counts (the probes send none) reactive
// dispatch splits new connections by weight, connection by connection: 30 connections from
// one client at capacities 1:2:3 go 5/10/15, each within one connection of its weight's
// share, where a hash of one client's ports only comes near it.
func TestReactiveDispatchRoundRobin(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 102, Quotas: []float64{0.25, 0.25, 0.25}, Capacities: []float64{1, 2, 3},
		Work: 2000, Weighting: map[string]string{"policy": `"static"`},
		ServiceKeys: map[string]string{"dispatch": `"reactive"`}})
	waitWarm(t, s)
	var w map[string]uint16
	if _, err := waitFor(30*time.Second, func() error {
		var err error
		if w, err = s.InSync(); err != nil {
			return err
		}
		if w["be1"] == 0 || w["be2"] < 2*w["be1"]-2 || w["be3"] < 3*w["be1"]-3 {
			return fmt.Errorf("switch holds %v, want 1:2:3", w)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lc, err := s.LongConns(30, 200*time.Millisecond, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r := lc.Stop()
	t.Logf("30 connections: %v", r.PerBackend)
	if r.Opened != 30 || r.Broken != 0 {
		t.Fatalf("%d of 30 opened, broken %v", r.Opened, r.Reasons)
	}
	// Smooth round-robin is never more than one connection from the weights' split at any
	// point of its cycle.
	total := float64(w["be1"]) + float64(w["be2"]) + float64(w["be3"])
	for _, name := range []string{"be1", "be2", "be3"} {
		want := 30 * float64(w[name]) / total
		if got := float64(r.PerBackend[name]); got < want-1 || got > want+1 {
			t.Errorf("%s took %v of 30 connections, its weight %d of %v says %.2f", name, got, w[name], total, want)
		}
	}
	by, err := dispatchedBy(s)
	if err != nil {
		t.Fatal(err)
	}
	if by["round_robin"] < 30 || by["least_conn"] != 0 {
		t.Fatalf("dispatched by %v, want 30 or more round_robin and no least_conn", by)
	}
}

// dispatchedBy sums flowweight_dispatched_connections_total by its "by" label.
func dispatchedBy(s *scenario.Scenario) (map[string]float64, error) {
	out := map[string]float64{}
	err := scrape(s, func(name, labels string, v float64) {
		if name != "flowweight_dispatched_connections_total" {
			return
		}
		for _, by := range []string{"least_conn", "round_robin"} {
			if strings.Contains(labels, `by="`+by+`"`) {
				out[by] += v
			}
		}
	})
	return out, err
}

// metricValue is the sum of every series of the named metric.
func metricValue(s *scenario.Scenario, metric string) (float64, error) {
	var sum float64
	err := scrape(s, func(name, _ string, v float64) {
		if name == metric {
			sum += v
		}
	})
	return sum, err
}

// scrape calls f for every sample line of the controller's /metrics.
func scrape(s *scenario.Scenario, f func(name, labels string, v float64)) error {
	res, err := s.Ctl.HTTPClient(5 * time.Second).Get("http://" + scenario.APIAddr + "/metrics")
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		series, value := line[:i], line[i+1:]
		name, labels, _ := strings.Cut(series, "{")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return fmt.Errorf("metrics: %q: %w", line, err)
		}
		f(name, labels, v)
	}
	return sc.Err()
}
