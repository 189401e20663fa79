package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"flowweight/e2e/scenario"
)

// Labels of the peer runs. None is a prefix of another: find matches by prefix.
const (
	labelHAPlain    = "HAProxy leastconn, no weights"
	labelHAWeighted = "HAProxy leastconn, weights = capacities"
	labelFixed      = "fixed split = quotas (static)"
	labelFWDefault  = "flowweight headroom (default)"
	labelFWFast     = "flowweight headroom, fast loop" // + the period (-fast-loop)
	labelFWBanded   = "flowweight headroom, banded fast loop"
	labelFWFastOwn  = "flowweight headroom, fast loop against its own average"
	labelFWLeast    = "flowweight least_conn"
	labelFWReactive = "flowweight reactive dispatch (headroom weights)"
	labelFWMemory   = "flowweight memory in capacity (headroom, capacity 0.7 CPU + 0.3 memory)"
)

// HAProxy needs no learning; its short settle only warms the path like the others'.
const settleHAProxy = 4 * time.Second

// sourceAddrs is -sources: the client addresses the peer runs' connections come from (0: the
// client's own, as one load generator host would).
var sourceAddrs int

// Ports of the two HAProxy peers on the client's loopback.
const (
	portHAPlain    = 8401
	portHAWeighted = 8402
)

// peerLab is a scenario set up for comparing flowweight with its peers.
type peerLab struct {
	s                 *scenario.Scenario
	quotas            []float64
	capacity          float64 // req/s, measured under the fixed split
	plain, weighted   *haproxyPeer
	work              int
	calibration, pool string
}

// setupPeers starts the scenario with the -peer-quotas backends declared right (static,
// cpu-only capacity: the fixed split = quotas), tunes backendd's work to -request-cpu of
// CPU per request unless -work is set, measures the pool's capacity and starts both HAProxy
// peers in the client's namespace on the same backends. The caller runs stop, which stops
// the HAProxies by PID, then the lab.
func (b *bench) setupPeers() (*peerLab, func(), error) {
	quotas := b.peerQuotas
	work := b.work
	if work == 0 {
		work = 20000 // the first point of the calibration
	}
	// The probes send in-flight reports at the fast loop's suggested period in every run (both
	// it and the controller's in_flight_period are off by default); the controller follows
	// them only in the run with the fast loop on.
	s, stopLab, err := b.start(scenario.Options{Quotas: quotas, NoServiceCPU: b.noServiceCPU, Work: work,
		InFlight:  fastLoopPeriod,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	if err != nil {
		return nil, nil, err
	}
	pl := &peerLab{s: s, quotas: quotas, work: work}
	var haps []*haproxyPeer
	stop := func() {
		for _, h := range haps {
			if err := h.Stop(); err != nil {
				slog.Error("haproxy stop", "label", h.label, "err", err)
			}
		}
		stopLab()
	}
	fail := func(err error) (*peerLab, func(), error) {
		stop()
		return nil, nil, err
	}
	if err := b.waitServiceCPU(s); err != nil {
		return fail(err)
	}
	if _, err := waitShares(s, quotas, 0.01, 30*time.Second); err != nil {
		return fail(fmt.Errorf("fixed split weights: %w", err))
	}
	if b.work == 0 {
		if pl.work, pl.calibration, err = calibrate(s, quotas, b.requestCPU); err != nil {
			return fail(err)
		}
	} else {
		c, err := requestCost(s)
		if err != nil {
			return fail(err)
		}
		pl.calibration = fmt.Sprintf("-work %d given: measured %v of backendd CPU per request", work, c.Round(10*time.Microsecond))
	}
	if pl.capacity, pl.pool, err = saturate(s); err != nil {
		return fail(err)
	}
	weights, err := haproxyWeights(quotas)
	if err != nil {
		return fail(err)
	}
	if pl.plain, err = startHAProxy(s, s.Lab.Dir, labelHAPlain, portHAPlain, nil); err != nil {
		return fail(err)
	}
	haps = append(haps, pl.plain)
	if pl.weighted, err = startHAProxy(s, s.Lab.Dir, labelHAWeighted, portHAWeighted, weights); err != nil {
		return fail(err)
	}
	haps = append(haps, pl.weighted)
	return pl, stop, nil
}

// header prints what every peer experiment shares.
func (pl *peerLab) header(title string) {
	w, _ := haproxyWeights(pl.quotas)
	fmt.Printf("## %s\n\n", title)
	fmt.Printf("Backends: quotas %s core, declared right (capacity = quota). Backend work: %s; `backendd -work %d`.\n\n", fmtQuotas(pl.quotas), pl.calibration, pl.work)
	fmt.Printf("Pool capacity under the fixed split (16 clients, no rate limit, 10 s): %.1f req/s (%s).\n\n", pl.capacity, pl.pool)
	fmt.Printf("Load: open loop, Poisson arrivals (seeded: every peer of a level and repetition gets the same arrivals), a new TCP connection per request from %s, latency from the scheduled arrival, at most 1024 open (an arrival beyond is an `overflow` failure), 5 s timeout. ", sourcesText())
	fmt.Printf("HAProxy %s in the client's namespace, `mode tcp`, `balance leastconn`, servers = the backends, `%s` with `option httpchk GET /health` (the probes' health check: every 1 s, 500 ms timeout, down after 3, up after 2); weighted: `weight` %v. ", haproxyVersion(), haproxyCheck, w)
	fmt.Printf("Balancer CPU: HAProxy's process, or the controller's + the probes' (utime+stime over the measured run); ovs-vswitchd (userspace datapath) forwards both sides' packets and is listed apart.\n\n")
}

func sourcesText() string {
	if sourceAddrs == 0 {
		return "the client's one address"
	}
	return fmt.Sprintf("%d client addresses in turn (-sources)", sourceAddrs)
}

func fmtQuotas(q []float64) string {
	var parts []string
	for _, x := range q {
		parts = append(parts, fmt.Sprintf("%g", x))
	}
	return strings.Join(parts, "/")
}

// peerRuns are the peers compared at each level, in the order of the first repetition.
func (pl *peerLab) peerRuns() []policyRun {
	return []policyRun{
		{label: labelHAPlain, hap: pl.plain, settle: settleHAProxy},
		{label: labelHAWeighted, hap: pl.weighted, settle: settleHAProxy},
		{label: labelFixed, policy: "static", extra: map[string]string{"capacity": cpuOnly}, want: pl.quotas},
		fastLoopOff(feedback(labelFWDefault, "headroom")),
		feedback(fastLabel(labelFWFast), "headroom"),
		banded(feedback(fastLabel(labelFWBanded), "headroom")),
		ownReference(feedback(fastLabel(labelFWFastOwn), "headroom")),
		fastLoopOff(feedback(labelFWLeast, "least_conn")),
		reactive(feedback(labelFWReactive, "headroom")),
		memCapacity(fastLoopOff(feedback(labelFWMemory, "headroom"))),
	}
}

// memCapacity is r with the capacity counting memory too (weighting.capacity { cpu = 0.7,
// mem = 0.3 }, the default until 2026-12-07), where the default counts the CPUs alone: the
// lab's backends have the same memory, so near saturation, where the headroom policy splits
// by capacity, the memory term hands the small ones more than their CPUs
// (docs/results/reactive-dispatch.md, "Capacity by CPUs alone").
func memCapacity(r policyRun) policyRun {
	extra := map[string]string{"capacity": "{ cpu = 0.7, mem = 0.3 }"}
	for k, v := range r.extra {
		extra[k] = v
	}
	r.extra = extra
	return r
}

// reactive is r with dispatch = "reactive": the controller chooses each new connection's
// backend by weighted least connections over the probes' in-flight counts, the headroom
// policy's weights as the weights (docs/dataplane.md, "Reactive dispatch").
func reactive(r policyRun) policyRun {
	r = fastLoopOff(r)
	r.service = map[string]string{"dispatch": `"reactive"`}
	return r
}

// fastLoopPeriod is -fast-loop: the probes' in_flight_interval in every run, and the
// controller's in_flight_period in the runs that turn the fast loop on.
var fastLoopPeriod = 50 * time.Millisecond

// fastLabel is a fast-loop run's label with its period.
func fastLabel(l string) string {
	return fmt.Sprintf("%s %d ms", l, fastLoopPeriod.Milliseconds())
}

// fastLoopOff is r with the controller's fast loop off (weighting.in_flight_period "0s", the
// default; the scenario turns it on for the probes' sake).
func fastLoopOff(r policyRun) policyRun {
	r.extra = map[string]string{"in_flight_period": `"0s"`}
	return r
}

// ownReference is r with the fast loop judging each backend's count against its own moving
// average (weighting.in_flight_reference "own") instead of against the other backends'
// counts (the default, "pool").
func ownReference(r policyRun) policyRun {
	r.extra = map[string]string{"in_flight_reference": `"own"`}
	return r
}

// fastLoopBand is the banded fast loop's weighting.in_flight_dead_band.
const fastLoopBand = "0.05"

// banded is r with the fast loop's dead-band at fastLoopBand.
func banded(r policyRun) policyRun {
	r.extra = map[string]string{"in_flight_dead_band": fastLoopBand}
	return r
}

// configure makes r the balancer of the next run: the switch's conntrack emptied, and for a
// flowweight run its policy (and pinned weights on the switch); HAProxy is already running.
//
// The flush is for every peer: HAProxy's connections to the backends have the same addresses
// and ports as flowweight's NATed ones, and one that met the TIME_WAIT entry the other side's
// run left failed the switch's sequence check and waited out SYN retransmits (set 2 of
// docs/results/warmup.md: 17,067 refused in one run, 305 of its steady requests timed out).
func configure(s *scenario.Scenario, r policyRun) error {
	if _, err := s.OVS.Appctl("dpctl/flush-conntrack"); err != nil {
		return fmt.Errorf("flush the switch's conntrack: %w", err)
	}
	if r.hap != nil {
		return nil
	}
	caps := r.caps
	if caps == nil {
		caps = make([]float64, len(s.Backends))
		for i := range caps {
			caps[i] = 1
		}
	}
	s.Opts.ServiceKeys = r.service // read by the Reload in setPolicy, on this goroutine
	if err := setPolicy(s, r.policy, r.extra, caps); err != nil {
		return err
	}
	v, err := s.Service()
	if err != nil {
		return err
	}
	if v.Policy != r.policy {
		return fmt.Errorf("the controller runs policy %q after the reload, not %q", v.Policy, r.policy)
	}
	if r.want != nil {
		if _, err := waitShares(s, r.want, 0.01, 30*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// poisson is the open-loop load of one run through r's balancer.
func poisson(r policyRun, seed int64, phases ...scenario.Phase) scenario.LoadOptions {
	var d time.Duration
	n := 100
	for _, p := range phases {
		d += p.Duration
		n += int(1.5 * p.Rate * p.Duration.Seconds())
	}
	lo := scenario.LoadOptions{Arrivals: scenario.Poisson, Phases: phases, Duration: d, MaxRequests: n,
		Timeout: 5 * time.Second, MaxInFlight: 1024, Seed: seed, SourceAddrs: sourceAddrs}
	if r.hap != nil {
		lo.Target = r.hap.listen
	}
	return lo
}

// settle runs r's settling load at rate (seeded apart from the measured run's).
func settle(s *scenario.Scenario, r policyRun, rate float64, seed int64) error {
	d := r.settle
	if d == 0 {
		d = settlePinned
	}
	_, err := s.Load(context.Background(), poisson(r, seed+1_000_000, scenario.Phase{Rate: rate, Duration: d}))
	return err
}

// balancerPIDs are the processes that do r's balancing besides the switch: HAProxy, or
// flowweight's controller and probes.
func balancerPIDs(s *scenario.Scenario, r policyRun) []int {
	if r.hap != nil {
		return []int{r.hap.p.PID}
	}
	pids := []int{s.ControllerPID()}
	for _, be := range s.Backends {
		pids = append(pids, be.ProbePID())
	}
	return pids
}

// measureLoad runs lo and measures the balancer's and the switch's CPU over it.
func measureLoad(s *scenario.Scenario, r policyRun, lo scenario.LoadOptions) (scenario.LoadResult, cpuUse, cpuUse, error) {
	mb, err := startCPU(balancerPIDs(s, r)...)
	if err != nil {
		return scenario.LoadResult{}, cpuUse{}, cpuUse{}, fmt.Errorf("balancer CPU: %w", err)
	}
	mo, err := startCPU(s.OVS.PID())
	if err != nil {
		return scenario.LoadResult{}, cpuUse{}, cpuUse{}, fmt.Errorf("ovs-vswitchd CPU: %w", err)
	}
	var rates []string
	for _, ph := range lo.Phases {
		rates = append(rates, fmt.Sprintf("%.0f", ph.Rate))
	}
	if len(rates) == 0 {
		rates = append(rates, fmt.Sprintf("%.0f", lo.Rate))
	}
	tr, err := startTrace(s, r, strings.Join(rates, "-"))
	if err != nil {
		return scenario.LoadResult{}, cpuUse{}, cpuUse{}, err
	}
	res, err := s.Load(context.Background(), lo)
	tr.end()
	if err != nil {
		return res, cpuUse{}, cpuUse{}, err
	}
	bal, err := mb.stop()
	if err != nil {
		return res, cpuUse{}, cpuUse{}, fmt.Errorf("balancer CPU: %w", err)
	}
	ovs, err := mo.stop()
	if err != nil {
		return res, cpuUse{}, cpuUse{}, fmt.Errorf("ovs-vswitchd CPU: %w", err)
	}
	return res, bal, ovs, nil
}

// seedOf gives every (level, repetition) its own arrivals, the same for every peer.
func seedOf(level float64, rep int) int64 { return int64(level*1000)*100 + int64(rep) + 1 }

// peers compares flowweight with HAProxy and the fixed split at each level (-levels, default
// 0.4, 0.8, 0.95 of the measured capacity), each level's runs repeated and rotated.
func (b *bench) peers() error {
	pl, stop, err := b.setupPeers()
	if err != nil {
		return err
	}
	defer stop()
	pl.header("Peers: flowweight against HAProxy and the fixed split, open-loop Poisson load")
	s := pl.s
	runs := b.selected(pl.peerRuns())
	levels := b.levelsOr(0.4, 0.8, 0.95)
	results, err := peerLoop(s, pl.capacity, levels, runs, b.repeatOr(3), b.measure)
	if err != nil {
		return err
	}
	printPeerMedians(results, levels, runs)
	printPeerRatios(results, levels)
	return nil
}

// peerLoop measures runs at each level, reps times, each repetition in an order rotated by
// one, and prints a row per run.
func peerLoop(s *scenario.Scenario, capacity float64, levels []float64, runs []policyRun, reps int, measure time.Duration) ([]runResult, error) {
	ns := names(s)
	fmt.Println("| offered load | peer | requests ok | failed (by kind) | p50 | p99 of answers | p99 of all | max | share of answers | balancer CPU (cores) | ovs-vswitchd CPU (cores) | generator's max lag |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	var results []runResult
	// An unmeasured pass of the first peer at the first level: the first measured run after
	// the setup (calibration, saturation, HAProxy's start) lost requests to timeouts for
	// whichever peer went first (HAProxy unweighted: 178, 421 and 316 of about 6,800 in
	// three setups), an order effect, not the peer's.
	if len(runs) > 0 && len(levels) > 0 {
		if err := configure(s, runs[0]); err != nil {
			return nil, fmt.Errorf("warm-up %s: %w", runs[0].label, err)
		}
		if _, err := s.Load(context.Background(), poisson(runs[0], seedOf(levels[0], -1), scenario.Phase{Rate: levels[0] * capacity, Duration: measure})); err != nil {
			return nil, fmt.Errorf("warm-up %s: %w", runs[0].label, err)
		}
	}
	for _, lvl := range levels {
		rate := lvl * capacity
		for rep := range reps {
			for j := range runs {
				r := runs[(j+rep)%len(runs)]
				if err := configure(s, r); err != nil {
					return nil, fmt.Errorf("%.0f%% %s: %w", 100*lvl, r.label, err)
				}
				seed := seedOf(lvl, rep)
				if err := settle(s, r, rate, seed); err != nil {
					return nil, fmt.Errorf("%.0f%% %s: settle: %w", 100*lvl, r.label, err)
				}
				res, bal, ovs, err := measureLoad(s, r, poisson(r, seed, scenario.Phase{Rate: rate, Duration: measure}))
				if err != nil {
					return nil, fmt.Errorf("%.0f%% %s: %w", 100*lvl, r.label, err)
				}
				results = append(results, runResult{level: lvl, rep: rep, run: r, res: res, bal: bal, ovs: ovs})
				fmt.Printf("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", levelCell(lvl, rate, rep, reps), r.label,
					res.OK, failedCell(res), ms(res.P50), ms(res.P99), allCell(res), ms(res.Max), shareCell(res, ns), bal, ovs, ms(res.MaxLag))
			}
		}
	}
	fmt.Println()
	return results, nil
}

// printPeerMedians lists, per level and peer, the median run (by p99 of all) with every run.
func printPeerMedians(results []runResult, levels []float64, runs []policyRun) {
	fmt.Println("| offered load | peer | p99 of all: median (every run) | p50 of the median run | failures of the median run | balancer CPU, median (cores) |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, lvl := range levels {
		for _, r := range runs {
			m, ok := find(results, lvl, r.label)
			if !ok {
				continue
			}
			var cpus []float64
			for _, x := range m.reps {
				cpus = append(cpus, x.bal.cores())
			}
			fmt.Printf("| %.0f%% | %s | %s | %s | %s | %.3f |\n", 100*lvl, r.label, p99Cell(m), ms(m.res.P50), failedCell(m.res), medianOf(cpus))
		}
	}
	fmt.Println()
}

// peerTargets are issue 27's targets for flowweight's default p99 at a load: at most
// haproxy times HAProxy weighted leastconn's and at most fixed times the fixed split's, or,
// with better set, at most better times the better of the two. 0: no target there.
func peerTargets(lvl float64) (haproxy, fixed, better float64) {
	switch {
	case lvl >= 0.75 && lvl <= 0.85:
		return 1.5, 1.0, 0
	case lvl >= 0.35 && lvl <= 0.45:
		return 0, 0, 1.2
	}
	return 0, 0, 0
}

// printPeerRatios prints what the targets need: flowweight's default p99 over HAProxy
// weighted leastconn's, over the fixed split's, and over the better of the two, at each
// level, each judged against its target where the level has one (peerTargets).
func printPeerRatios(results []runResult, levels []float64) {
	fmt.Println("| offered load | flowweight default p99 | HAProxy weighted leastconn p99 | fixed split p99 | flowweight / HAProxy weighted | flowweight / fixed split | flowweight / the better of the two |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, lvl := range levels {
		f, okF := find(results, lvl, labelFWDefault)
		h, okH := find(results, lvl, labelHAWeighted)
		x, okX := find(results, lvl, labelFixed)
		cell := func(r runResult, ok bool) string {
			if !ok {
				return "not measured"
			}
			return p99Only(r.res)
		}
		th, tx, tb := peerTargets(lvl)
		ratio := func(den runResult, ok bool, target float64) string {
			if !ok || !okF {
				return "–"
			}
			if target == 0 {
				return strings.Replace(ratioCell(f.res, den.res, math.Inf(1)), "(met)", "(no target)", 1)
			}
			return ratioCell(f.res, den.res, target) + fmt.Sprintf(" (target ≤ %.1f)", target)
		}
		better, okB := h, okH
		if okX && (!okH || x.res.P99All < h.res.P99All) {
			better, okB = x, true
		}
		fmt.Printf("| %.0f%% | %s | %s | %s | %s | %s | %s |\n", 100*lvl, cell(f, okF), cell(h, okH), cell(x, okX),
			ratio(h, okH, th), ratio(x, okX, tx), ratio(better, okB, tb))
	}
	fmt.Println()
}

// medianOf is the median of xs (the lower middle for an even count); 0 for none.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func levelCell(lvl, rate float64, rep, reps int) string {
	c := fmt.Sprintf("%.0f%% (%.0f req/s)", 100*lvl, rate)
	if reps > 1 {
		c += fmt.Sprintf(" #%d", rep+1)
	}
	return c
}

func failedCell(res scenario.LoadResult) string {
	if res.Errors == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", res.Errors, res.ErrSummary())
}

func allCell(res scenario.LoadResult) string {
	if res.P99Failed {
		return "failed"
	}
	return ms(res.P99All)
}

// p99Only is a run's p99 of all with its failures, without the repetitions.
func p99Only(res scenario.LoadResult) string {
	out := allCell(res)
	if res.Errors > 0 {
		out += fmt.Sprintf(" (%d of %d failed)", res.Errors, res.Errors+res.OK)
	}
	return out
}

func shareCell(res scenario.LoadResult, ns []string) string {
	share := make([]float64, len(ns))
	for i, n := range ns {
		share[i] = float64(res.PerBackend[n]) / float64(max(res.OK, 1))
	}
	return fmtShares(share)
}

func haproxyVersion() string {
	out, err := execOutput(haproxyBin, "-v")
	if err != nil {
		return "(version unknown)"
	}
	f := strings.Fields(out)
	if len(f) >= 3 {
		return f[2]
	}
	return "(version unknown)"
}
