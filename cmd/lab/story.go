package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"flowweight/e2e/scenario"
)

// Which backend gets the CPU burner and which one is stopped: be2 (0.5 core) burns half a
// core, not a whole one, on a shared machine; be3 (1.0 core) has the largest weight, so its
// eviction and its return through warm-up are the easiest to see.
const (
	burnBackend  = "be2"
	evictBackend = "be3"
)

// Bounds of the story's steps; together about two minutes.
const (
	storyBound   = 3 * time.Minute
	loadDuration = 20 * time.Second
	loadMax      = 4000
	loadClients  = 8
	burnSeconds  = 20
)

// story writes the demo's narrative, one line at a time, to the story log that `up` follows.
type story struct {
	mu     sync.Mutex
	w      io.Writer
	t0     time.Time
	checks int
	failed []string
}

func newStory(w io.Writer) *story { return &story{w: w, t0: time.Now()} }

func (st *story) line(s string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	fmt.Fprintln(st.w, s)
}

func (st *story) say(format string, args ...any) { st.line(fmt.Sprintf(format, args...)) }

func (st *story) step(title string) {
	st.line("")
	st.say("== [%5.1fs] %s", time.Since(st.t0).Seconds(), title)
}

// block writes command output indented by two spaces.
func (st *story) block(out string) {
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		st.line("  " + l)
	}
}

// check records an expectation of the story and says whether it held.
func (st *story) check(ok bool, what string) {
	st.mu.Lock()
	st.checks++
	if !ok {
		st.failed = append(st.failed, what)
	}
	st.mu.Unlock()
	mark := "ok  "
	if !ok {
		mark = "NOT "
	}
	st.say("check %s %s", mark, what)
}

// shell runs a command for the story, printing it and its output as an operator would
// see them.
func (st *story) shell(display string, name string, args ...string) string {
	st.say("$ %s", display)
	out, err := run(15*time.Second, name, args...)
	st.block(out)
	if err != nil {
		st.say("  (%v)", err)
	}
	return out
}

func (st *story) dumpGroups(s *scenario.Scenario) {
	st.shell("ovs-ofctl -O OpenFlow13 dump-groups unix:"+s.Bridge.Mgmt(),
		"ovs-ofctl", "-O", "OpenFlow13", "dump-groups", "unix:"+s.Bridge.Mgmt())
}

func (st *story) table(s *scenario.Scenario) {
	api := "http://" + scenario.APIAddr
	st.shell(fmt.Sprintf("ip netns exec %s %s status -api %s", s.Ctl.NS, s.Opts.Bins.Controller, api),
		"ip", "netns", "exec", s.Ctl.NS, s.Opts.Bins.Controller, "status", "-api", api)
}

// weightsText renders bucket weights by backend name, in name order; a backend without a
// bucket shows 0.
func weightsText(names []string, w map[string]uint16) string {
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", n, w[n]))
	}
	return strings.Join(parts, " ")
}

// Ordered reports whether the weights rise strictly in the order of names (the backends
// sorted by capacity).
func Ordered(names []string, w map[string]uint16) bool {
	for i := 1; i < len(names); i++ {
		if w[names[i-1]] >= w[names[i]] {
			return false
		}
	}
	return len(names) > 0
}

// run tells the story on a started scenario; every step is bounded and the whole by
// storyBound. It always ends with the storyDone line.
func (st *story) run(parent context.Context, s *scenario.Scenario, startup time.Duration, proxyErr <-chan error) {
	ctx, cancel := context.WithTimeout(parent, storyBound)
	defer cancel()
	st.mu.Lock()
	st.t0 = time.Now() // the story's clock starts once the lab is up
	st.mu.Unlock()
	names := make([]string, len(s.Backends))
	for i, b := range s.Backends {
		names[i] = b.Name
	}
	weights := func() map[string]uint16 {
		w, err := s.GroupWeights()
		if err != nil {
			st.say("  (reading the group: %v)", err)
		}
		return w
	}

	st.step(fmt.Sprintf("1. what was built (in %v)", startup.Round(100*time.Millisecond)))
	st.say("Open vSwitch %s: ovsdb-server and ovs-vswitchd --disable-system (userspace datapath), run directory %s",
		strings.Join(ovsDaemons(s.Lab.Dir), ", "), s.OVS.RunDir)
	st.say("bridge %s: datapath_type=netdev, OpenFlow13, fail_mode=secure, controller unix:%s; its LOCAL port has no address",
		s.Bridge.Name, s.Socket)
	st.say("  management socket %s", s.Bridge.Mgmt())
	st.say("hosts (one network namespace each, a veth port on the bridge):")
	st.say("  %-7s %-14s %-12s %s", "host", "namespace", "address", "runs")
	st.say("  %-7s %-14s %-12s controller pid %d (push UDP :%d, API %s inside the namespace), log %s", "ctl", s.Ctl.NS,
		s.Ctl.Addr(), s.ControllerPID(), scenario.PushPort, scenario.APIAddr, s.ControllerLog())
	st.say("  %-7s %-14s %-12s the load generator (a new TCP connection per request)", "client", s.Client.NS, s.Client.Addr())
	for _, b := range s.Backends {
		st.say("  %-7s %-14s %-12s backendd :%d in cgroup %s, CPU quota %.2f core (%d SHA-256 rounds a request); probe, scope cgroup",
			b.Name, b.Host.NS, b.Host.Addr(), scenario.BackendPort, b.Cgroup.Name, b.Quota, s.Opts.Work)
	}
	st.say("VIP %s:%d on no host (the controller answers ARP for it) -> select group %d, mode %s",
		s.VIP, scenario.VIPPort, scenario.GroupID, s.Opts.Mode)
	st.say("controller tuning: update every %v, warm-up %v, evict after %d failed health checks, stale after %v",
		s.Opts.UpdatePeriod, s.Opts.Warmup, s.Opts.FailThreshold, s.Opts.StaleAfter)

	st.step("2. the group on the switch, and the controller's view (idle)")
	st.dumpGroups(s)
	st.table(s)
	if ctx.Err() != nil {
		st.end()
		return
	}

	st.step(fmt.Sprintf("3. load through the VIP: %d clients, at most %v and %d requests, a new connection each", loadClients, loadDuration, loadMax))
	st.say("from %s to http://%s:%d/ (each backend answers with its name)", s.Client.NS, s.VIP, scenario.VIPPort)
	st.say("  weights on the switch while it runs (dump-groups):")
	type loadOut struct {
		res scenario.LoadResult
		err error
	}
	done := make(chan loadOut, 1)
	go func() {
		res, err := s.Load(ctx, scenario.LoadOptions{Concurrency: loadClients, Duration: loadDuration, MaxRequests: loadMax})
		done <- loadOut{res, err}
	}()
	tick := time.NewTicker(4 * time.Second)
	loadStart := time.Now()
	var lo loadOut
wait:
	for {
		select {
		case lo = <-done:
			break wait
		case <-tick.C:
			st.say("  t+%2.0fs  %s", time.Since(loadStart).Seconds(), weightsText(names, weights()))
		}
	}
	tick.Stop()
	if lo.err != nil {
		st.say("load: %v", lo.err)
	}
	st.say("load: %v", lo.res)
	if len(lo.res.ErrSamples) > 0 {
		st.say("  errors, first few: %s", strings.Join(lo.res.ErrSamples, "; "))
	}
	underLoad := weights()
	var total float64
	for _, n := range names {
		total += float64(underLoad[n])
	}
	share := lo.res.Share()
	st.say("  %-5s %-6s %-9s %-8s %s", "", "quota", "requests", "share", "weight now (share of the weights)")
	for _, b := range s.Backends {
		st.say("  %-5s %-6.2f %-9d %5.1f%%   %d (%.1f%%)", b.Name, b.Quota, lo.res.PerBackend[b.Name], 100*share[b.Name],
			underLoad[b.Name], 100*float64(underLoad[b.Name])/max(total, 1))
	}
	st.dumpGroups(s)
	st.table(s)
	st.check(lo.res.OK > 0 && len(lo.res.PerBackend) == len(names), fmt.Sprintf("every backend answered through the VIP (%d ok, %d errors)", lo.res.OK, lo.res.Errors))
	st.check(Ordered(names, underLoad), fmt.Sprintf("under load the weights order by capacity, be1 (0.25) < be2 (0.5) < be3 (1.0): %s", weightsText(names, underLoad)))
	if ctx.Err() != nil {
		st.end()
		return
	}

	st.step(fmt.Sprintf("4. load applied to one backend: a CPU burner in %s's cgroup and namespace (at most %d s)", burnBackend, burnSeconds))
	before := settle(ctx, s, 12*time.Second)
	st.say("weights once the client load has gone: %s", weightsText(names, before))
	st.dumpGroups(s)
	bb := s.Backend(burnBackend)
	burnCmd := bb.Host.Command(context.Background(), "timeout", fmt.Sprint(burnSeconds), "sh", "-c", "while :; do :; done")
	st.say("$ ip netns exec %s timeout %d sh -c 'while :; do :; done'   # started inside cgroup %s (quota %.2f core)",
		bb.Host.NS, burnSeconds, bb.Cgroup.Name, bb.Quota)
	burner, err := s.Lab.Start(burnBackend+"-burn", burnCmd, bb.Cgroup)
	if err != nil {
		st.say("  (%v)", err)
		st.check(false, "the burner started")
	} else {
		burnStart := time.Now()
		fell := false
		for time.Since(burnStart) < time.Duration(burnSeconds-2)*time.Second && ctx.Err() == nil {
			sleepCtx(ctx, time.Second)
			w := weights()
			st.say("  t+%2.0fs  %s", time.Since(burnStart).Seconds(), weightsText(names, w))
			if float64(w[burnBackend]) <= 0.75*float64(before[burnBackend]) {
				fell = true
				break
			}
		}
		sleepCtx(ctx, 2*time.Second) // one more update, so the "after" shows where it settles
		after := weights()
		st.say("after the burner, while it still runs:")
		st.dumpGroups(s)
		st.table(s)
		st.check(fell && after[burnBackend] < before[burnBackend], fmt.Sprintf("%s's weight fell by a quarter or more: %d -> %d", burnBackend, before[burnBackend], after[burnBackend]))
		if err := burner.Stop(); err != nil {
			st.say("  (stopping the burner: %v)", err)
		}
		stopped := time.Now()
		st.say("burner stopped after %v; %s's weight as its smoothed load decays (at most 12 s):", stopped.Sub(burnStart).Round(100*time.Millisecond), burnBackend)
		pollCtx(ctx, 12*time.Second, time.Second, func() bool {
			w := weights()
			st.say("  t+%2.0fs  %s", time.Since(stopped).Seconds(), weightsText(names, w))
			return float64(w[burnBackend]) >= 0.75*float64(before[burnBackend])
		})
	}
	if ctx.Err() != nil {
		st.end()
		return
	}

	st.step(fmt.Sprintf("5. %s's HTTP service stopped: evicted; restarted: back through warm-up", evictBackend))
	eb := s.Backend(evictBackend)
	before = settle(ctx, s, 10*time.Second)
	st.say("weights before: %s", weightsText(names, before))
	stopAt := time.Now()
	st.say("stopping %s's backendd (SIGTERM); its probe's health checks now fail", evictBackend)
	if err := eb.StopHTTP(); err != nil {
		st.say("  (%v)", err)
	}
	evicted := pollCtx(ctx, 15*time.Second, 200*time.Millisecond, func() bool { return weights()[evictBackend] == 0 })
	st.check(evicted, fmt.Sprintf("%s evicted (bucket weight 0 or no bucket) %v after its service stopped", evictBackend, time.Since(stopAt).Round(100*time.Millisecond)))
	st.dumpGroups(s)
	st.say("the controller's events since then (GET /api/v1/events):")
	st.events(s, stopAt)

	restartAt := time.Now()
	st.say("restarting %s's backendd", evictBackend)
	if err := eb.StartHTTP(); err != nil {
		st.say("  (%v)", err)
	}
	var first scenario.BackendView
	back := pollCtx(ctx, 15*time.Second, 100*time.Millisecond, func() bool {
		v, err := s.Service()
		if err != nil {
			return false
		}
		b, _ := v.Backend(evictBackend)
		first = b
		return b.AppliedWeight > 0
	})
	st.check(back, fmt.Sprintf("%s back %v after the restart", evictBackend, time.Since(restartAt).Round(100*time.Millisecond)))
	st.say("  its first applied weight: %d (the controller's scale; the switch shows slots of its table), state %s, warm-up factor %.2f (the timer alone would give %.2f; %s)",
		first.AppliedWeight, first.State, first.Explanation.Warmup, first.Explanation.WarmupTimer, first.Explanation.WarmupWatch)
	pollCtx(ctx, 3*time.Second, 100*time.Millisecond, func() bool { _, err := s.InSync(); return err == nil })
	// The switch's slots once it holds that first weight: the checks below compare slots
	// with slots (the applied weight is on the controller's 1,000 scale, the buckets on 256).
	firstSlots := weights()[evictBackend]
	st.dumpGroups(s)
	st.say("  warming up (dump-groups, every second):")
	var last scenario.BackendView
	warmStart := time.Now()
	pollCtx(ctx, s.Opts.Warmup+8*time.Second, time.Second, func() bool {
		v, err := s.Service()
		if err != nil {
			return false
		}
		last, _ = v.Backend(evictBackend)
		st.say("  t+%2.0fs  %s   (%s %s, warm-up factor %.2f, %s)", time.Since(warmStart).Seconds(), weightsText(names, weights()),
			evictBackend, last.State, last.Explanation.Warmup, orText(last.Explanation.WarmupWatch, "done"))
		return last.State == "up" && last.Explanation.Warmup == 1
	})
	final := settle(ctx, s, 6*time.Second)
	st.dumpGroups(s)
	st.table(s)
	ratio := float64(firstSlots) / max(float64(final[evictBackend]), 1)
	// The watched warm-up (the default) starts a newcomer at a few connections, 0.05 of its
	// weight, and lets it earn the rest while it keeps up with the pool (docs/weights.md).
	st.check(first.State == "warming" && first.Explanation.Warmup <= 0.1,
		fmt.Sprintf("%s came back warming, at a few connections: factor %.2f, first %d slots, %d once warm (%.2f of it)",
			evictBackend, first.Explanation.Warmup, firstSlots, final[evictBackend], ratio))
	st.check(last.State == "up" && final[evictBackend] > firstSlots,
		fmt.Sprintf("%s back to full weight after warm-up: %d slots, from %d", evictBackend, final[evictBackend], firstSlots))

	st.step("6. keep watching")
	st.say("the group:            ovs-ofctl -O OpenFlow13 dump-groups unix:%s", s.Bridge.Mgmt())
	st.say("per-backend packets:  ovs-ofctl -O OpenFlow13 dump-flows unix:%s table=2", s.Bridge.Mgmt())
	st.say("the controller table: ip netns exec %s %s status", s.Ctl.NS, s.Opts.Bins.Controller)
	st.say("the JSON API:         ip netns exec %s curl -s http://%s/api/v1/services", s.Ctl.NS, scenario.APIAddr)
	select {
	case err := <-proxyErr:
		st.say("the dashboard:        not forwarded (%v); inside the namespace it is http://%s/", err, scenario.APIAddr)
	default:
		st.say("the dashboard:        http://%s/ on this machine (the supervisor forwards it to %s in %s);", ProxyAddr, scenario.APIAddr, s.Ctl.NS)
		st.say("                      from elsewhere: ssh -L 9190:%s HOST, then http://127.0.0.1:9190/", ProxyAddr)
	}
	st.say("logs:                 %s (controller.log, be*-probe.log, be*-http.log, ovs/)", s.Lab.Dir)
	st.say("more load:            nothing runs now; the lab idles until `down`")
	st.say("status:               bash scripts/lab.sh status")
	st.say("stop and remove:      bash scripts/lab.sh down")
	st.end()
}

// end writes the closing line `up` waits for.
func (st *story) end() {
	st.mu.Lock()
	n, failed := st.checks, slices.Clone(st.failed)
	st.mu.Unlock()
	st.line("")
	if len(failed) == 0 {
		st.say("%s in %v: all %d checks held; the lab keeps running", storyDone, time.Since(st.t0).Round(time.Second), n)
		return
	}
	st.say("%s in %v: %d of %d checks did not hold (%s); the lab keeps running", storyDone, time.Since(st.t0).Round(time.Second),
		len(failed), n, strings.Join(failed, "; "))
}

// events prints the controller's events from since on, oldest first.
func (st *story) events(s *scenario.Scenario, since time.Time) {
	var evs []scenario.Event
	if err := s.API("/api/v1/events", &evs); err != nil {
		st.say("  (%v)", err)
		return
	}
	slices.SortStableFunc(evs, func(a, b scenario.Event) int { return a.Time.Compare(b.Time) })
	for _, e := range evs {
		if e.Time.Before(since.Add(-time.Second)) {
			continue
		}
		who := e.Backend
		if who == "" {
			who = "-"
		}
		st.say("  %s  %-7s %-4s %s", e.Time.Local().Format("15:04:05.000"), e.Kind, who, e.Text)
	}
}

// settle waits (at most timeout) until the group's weights read the same twice, 2 s apart,
// and returns the last read.
func settle(ctx context.Context, s *scenario.Scenario, timeout time.Duration) map[string]uint16 {
	var last map[string]uint16
	pollCtx(ctx, timeout, 2*time.Second, func() bool {
		w, err := s.GroupWeights()
		if err != nil {
			return false
		}
		same := last != nil && maps.Equal(last, w)
		last = w
		return same
	})
	if last == nil {
		last, _ = s.GroupWeights()
	}
	return last
}

// pollCtx calls f every interval until it is true (true), or timeout passes or ctx ends
// (false).
func pollCtx(ctx context.Context, timeout, interval time.Duration, f func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		sleepCtx(ctx, interval)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// orText is s, or alt when s is empty.
func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
