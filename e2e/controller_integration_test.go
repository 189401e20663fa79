//go:build integration

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"flowweight/e2e/lab"
	"flowweight/e2e/scenario"
)

var (
	binsOnce sync.Once
	bins     scenario.Binaries
	binsErr  error
	binsDir  string
)

// buildAll builds the controller, probe and backendd once per test binary into a
// temporary directory (never the source tree).
func buildAll(t testing.TB) scenario.Binaries {
	t.Helper()
	binsOnce.Do(func() {
		binsDir, binsErr = os.MkdirTemp("", "fw-e2e-bin-")
		if binsErr == nil {
			bins, binsErr = scenario.Build(binsDir)
		}
	})
	if binsErr != nil {
		t.Fatalf("build binaries: %v", binsErr)
	}
	return bins
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binsDir != "" {
		os.RemoveAll(binsDir)
	}
	os.Exit(code)
}

// startScenario starts a scenario in a short temp dir, logs the lab into the test log, and
// on failure dumps flows, groups, the API and every log.
func startScenario(t testing.TB, o scenario.Options) *scenario.Scenario {
	t.Helper()
	o.Bins = buildAll(t)
	dir, err := os.MkdirTemp("", "fwe2e-")
	if err != nil {
		t.Fatal(err)
	}
	o.Dir = dir
	o.Log = testLog{t}
	t0 := time.Now()
	s, err := scenario.Start(o)
	if err != nil {
		// Start tore everything down; its logs stay in dir.
		t.Fatalf("scenario start: %v\ncontroller log:\n%s\nvswitchd log:\n%s", err, tail(filepath.Join(dir, "controller.log")), tail(filepath.Join(dir, "ovs", "ovs-vswitchd.log")))
	}
	t.Logf("scenario up in %v: bridge %s, vip %s, mode %s", time.Since(t0).Round(time.Millisecond), s.Bridge.Name, s.VIP, o.Mode)
	t.Cleanup(func() {
		if t.Failed() {
			var buf bytes.Buffer
			s.Dump(&buf)
			t.Logf("scenario diagnostics:\n%s", buf.String())
		}
		if err := s.Close(); err != nil {
			t.Errorf("scenario close: %v", err)
		}
		os.RemoveAll(dir)
	})
	return s
}

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// waitFor polls f every 100 ms until it returns nil or timeout passes; it returns the time
// taken and f's last error.
func waitFor(timeout time.Duration, f func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := f()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stableSync waits until dump-groups equals the applied weights on two reads 1.5 s apart
// and returns those weights.
func stableSync(t *testing.T, s *scenario.Scenario, timeout time.Duration) map[string]uint16 {
	t.Helper()
	var last map[string]uint16
	_, err := waitFor(timeout, func() error {
		a, err := s.InSync()
		if err != nil {
			return err
		}
		time.Sleep(1500 * time.Millisecond)
		b, err := s.InSync()
		if err != nil {
			return err
		}
		if fmt.Sprint(a) != fmt.Sprint(b) {
			return fmt.Errorf("weights still moving: %v then %v", a, b)
		}
		last = b
		return nil
	})
	if err != nil {
		t.Fatalf("dump-groups never stably equal to the applied weights in %v: %v", timeout, err)
	}
	return last
}

// waitWarmedUp waits until no backend of the service is warming up: the warm-up ramp moves
// weights by less than the dead band at a time, so weights "settled" during it are not.
func waitWarmedUp(t *testing.T, s *scenario.Scenario, timeout time.Duration) {
	t.Helper()
	if _, err := waitFor(timeout, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		for _, b := range v.Backends {
			if w := b.Explanation.Warmup; w != 0 && w < 1 {
				return fmt.Errorf("%s warming up (%.2f)", b.Name, w)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// figure logs a measured figure in a form docs/e2e.md quotes ("figure: NAME = VALUE").
func figure(t *testing.T, name string, format string, args ...any) {
	t.Helper()
	t.Logf("figure: %s = %s", name, fmt.Sprintf(format, args...))
}

// TestControllerConntrack runs the controller's acceptance list on one conntrack-mode
// scenario: reachability through the VIP, dump-groups equal to the applied weights,
// capacity ordering under CPU-bound load, eviction and warm-up, drift repair, 40
// long-lived connections across three reweights, and resync after restarting
// ovs-vswitchd and the controller. The subtests share the scenario and run in order.
func TestControllerConntrack(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 41, Work: 60000, FlowMonitor: true})
	o := s.Opts
	ctx := context.Background()

	if !t.Run("vip reachable and all backends serve", func(t *testing.T) { testReach(t, s) }) {
		t.FailNow()
	}
	t.Run("weights order by capacity under load", func(t *testing.T) {
		res, err := s.Load(ctx, scenario.LoadOptions{Concurrency: 8, Duration: 10 * time.Second, MaxRequests: 6000})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("load: %v", res)
		if res.OK == 0 {
			t.Fatalf("no request succeeded: %v", res.ErrSamples)
		}
		v, err := s.Service()
		if err != nil {
			t.Fatal(err)
		}
		w := v.Applied()
		for _, b := range v.Backends {
			t.Logf("%s: quota %.2f cpu %.3f ls %.3f c %.2f al %.3f applied %d", b.Name, b.CPUCount, b.CPU, b.Explanation.LS, b.Explanation.C, b.Explanation.AL, b.AppliedWeight)
		}
		figure(t, "weights under load (be1 0.25, be2 0.5, be3 1.0 cores)", "%d / %d / %d", w["be1"], w["be2"], w["be3"])
		share := res.Share()
		figure(t, "realised split of requests under load", "%.1f%% / %.1f%% / %.1f%% (weights %.1f%% / %.1f%% / %.1f%%)",
			100*share["be1"], 100*share["be2"], 100*share["be3"],
			pct(w, "be1"), pct(w, "be2"), pct(w, "be3"))
		if !(w["be1"] < w["be2"] && w["be2"] < w["be3"]) {
			t.Fatalf("applied weights %v do not order by capacity: want be1 (0.25) < be2 (0.5) < be3 (1.0)", w)
		}
	})
	t.Run("dump-groups equals applied weights after rewrites", func(t *testing.T) {
		before := stableSync(t, s, 20*time.Second)
		caps := s.Capacities()
		caps[0] = 4 // be1 declared four times stronger: a rewrite for certain
		if err := s.Reload(caps, ""); err != nil {
			t.Fatal(err)
		}
		d, err := waitFor(10*time.Second, func() error {
			got, err := s.GroupWeights()
			if err != nil {
				return err
			}
			if got["be1"] <= before["be1"] {
				return fmt.Errorf("be1 weight %d, was %d before its capacity went to 4", got["be1"], before["be1"])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("capacity reload reached the switch in %v", d.Round(time.Millisecond))
		after := stableSync(t, s, 20*time.Second)
		t.Logf("weights before %v, after reload %v", before, after)
		caps[0] = 1
		if err := s.Reload(caps, ""); err != nil {
			t.Fatal(err)
		}
		stableSync(t, s, 20*time.Second)
	})
	t.Run("evict on failed health, return through warm-up", func(t *testing.T) { testEvictWarmup(t, s, o) })
	t.Run("frozen backend is evicted", func(t *testing.T) {
		be := s.Backend("be3")
		bound := time.Duration(o.FailThreshold)*o.ProbeInterval + o.UpdatePeriod + 3*time.Second
		evictAndRecover(t, s, "be3", "down", bound, be.Freeze, be.Thaw)
	})
	t.Run("probe stopped cleanly withdraws at once", func(t *testing.T) {
		be := s.Backend("be1")
		// The leaving report takes the backend out before stale_after.
		bound := o.UpdatePeriod + 2*time.Second
		evictAndRecover(t, s, "be1", "stale", bound, be.StopProbe, be.StartProbe)
	})
	t.Run("killed probe goes stale", func(t *testing.T) {
		be := s.Backend("be1")
		bound := o.StaleAfter + o.UpdatePeriod + 3*time.Second
		d := evictAndRecover(t, s, "be1", "stale", bound, be.KillProbe, be.StartProbe)
		// Not before stale_after less one report interval (the last report's age).
		if early := o.StaleAfter - o.ProbeInterval - 500*time.Millisecond; d < early {
			t.Errorf("be1 evicted %v after its probe was killed, before stale_after %v allows (%v)", d, o.StaleAfter, early)
		}
	})
	t.Run("manual mod-group is reverted", func(t *testing.T) { testDrift(t, s, o) })
	t.Run("long connections survive reweights", func(t *testing.T) {
		broken := longConnsAcrossReweights(t, s, nil)
		figure(t, "broken of 40 long connections over 3 reweights, conntrack", "%d", broken)
		if broken != 0 {
			t.Fatalf("%d of 40 long-lived connections broke across three reweights in conntrack mode, want 0", broken)
		}
	})
	t.Run("resync after ovs-vswitchd restart", func(t *testing.T) { testSwitchRestart(t, s) })
	t.Run("resync after controller restart, connections keep flowing", func(t *testing.T) { testControllerRestart(t, s) })
}

// TestControllerStateless measures what the conntrack mode avoids: the same 40
// long-lived connections across three reweights with stateless buckets. Nothing is asserted
// about the count; it is logged (and quoted in docs/e2e.md).
func TestControllerStateless(t *testing.T) {
	// Static weights with no step limit: each reweight is then exactly one group rewrite,
	// which is what the minimal-movement check below is about (with the step limit a reload's
	// kick and the next period's step can land between two looks at the group, and their
	// combined change need not be minimal even when each is).
	s := startScenario(t, scenario.Options{Net: 42, Mode: scenario.ModeStateless,
		Weighting: map[string]string{"policy": `"static"`, "max_step": "1.0"}})
	if !t.Run("vip reachable and all backends serve", func(t *testing.T) { testReach(t, s) }) {
		t.FailNow()
	}
	if out, err := s.Bridge.DumpGroups(); err == nil {
		t.Logf("stateless group:\n%s", out)
	}
	var moves []slotMove
	broken := longConnsAcrossReweights(t, s, func(before, after []string) { moves = append(moves, slotMove{before, after}) })
	if len(moves) == 0 {
		t.Fatal("no change of the stateless group's slots was seen over three reweights")
	}
	figure(t, "broken of 40 long connections over 3 reweights, stateless", "%d", broken)

	// What the stateless design guarantees. Each reweight rewrites only the slots it must:
	// exactly the sum of the backends' gains in slots. And a connection breaks only when its
	// slot changed backend (its packets then reach a backend that does not know it), so the
	// broken count is a binomial draw of 40 connections on the union of the moved slots.
	union := map[int]bool{}
	for i, m := range moves {
		if len(m.before) != len(m.after) {
			t.Fatalf("group change %d: the slot table went from %d to %d slots", i+1, len(m.before), len(m.after))
		}
		moved, gains := 0, map[string]int{}
		for j := range m.after {
			if m.before[j] != m.after[j] {
				moved++
				union[j] = true
			}
			gains[m.after[j]]++
			gains[m.before[j]]--
		}
		least := 0
		for _, g := range gains {
			least += max(g, 0)
		}
		figure(t, fmt.Sprintf("stateless group change %d: slots moved", i+1), "%d of %d (the least possible %d)", moved, len(m.after), least)
		if moved != least {
			t.Errorf("group change %d moved %d of %d slots; the shares changed by %d slots, so only those should move", i+1, moved, len(m.after), least)
		}
	}
	n := len(moves[0].after)
	p := float64(len(union)) / float64(n)
	lo, hi := binomialBounds(40, p, 1e-6)
	figure(t, "stateless: broken against moved slots", "%d of 40 broken, %d of %d slots moved at least once (expected %.1f, bounds %d..%d)",
		broken, len(union), n, 40*p, lo, hi)
	if broken < lo || broken > hi {
		t.Errorf("%d of 40 long connections broke, but only %.1f%% of the slots changed backend (expected %.1f, bounds %d..%d at 1e-6): connections on unmoved slots broke, or moved ones survived",
			broken, 100*p, 40*p, lo, hi)
	}
}

// slotMove is the stateless group's slot owners before and after one observed change.
type slotMove struct{ before, after []string }

// binomialBounds returns the smallest and largest k with P(X < k) and P(X > k) each at least
// tail, for X ~ Binomial(n, p): a count outside them is a failure, not bad luck.
func binomialBounds(n int, p, tail float64) (lo, hi int) {
	pmf := make([]float64, n+1)
	for k := 0; k <= n; k++ {
		lg, _ := math.Lgamma(float64(n + 1))
		l1, _ := math.Lgamma(float64(k + 1))
		l2, _ := math.Lgamma(float64(n - k + 1))
		switch {
		case p == 0:
			pmf[k] = map[bool]float64{true: 1}[k == 0]
		case p == 1:
			pmf[k] = map[bool]float64{true: 1}[k == n]
		default:
			pmf[k] = math.Exp(lg - l1 - l2 + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
		}
	}
	for acc := 0.0; lo < n && acc+pmf[lo] < tail; lo++ {
		acc += pmf[lo]
	}
	hi = n
	for acc := 0.0; hi > 0 && acc+pmf[hi] < tail; hi-- {
		acc += pmf[hi]
	}
	return lo, hi
}

func pct(w map[string]uint16, name string) float64 {
	total := 0
	for _, v := range w {
		total += int(v)
	}
	return 100 * float64(w[name]) / float64(max(total, 1))
}

// testReach: the client resolves the VIP (the controller answers ARP; no host holds it)
// and new connections land on every backend.
func testReach(t *testing.T, s *scenario.Scenario) {
	// Forget the VIP's MAC so that this run resolves it again through the controller.
	if _, err := s.Client.Run(context.Background(), "ip", "neigh", "flush", "to", s.VIP.String()); err != nil {
		t.Fatal(err)
	}
	// Rounds of 300 requests until every backend has answered: a backend the weighting gives
	// a share near the floor (1.9 % once, a warming backend beside a quota of a quarter core)
	// gets none of 300 about once in 300 runs, which says nothing about reachability. Ten
	// rounds bound it: at a 1 % share, missing 3,000 connections is a one-in-10¹³ event.
	seen := map[string]int{}
	total := 0
	for round := 1; round <= 10; round++ {
		res, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 4, Duration: 15 * time.Second, MaxRequests: 300})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("load through the VIP, round %d: %v", round, res)
		if res.OK != 300 || res.Errors != 0 {
			t.Fatalf("%d of 300 requests succeeded, %d failed: %v", res.OK, res.Errors, res.ErrSamples)
		}
		total += res.OK
		for name, n := range res.PerBackend {
			seen[name] += n
		}
		if len(seen) >= len(s.Backends) {
			break
		}
	}
	for _, b := range s.Backends {
		if seen[b.Name] == 0 {
			t.Errorf("backend %s got none of %d requests: %v", b.Name, total, seen)
		}
	}
	if len(seen) != len(s.Backends) {
		t.Errorf("answers from %v, want exactly the %d backends", seen, len(s.Backends))
	}
	neigh, err := s.Client.Run(context.Background(), "ip", "neigh", "show", s.VIP.String())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(neigh, "lladdr") {
		t.Fatalf("client has no MAC for the VIP %s: %q", s.VIP, neigh)
	}
	t.Logf("client's neighbour entry for the VIP: %s", strings.TrimSpace(neigh))
	flows, err := s.Bridge.DumpFlows()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	punt := "arp_tpa=" + s.VIP.String() // the VIP resolves by ARP, or by neighbour solicitation for IPv6
	if s.VIP.Is6() {
		punt = "nd_target=" + s.VIP.String()
	}
	for _, line := range strings.Split(flows, "\n") {
		if strings.Contains(line, punt) && strings.Contains(line, "CONTROLLER") && !strings.Contains(line, "n_packets=0,") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no VIP %s flow to CONTROLLER with packets in:\n%s", punt, flows)
	}
}

// testEvictWarmup stops be2's HTTP service: its bucket must drop to 0 within
// fail_threshold × probe interval + one update period (+ slack). Restarted, it comes back
// through warm-up: its first non-zero weight carries the watched warm-up's start, a few
// connections, below what the timer alone would give, and the weight rises once warm-up ends.
func testEvictWarmup(t *testing.T, s *scenario.Scenario, o scenario.Options) {
	be := s.Backend("be2")
	stableSync(t, s, 20*time.Second)
	bound := time.Duration(o.FailThreshold)*o.ProbeInterval + o.UpdatePeriod
	const slack = 3 * time.Second
	start := time.Now()
	if err := be.StopHTTP(); err != nil {
		t.Fatal(err)
	}
	evict, err := waitFor(bound+slack, func() error {
		w, err := s.GroupWeights()
		if err != nil {
			return err
		}
		if w["be2"] != 0 {
			return fmt.Errorf("be2 bucket weight still %d (buckets %v)", w["be2"], w)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("be2 not evicted within %v (fail_threshold %d × interval %v + update %v + slack %v): %v",
			bound+slack, o.FailThreshold, o.ProbeInterval, o.UpdatePeriod, slack, err)
	}
	figure(t, "time to evict after stopping HTTP", "%v (bound %v + %v slack)", evict.Round(10*time.Millisecond), bound, slack)
	v, err := s.Service()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := v.Backend("be2"); b.State != "down" {
		t.Errorf("be2 state %q after its HTTP service stopped, want down", b.State)
	}
	_ = start

	if err := be.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	var first scenario.BackendView
	_, err = waitFor(time.Duration(o.RiseThreshold)*o.ProbeInterval+o.UpdatePeriod+5*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		b, _ := v.Backend("be2")
		if b.AppliedWeight == 0 {
			return fmt.Errorf("be2 still at weight 0, state %q", b.State)
		}
		first = b
		return nil
	})
	if err != nil {
		t.Fatalf("be2 did not come back after its HTTP service restarted: %v", err)
	}
	back := time.Since(restarted)
	t.Logf("be2 back after %v: state %q, applied %d, explanation %+v", back.Round(10*time.Millisecond), first.State, first.AppliedWeight, first.Explanation)
	if first.State != "warming" {
		t.Errorf("be2's first non-zero weight came in state %q, want warming", first.State)
	}
	// The watched warm-up (the default) starts at 0.05 of the weight and never passes the
	// timer's line, which starts at warmup_start (0.5): the first sighting, at most an update
	// or two into the ramp, is below it (docs/weights.md, "Warm-up that watches").
	if f, timer := first.Explanation.Warmup, first.Explanation.WarmupTimer; f < 0.05 || f >= 0.5 || f > timer {
		t.Errorf("be2's first warm-up factor %.3f (timer %.3f), want in [0.05, 0.5) and at most the timer's", f, timer)
	}
	if _, err := waitFor(5*time.Second, func() error { _, err := s.InSync(); return err }); err != nil {
		t.Errorf("switch never showed the warming weight: %v", err)
	}
	var full scenario.BackendView
	_, err = waitFor(o.Warmup+5*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		b, _ := v.Backend("be2")
		if b.State != "up" || b.Explanation.Warmup != 1 {
			return fmt.Errorf("be2 still %q with warm-up factor %.3f", b.State, b.Explanation.Warmup)
		}
		full = b
		return nil
	})
	if err != nil {
		t.Fatalf("be2 never finished warm-up (%v): %v", o.Warmup, err)
	}
	final := stableSync(t, s, 20*time.Second)
	ratio := float64(first.Slots) / float64(max(final["be2"], 1))
	figure(t, "warm-up first weight", "%d (%d slots) with factor %.3f; %d slots once warm (ratio %.2f)", first.AppliedWeight, first.Slots, first.Explanation.Warmup, final["be2"], ratio)
	t.Logf("be2 warm after %v: %+v", time.Since(restarted).Round(10*time.Millisecond), full.Explanation)
	if final["be2"] <= first.Slots {
		t.Errorf("be2's slots did not rise after warm-up: first %d, then %d", first.Slots, final["be2"])
	}
}

// testDrift changes the group behind the controller's back with ovs-ofctl mod-group; the
// read-back must restore the applied weights within one read-back period (+ slack).
func testDrift(t *testing.T, s *scenario.Scenario, o scenario.Options) {
	want := stableSync(t, s, 20*time.Second)
	groups, err := s.Groups()
	if err != nil {
		t.Fatal(err)
	}
	var g *lab.Group
	for i := range groups {
		if groups[i].ID == scenario.GroupID {
			g = &groups[i]
		}
	}
	if g == nil {
		t.Fatalf("group %d missing: %v", scenario.GroupID, groups)
	}
	// Reverse the weights so every bucket differs (unless two are equal: then add one).
	n := len(g.Buckets)
	orig := make([]uint16, n)
	for i, b := range g.Buckets {
		orig[i] = b.Weight
	}
	for i := range g.Buckets {
		g.Buckets[i].Weight = orig[n-1-i]
		if g.Buckets[i].Weight == orig[i] {
			g.Buckets[i].Weight += 7
		}
	}
	if _, err := s.Bridge.Ofctl("mod-group", g.String()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := s.GroupWeights()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after mod-group %q: switch %v, applied %v", g.String(), got, want)
	if err := scenario.CompareWeights(got, want); err == nil {
		t.Logf("drift already repaired when read (%v)", time.Since(start))
	}
	// Compared with the applied weights of the moment: the controller may also reweight
	// meanwhile, and its rewrite of the whole group repairs the drift just as well.
	bound := o.ReadbackPeriod + 3*time.Second
	d, err := waitFor(bound, func() error {
		_, err := s.InSync()
		return err
	})
	if err != nil {
		t.Fatalf("drift not reverted within %v (read-back period %v + 3s): %v", bound, o.ReadbackPeriod, err)
	}
	figure(t, "time to revert a manual mod-group", "%v (read-back period %v)", d.Round(10*time.Millisecond), o.ReadbackPeriod)
	var evs []scenario.Event
	if err := s.API("/api/v1/events", &evs); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Time.After(start.Add(-time.Second)) && (e.Kind == "drift" || e.Kind == "rewrite") {
			t.Logf("event: %s %s", e.Kind, e.Text)
		}
	}
}

// longConnsAcrossReweights keeps 40 connections busy (a request every 250 ms each) while
// three capacity reloads reweight the group, and returns how many broke.
// observe, when not nil, is called with the stateless group's slot owners before and after
// every change of the group seen while the connections are open (polled every 100 ms).
func longConnsAcrossReweights(t *testing.T, s *scenario.Scenario, observe func(before, after []string)) int {
	t.Helper()
	stableSync(t, s, 20*time.Second)
	lc, err := s.LongConns(40, 250*time.Millisecond, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st := lc.Status()
	t.Logf("opened %d long connections: %v", st.Opened, st.PerBackend)
	base := s.Capacities()
	steps := [][]float64{{1, 1, 4}, {4, 1, 1}, {1, 4, 1}}
	// watch reports every change of the stateless group's slot owners since its last call.
	var last []string
	watch := func() {
		if observe == nil {
			return
		}
		owners, err := s.SlotOwners()
		if err != nil {
			t.Fatal(err)
		}
		if last != nil && !slices.Equal(last, owners) {
			observe(last, owners)
		}
		last = owners
	}
	watch()
	for i, caps := range steps {
		before, err := s.GroupWeights()
		if err != nil {
			t.Fatal(err)
		}

		if err := s.Reload(caps, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := waitFor(10*time.Second, func() error {
			watch()
			got, err := s.GroupWeights()
			if err != nil {
				return err
			}
			if fmt.Sprint(got) == fmt.Sprint(before) {
				return fmt.Errorf("group still %v", got)
			}
			before = got
			return nil
		}); err != nil {
			t.Fatalf("reweight %d (capacities %v) never reached the switch: %v", i+1, caps, err)
		}

		// Wait until every connection not yet known broken has sent two more requests through
		// the new group (a moved one breaks on its first), watching the slots meanwhile.
		r0 := lc.Status().Requests
		if _, err := waitFor(15*time.Second, func() error {
			watch()
			st := lc.Status()
			if live := st.Opened - st.Broken; st.Requests-r0 < 2*live {
				return fmt.Errorf("%d requests since the reweight, want 2 from each of %d live connections", st.Requests-r0, live)
			}
			return nil
		}); err != nil {
			t.Fatalf("reweight %d: %v", i+1, err)
		}
		t.Logf("reweight %d: capacities %v -> switch %v; so far %+v", i+1, caps, before, lc.Status().Broken)
	}
	watch()
	res := lc.Stop()
	t.Logf("long connections: opened %d, broken %d, requests %d, first backends %v", res.Opened, res.Broken, res.Requests, res.PerBackend)
	for _, r := range res.Reasons {
		t.Logf("  %s", r)
	}
	if res.Opened != 40 {
		t.Errorf("only %d of 40 long connections opened", res.Opened)
	}
	if err := s.Reload(base, ""); err != nil {
		t.Fatal(err)
	}
	return res.Broken
}

// snapshot is the switch state that must survive restarts: normalised flows and the group.
type snapshot struct {
	flows   []string
	buckets []string          // bucket actions of the service's group, sorted
	weights map[string]uint16 // bucket weights by backend
}

func takeSnapshot(s *scenario.Scenario) (snapshot, error) {
	flows, err := s.Flows()
	if err != nil {
		return snapshot{}, err
	}
	groups, err := s.Groups()
	if err != nil {
		return snapshot{}, err
	}
	if len(groups) != 1 || groups[0].ID != scenario.GroupID {
		return snapshot{}, fmt.Errorf("switch holds groups %v, want exactly group %d", groups, scenario.GroupID)
	}
	var buckets []string
	for _, b := range groups[0].Buckets {
		buckets = append(buckets, b.Actions)
	}
	slices.Sort(buckets)
	weights, err := s.GroupWeights()
	if err != nil {
		return snapshot{}, err
	}
	return snapshot{flows: flows, buckets: buckets, weights: weights}, nil
}

// sameAs says how now differs from want, or nil: flows equal line by line (no duplicate,
// none missing, none stale), the same buckets, and bucket weights equal to the applied ones
// (the controller may have reweighted since want was taken).
func (want snapshot) sameAs(s *scenario.Scenario) error {
	return want.compare(s, false)
}

// compare is sameAs; with frozen the weights must also be want's (no controller to ask).
func (want snapshot) compare(s *scenario.Scenario, frozen bool) error {
	now, err := takeSnapshot(s)
	if err != nil {
		return err
	}
	if !slices.Equal(now.flows, want.flows) {
		return fmt.Errorf("flows differ:\n%s", diffLines(want.flows, now.flows))
	}
	if !slices.Equal(now.buckets, want.buckets) {
		return fmt.Errorf("buckets differ: want %q, have %q", want.buckets, now.buckets)
	}
	if frozen {
		if fmt.Sprint(now.weights) != fmt.Sprint(want.weights) {
			return fmt.Errorf("bucket weights %v, want %v", now.weights, want.weights)
		}
		return nil
	}
	_, err = s.InSync()
	return err
}

func diffLines(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	if b.Len() == 0 {
		fmt.Fprintf(&b, "same lines, different counts (%d before, %d now): duplicates", len(want), len(got))
	}
	return b.String()
}

func testSwitchRestart(t *testing.T, s *scenario.Scenario) {
	stableSync(t, s, 20*time.Second)
	before, err := takeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	pid := s.OVS.PID()
	if err := s.OVS.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ovs-vswitchd restarted: pid %d -> %d", pid, s.OVS.PID())
	d, err := waitFor(30*time.Second, func() error { return before.sameAs(s) })
	if err != nil {
		t.Fatalf("switch state not restored after an ovs-vswitchd restart: %v", err)
	}
	figure(t, "resync after ovs-vswitchd restart", "%v", d.Round(10*time.Millisecond))
	testReach(t, s)
}

func testControllerRestart(t *testing.T, s *scenario.Scenario) {
	stableSync(t, s, 20*time.Second)
	before, err := takeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := s.LongConns(20, 200*time.Millisecond, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Watch every flow change while the controller is away and comes back: a resync may
	// add and correct, but must never remove a flow that established connections use.
	mon, err := s.MonitorFlows()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.KillController(); err != nil {
		t.Fatal(err)
	}
	frozen, err := takeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	r0 := lc.Status().Requests
	time.Sleep(3 * time.Second)
	away := lc.Status()
	t.Logf("controller away 3s: %d requests on long connections, %d broken", away.Requests-r0, away.Broken)
	if away.Requests-r0 < 20 {
		t.Errorf("long connections made %d requests in 3 s without the controller, want them flowing", away.Requests-r0)
	}
	if err := frozen.compare(s, true); err != nil {
		t.Errorf("switch state changed while the controller was away (fail_mode secure keeps it): %v", err)
	}
	if err := s.StartController(); err != nil {
		t.Fatal(err)
	}
	d, err := waitFor(30*time.Second, func() error {
		if err := s.WaitReady(0); err != nil {
			return err
		}
		return before.sameAs(s)
	})
	events, merr := mon.Stop()
	res := lc.Stop()
	if merr != nil {
		t.Errorf("flow monitor: %v", merr)
	}
	// The flows were the same before and after, so any deletion was a flow that
	// established connections use, taken away and put back.
	for _, e := range events {
		t.Logf("flow change during the controller's restart: %s %s", e.Event, e.Flow)
		if e.Event == "DELETED" {
			t.Errorf("the restarted controller deleted a flow it then had to add again: %s", e.Flow)
		}
	}
	for _, r := range res.Reasons {
		t.Logf("  %s", r)
	}
	if err != nil {
		t.Fatalf("switch state not the same after a controller restart: %v", err)
	}
	figure(t, "resync after controller restart", "%v", d.Round(10*time.Millisecond))
	figure(t, "long connections broken across a controller kill and restart", "%d of %d", res.Broken, res.Opened)
	if res.Broken != 0 || res.Opened != 20 {
		t.Fatalf("long connections across the controller restart: %d opened, %d broken, want 20 and 0", res.Opened, res.Broken)
	}
}

// evictAndRecover applies fault to backend name and expects its bucket at 0 within bound and
// the API to report state; after undo the backend must come back (through warm-up) to a
// non-zero weight on the switch.
func evictAndRecover(t *testing.T, s *scenario.Scenario, name, state string, bound time.Duration, fault, undo func() error) time.Duration {
	t.Helper()
	stableSync(t, s, 20*time.Second)
	if err := fault(); err != nil {
		t.Fatal(err)
	}
	d, err := waitFor(bound, func() error {
		w, err := s.GroupWeights()
		if err != nil {
			return err
		}
		if w[name] != 0 {
			return fmt.Errorf("%s bucket weight still %d", name, w[name])
		}
		return nil
	})
	figure(t, "time to evict, "+t.Name(), "%v (bound %v)", d.Round(10*time.Millisecond), bound)
	v, verr := s.Service()
	b, _ := v.Backend(name)
	if uerr := undo(); uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil {
		t.Fatalf("%s not evicted within %v: %v", name, bound, err)
	}
	if verr != nil {
		t.Fatal(verr)
	}
	if b.State != state {
		t.Errorf("%s state %q after the fault, want %q", name, b.State, state)
	}
	if _, err := waitFor(20*time.Second, func() error {
		w, err := s.InSync()
		if err != nil {
			return err
		}
		if w[name] == 0 {
			return fmt.Errorf("%s still at weight 0", name)
		}
		return nil
	}); err != nil {
		t.Fatalf("%s did not come back: %v", name, err)
	}
	// Leave it warm, so the next subtest starts from a settled pool.
	if _, err := waitFor(s.Opts.Warmup+10*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		if b, _ := v.Backend(name); b.State != "up" {
			return fmt.Errorf("%s is %q", name, b.State)
		}
		return nil
	}); err != nil {
		t.Fatalf("%s did not finish warm-up: %v", name, err)
	}
	return d
}
