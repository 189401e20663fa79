//go:build integration

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowweight/controller/dataplane"
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

// TestReactiveDispatchControllerLost: reactive dispatch's flow to the controller is leased
// (docs/dataplane.md, "Reactive dispatch"). While the controller runs, its renewals keep the
// lease and the group's fallback flow carries nothing; SIGKILLed, the lease runs out and the
// switch serves new connections from the group alone; restarted, the controller takes every
// new connection again. Before the lease, a lost controller cost every new connection until
// one was back.
func TestReactiveDispatchControllerLost(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 103, Quotas: []float64{0.25, 0.25, 0.25}, Work: 2000,
		Weighting: map[string]string{"policy": `"static"`}, ServiceKeys: map[string]string{"dispatch": `"reactive"`}})
	waitWarm(t, s)
	if _, err := waitFor(30*time.Second, func() error { _, err := s.InSync(); return err }); err != nil {
		t.Fatal(err)
	}
	lease, fallback, err := dispatchFlows(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lease, fmt.Sprintf("hard_timeout=%d,", dataplane.DispatchLease)) {
		t.Fatalf("the flow to the controller holds no lease: %s", lease)
	}
	t.Logf("lease: %s\nfallback: %s", lease, fallback)
	load := func(what string, n int) scenario.LoadResult {
		t.Helper()
		res, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 2, Duration: 30 * time.Second, MaxRequests: n})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v", what, res)
		if res.OK != n || res.Errors != 0 {
			t.Fatalf("%s: %d of %d requests answered: %v", what, res.OK, n, res.ErrSamples)
		}
		return res
	}

	// dispatched is every new connection this controller process placed.
	dispatched := func() float64 {
		t.Helper()
		by, err := dispatchedBy(s)
		if err != nil {
			t.Fatal(err)
		}
		return by["round_robin"] + by["least_conn"]
	}
	d0, f0, p0 := dispatched(), fallbackPackets(t, s), pickPackets(t, s)
	load("controller up", 30)
	if n := dispatched() - d0; n < 30 {
		t.Errorf("the controller dispatched %v of 30 new connections", n)
	}
	// The pick flows count the controller's packet-outs as they run; datapath hits reach the
	// fallback's counters when the revalidators push them: wait for both.
	waitPackets(t, "the pick flows", func() int { return pickPackets(t, s) }, p0+30)
	settleCounters(t, s)
	if f := fallbackPackets(t, s); f != f0 {
		t.Errorf("the fallback flow counted %d packets while the controller ran, want none", f-f0)
	}
	// The VIP's address is answered by the controller (ARP to CONTROLLER), with either
	// dispatch: pin the client's neighbour entry, learned by the load above, so that what is
	// measured below is new connections, not address resolution.
	if err := pinNeighbour(s); err != nil {
		t.Fatal(err)
	}

	// The controller has run for longer than the lease: its flow to the controller is there
	// because it renews it, and was renewed within the last renewal period (and a second).
	lease, _, err = dispatchFlows(s)
	if err != nil {
		t.Fatal(err)
	}
	if age, err := flowDuration(lease); err != nil || age > dataplane.LeaseRefresh+time.Second {
		t.Fatalf("the flow to the controller is %v old (%v), want renewed within %v: %s", age, err, dataplane.LeaseRefresh+time.Second, lease)
	}
	killed := time.Now()
	if err := s.KillController(); err != nil {
		t.Fatal(err)
	}
	// Nobody renews the lease now: the flow to the controller must lapse within the lease,
	// Open vSwitch's one-second expiry sweep and the renewal period before the kill; the
	// bound allows a second more for a loaded machine, and the flow must not go before the
	// lease less that period and the sweep.
	if _, err := waitFor(time.Duration(dataplane.DispatchLease+3)*time.Second-time.Since(killed), func() error {
		l, fb, err := dispatchFlows(s)
		switch {
		case err != nil:
			return err
		case fb == "":
			return fmt.Errorf("the fallback flow is gone")
		case l != "":
			return fmt.Errorf("the flow to the controller is still there: %s", l)
		}
		return nil
	}); err != nil {
		t.Fatalf("after the controller was killed: %v", err)
	}
	lapsed := time.Since(killed)
	figure(t, "reactive dispatch, controller SIGKILLed: the flow to the controller lapsed after", "%v (lease %d s)", lapsed.Round(10*time.Millisecond), dataplane.DispatchLease)
	if early := time.Duration(dataplane.DispatchLease-2) * time.Second; lapsed < early {
		t.Errorf("the flow to the controller lapsed %v after the kill, before its lease allows (%v)", lapsed, early)
	}
	// One request at a time, each a new connection with a short timeout (a SYN retransmission
	// must not decide when it is answered), until one is answered from the group.
	var first time.Duration
	if _, err := waitFor(15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := scenario.Get(ctx, s.Client.HTTPClient(time.Second), fmt.Sprintf("http://%s:%d/", s.VIP, scenario.VIPPort)); err != nil {
			return err
		}
		first = time.Since(killed)
		return nil
	}); err != nil {
		t.Fatalf("no new connection served after the flow to the controller lapsed: %v", err)
	}
	figure(t, "reactive dispatch, controller SIGKILLed: first new connection answered after", "%v", first.Round(10*time.Millisecond))
	f1 := fallbackPackets(t, s)
	load("controller gone", 30)
	waitPackets(t, "the fallback flow", func() int { return fallbackPackets(t, s) }, f1+30)

	if err := s.StartController(); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(30*time.Second, func() error {
		l, _, err := dispatchFlows(s)
		if err != nil {
			return err
		}
		if l == "" {
			return fmt.Errorf("no flow to the controller yet")
		}
		_, err = s.InSync()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	settleCounters(t, s)
	f2, p2 := fallbackPackets(t, s), pickPackets(t, s)
	load("controller back", 30)
	if n := dispatched(); n < 30 {
		t.Errorf("the restarted controller dispatched %v of 30 new connections", n)
	}
	waitPackets(t, "the pick flows", func() int { return pickPackets(t, s) }, p2+30)
	settleCounters(t, s)
	if f := fallbackPackets(t, s); f != f2 {
		t.Errorf("the fallback flow counted %d packets with the controller back, want none", f-f2)
	}
}

// settleCounters returns once Open vSwitch's revalidators have finished two rounds since the
// call, so that every datapath hit until then is in the OpenFlow counters.
func settleCounters(t *testing.T, s *scenario.Scenario) {
	t.Helper()
	for range 2 {
		if out, err := s.OVS.Appctl("revalidator/wait"); err != nil {
			t.Fatalf("ovs-appctl revalidator/wait: %v: %s", err, out)
		}
	}
}

// waitPackets waits until count reaches want.
func waitPackets(t *testing.T, what string, count func() int, want int) {
	t.Helper()
	if _, err := waitFor(15*time.Second, func() error {
		if n := count(); n < want {
			return fmt.Errorf("%s counted %d packets, want %d or more", what, n, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// dispatchFlows returns the reactive service's flow to the controller (new connections,
// reg3=0) and its fallback to the group, as dump-flows prints them ("" where absent).
func dispatchFlows(s *scenario.Scenario) (lease, fallback string, err error) {
	out, err := s.Bridge.DumpFlows()
	if err != nil {
		return "", "", err
	}
	for _, f := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(f, "ct_state=+new+trk") && strings.Contains(f, "reg3=0") && strings.Contains(f, "actions=CONTROLLER"):
			lease = strings.TrimSpace(f)
		case strings.Contains(f, "ct_state=+new+trk") && strings.Contains(f, "priority=199") && strings.Contains(f, "actions=group:"):
			fallback = strings.TrimSpace(f)
		}
	}
	return lease, fallback, nil
}

var (
	nPackets = regexp.MustCompile(`n_packets=(\d+)`)
	duration = regexp.MustCompile(`duration=([0-9.]+)s`)
)

// flowDuration is a dump-flows line's duration: the time since the flow was added or last
// replaced by an add.
func flowDuration(line string) (time.Duration, error) {
	m := duration.FindStringSubmatch(line)
	if m == nil {
		return 0, fmt.Errorf("no duration in %q", line)
	}
	return time.ParseDuration(m[1] + "s")
}

// fallbackPackets is the fallback flow's packet count.
func fallbackPackets(t *testing.T, s *scenario.Scenario) int {
	t.Helper()
	_, f, err := dispatchFlows(s)
	if err != nil {
		t.Fatal(err)
	}
	m := nPackets.FindStringSubmatch(f)
	if m == nil {
		t.Fatalf("no fallback flow with a packet count: %q", f)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// pickPackets sums the packet counts of the reactive service's pick flows (reg3 set by the
// controller's packet-out, then the commit): one per dispatched connection.
func pickPackets(t *testing.T, s *scenario.Scenario) int {
	t.Helper()
	out, err := s.Bridge.DumpFlows()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, f := range strings.Split(out, "\n") {
		if strings.Contains(f, "reg3=0x") && strings.Contains(f, "ct(commit") {
			if m := nPackets.FindStringSubmatch(f); m != nil {
				n, _ := strconv.Atoi(m[1])
				sum += n
			}
		}
	}
	return sum
}

// pinNeighbour makes the client's neighbour entry for the VIP permanent, as learned.
func pinNeighbour(s *scenario.Scenario) error {
	ctx := context.Background()
	out, err := s.Client.Run(ctx, "ip", "neigh", "show", s.VIP.String())
	if err != nil {
		return err
	}
	f := strings.Fields(out)
	dev, mac := "", ""
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "dev":
			dev = f[i+1]
		case "lladdr":
			mac = f[i+1]
		}
	}
	if dev == "" || mac == "" {
		return fmt.Errorf("neighbour entry %q: no dev or lladdr", out)
	}
	_, err = s.Client.Run(ctx, "ip", "neigh", "replace", s.VIP.String(), "lladdr", mac, "dev", dev, "nud", "permanent")
	return err
}
