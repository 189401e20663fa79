package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"flowweight/e2e/lab"
	"flowweight/e2e/scenario"
	"flowweight/probe/sample"
)

// cpuOnly makes declared capacity the CPU count alone (the cgroup quota the probe reports),
// so policy static weighs the backends exactly by their quotas: the oracle.
const cpuOnly = "{ cpu = 1.0, mem = 0.0 }"

// Settling before each measured run: pinned weights are on the switch before it starts, a
// feedback policy (dynamic, headroom) starts from the previous run's weights and learns here.
const (
	settlePinned   = 8 * time.Second
	settleFeedback = 16 * time.Second
)

// neighbourDuty is the part of a backend's quota the hidden run's neighbours use.
const neighbourDuty = 0.5

// staticSearch are the splits the hidden run tries with policy static, be3 (the backend
// without a neighbour) last: from equal to most of the load on be3.
var staticSearch = [][]float64{
	{1.0 / 3, 1.0 / 3, 1.0 / 3},
	{0.3, 0.3, 0.4},
	{0.25, 0.25, 0.5},
	{0.2, 0.2, 0.6},
	{0.15, 0.15, 0.7},
}

type policyRun struct {
	label, policy string
	extra         map[string]string
	// caps are the capacity factors set for the run; nil: 1 for every backend.
	caps []float64
	// want are the shares the switch must show before the run; nil: feedback decides.
	want []float64
	// settle is the load before the measured run; 0: settlePinned.
	settle time.Duration
	// search marks a run of a search: it is skipped when it would overrun the time budget.
	search bool
	// hap, when set, is an HAProxy peer: the run's load goes to it, not to the VIP.
	hap *haproxyPeer
	// service are the service's extra keys for the run (scenario.Options.ServiceKeys), e.g.
	// dispatch = "reactive"; nil: none, so every other run has the default dispatch.
	service map[string]string
}

// runResult is one row of compare: a measured run, or a search run skipped for time.
type runResult struct {
	level   float64
	rep     int // which repetition of the level (0 unless -repeat)
	run     policyRun
	res     scenario.LoadResult
	skipped bool
	// fallback is the API's policy_fallback at the start or the end of the measured run
	// (headroom ran as 1/AL), empty when it did not fall back.
	fallback string
	// reps are, in a median made by find, every repetition it is the median of.
	reps []runResult
	// bal and ovs are the CPU of the balancer (HAProxy, or the controller and the probes)
	// and of ovs-vswitchd over the measured run, in the peer experiments.
	bal, ovs cpuUse
}

func feedback(label, policy string) policyRun {
	return policyRun{label: label, policy: policy, settle: settleFeedback}
}

// headroomRun is the default policy; its label says whether the probes report service_cpu.
func (b *bench) headroomRun() policyRun {
	if b.noServiceCPU {
		return feedback("headroom (default, probes without [service])", "headroom")
	}
	return feedback("headroom (default, service CPU)", "headroom")
}

// variantRuns are the extra headroom runs: one for each -plan-margins value and one for each
// -pressures value. Their labels do not start with the default run's, which the summaries
// judge.
func (b *bench) variantRuns() []policyRun {
	var out []policyRun
	for _, m := range b.margins {
		r := feedback("headroom, plan_margin "+m, "headroom")
		r.extra = map[string]string{"plan_margin": m}
		out = append(out, r)
	}
	for _, p := range b.pressures {
		r := feedback("headroom, pressure "+p, "headroom")
		r.extra = map[string]string{"pressure": p}
		out = append(out, r)
	}
	return out
}

// quality measures the lab's pool (quotas 0.25/0.5/1 core) at two offered loads under equal,
// oracle, dynamic and headroom weights.
func (b *bench) quality() error {
	quotas := []float64{0.25, 0.5, 1.0}
	s, stop, err := b.start(scenario.Options{Quotas: quotas, NoServiceCPU: b.noServiceCPU,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	if err != nil {
		return err
	}
	defer stop()
	if err := b.waitServiceCPU(s); err != nil {
		return err
	}
	if _, err := waitShares(s, quotas, 0.01, 30*time.Second); err != nil {
		return fmt.Errorf("oracle weights: %w", err)
	}
	capacity, sat, err := saturate(s)
	if err != nil {
		return err
	}
	fmt.Printf("## Balancing quality, backends with quotas 0.25/0.5/1.0 core, a new connection per request\n\n")
	fmt.Printf("Pool capacity measured under oracle weights (16 clients, no rate limit, 10 s): %.1f req/s (%s).\n\n", capacity, sat)
	oracle := policyRun{label: "oracle (static, C = quota)", policy: "static", extra: map[string]string{"capacity": cpuOnly}, want: quotas}
	runs := []policyRun{
		{label: "equal", policy: "equal", want: []float64{1, 1, 1}},
		oracle,
		feedback("dynamic (1/AL)", "dynamic"),
		b.headroomRun(),
	}
	runs = append(runs, b.variantRuns()...)
	levels := b.levelsOr(0.4, 0.8)
	results, err := b.compare(s, capacity, levels, runs, time.Time{})
	if err != nil {
		return err
	}
	fmt.Println("| offered load | headroom p99 | oracle p99 | headroom / oracle (target ≤ 1.2) |")
	fmt.Println("|---|---|---|---|")
	for _, lvl := range levels {
		h, okH := find(results, lvl, b.headroomRun().label)
		o, okO := find(results, lvl, oracle.label)
		if !okH || !okO {
			return fmt.Errorf("%.0f%%: a headroom or oracle row is missing", 100*lvl)
		}
		fmt.Printf("| %.0f%% | %s | %s | %s |\n", 100*lvl, p99Cell(h), p99Cell(o), ratioCell(h.res, o.res, 1.2))
	}
	fmt.Println()
	return nil
}

// hidden gives every backend the same quota and declared capacity, then runs a neighbour
// using about half of the quota inside two backends' cgroups: only feedback, or a probe that
// tells the service's CPU from the rest, can see that they have less left for the service.
// Besides equal, dynamic and headroom it searches the static splits of staticSearch through
// the switch, so headroom is compared with the best fixed split found; the search is cut
// short (and says so) where it would overrun budget.
func (b *bench) hidden() error {
	t0 := time.Now()
	quotas := []float64{0.5, 0.5, 0.5}
	s, stop, err := b.start(scenario.Options{Quotas: quotas, NoServiceCPU: b.noServiceCPU})
	if err != nil {
		return err
	}
	defer stop()
	if err := b.waitServiceCPU(s); err != nil {
		return err
	}
	// The neighbours outlive the run with a margin: the budget, or what the runs that are never
	// skipped take when it is shorter. They are stopped by PID at the end (and by the lab's
	// Close on any error).
	levels := b.levelsOr(0.5, 0.8)
	required := 2*time.Minute + time.Duration(len(levels)*max(b.repeat, 1)*3)*(settleFeedback+b.measure+10*time.Second)
	burnFor := max(b.hiddenBudget, required) + 3*time.Minute
	var burners []*neighbour
	for _, be := range s.Backends[:2] {
		n, err := startNeighbour(be, neighbourDuty*be.Quota, burnFor)
		if err != nil {
			return err
		}
		defer n.p.Stop()
		burners = append(burners, n)
	}
	// Let the feedback policies see the neighbours under some load before measuring the pool.
	if _, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 8, Duration: 10 * time.Second, MaxRequests: 100000}); err != nil {
		return err
	}
	if err := running(burners); err != nil {
		return err
	}
	v, err := s.Service()
	if err != nil {
		return err
	}
	capacity, sat, err := saturate(s)
	if err != nil {
		return err
	}
	fmt.Printf("## Hidden capacity: quotas 0.5/0.5/0.5 core declared equal, a neighbour using about half of be1's and be2's quota\n\n")
	fmt.Printf("Neighbours: `backendd -burn-cores %.2f -burn-period 100ms` in be1's and be2's cgroups (a duty-cycled burner: in each 100 ms it spins until it has had %.0f ms of CPU, then sleeps).",
		neighbourDuty*quotas[0], 100*neighbourDuty*quotas[0])
	if b.noServiceCPU {
		fmt.Printf(" The probes have no `[service]` table (-no-service-cpu): headroom falls back to 1/AL.")
	}
	fmt.Printf("\n\n")
	fmt.Println("| backend | quota | CPU of the cgroup (cores) | service_cpu, backendd's own (cores) |")
	fmt.Println("|---|---|---|---|")
	for _, bv := range v.Backends {
		own := "absent"
		if bv.ServiceCPU != nil {
			own = fmt.Sprintf("%.3f", *bv.ServiceCPU*bv.CPUCount)
		}
		fmt.Printf("| %s | %.2f | %.3f | %s |\n", bv.Name, bv.CPUCount, bv.CPU*bv.CPUCount, own)
	}
	fmt.Printf("\n(The API's smoothed values after 10 s of load from 8 unpaced clients under %s weights", v.Policy)
	if v.PolicyFallback != "" {
		fmt.Printf(", which ran as 1/AL: %s", v.PolicyFallback)
	}
	fmt.Printf(".)\n\n")
	fmt.Printf("Pool capacity measured under %s weights (16 clients, no rate limit, 10 s): %.1f req/s (%s).\n\n", v.Policy, capacity, sat)
	runs := []policyRun{
		{label: "equal", policy: "equal", want: []float64{1, 1, 1}},
		feedback("dynamic (1/AL)", "dynamic"),
		b.headroomRun(),
	}
	runs = append(runs, b.variantRuns()...)
	for _, c := range staticSearch {
		runs = append(runs, policyRun{label: "static " + fmtShares(c), policy: "static",
			extra: map[string]string{"capacity": cpuOnly}, caps: c, want: c, search: true})
	}
	// Leave about half a minute for the summary, stopping the neighbours and closing the lab.
	results, err := b.compare(s, capacity, levels, runs, t0.Add(b.hiddenBudget-30*time.Second))
	if err != nil {
		return err
	}
	if err := running(burners); err != nil {
		return err
	}
	fmt.Println("| offered load | headroom p99 | best static split (of those measured) | its p99 | equal p99 | headroom / best static (target ≤ 1.3) | headroom / equal (target ≤ 1.0) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, lvl := range levels {
		h, okH := find(results, lvl, b.headroomRun().label)
		e, okE := find(results, lvl, "equal")
		if !okH || !okE {
			return fmt.Errorf("%.0f%%: a headroom or equal row is missing", 100*lvl)
		}
		best, n, ok := bestSearched(results, lvl)
		if !ok {
			fmt.Printf("| %.0f%% | %s | none measured (time budget) | – | %s | – | %s |\n", 100*lvl, p99Cell(h), p99Cell(e), ratioCell(h.res, e.res, 1.0))
			continue
		}
		fmt.Printf("| %.0f%% | %s | %s (best of %d) | %s | %s | %s | %s |\n", 100*lvl, p99Cell(h), best.run.label, n, p99Cell(best),
			p99Cell(e), ratioCell(h.res, best.res, 1.3), ratioCell(h.res, e.res, 1.0))
	}
	fmt.Println()
	for _, n := range burners {
		fmt.Printf("Neighbour in %s: %s.\n", n.backend, n.used())
	}
	fmt.Printf("\nHidden run: %v in all.\n\n", time.Since(t0).Round(time.Second))
	return nil
}

// waitServiceCPU checks, unless the probes were started without [service], that every
// backend's report carries the service's own CPU, which the headroom rows rely on.
func (b *bench) waitServiceCPU(s *scenario.Scenario) error {
	if b.noServiceCPU {
		return nil
	}
	return s.WaitServiceCPU(15 * time.Second)
}

// neighbour is a burner started in a backend's cgroup.
type neighbour struct {
	backend string
	p       *lab.Proc
	pid     int
	start   time.Time
}

func startNeighbour(be *scenario.Backend, cores float64, d time.Duration) (*neighbour, error) {
	p, err := be.StartBurner(cores, d)
	if err != nil {
		return nil, err
	}
	slog.Info("neighbour started", "backend", be.Name, "pid", p.PID, "cores", cores, "for", d)
	return &neighbour{backend: be.Name, p: p, pid: p.PID, start: time.Now()}, nil
}

// running fails when a neighbour has exited: the figures would not be of the hidden setup.
func running(ns []*neighbour) error {
	for _, n := range ns {
		if n.p.Exited() {
			return fmt.Errorf("the neighbour in %s has exited (%v; log %s)\n%s", n.backend, n.p.Wait(), n.p.LogPath, lab.Tail(n.p.LogPath, 5))
		}
	}
	return nil
}

// used reads the neighbour's CPU time from /proc/PID/stat while it still runs.
func (n *neighbour) used() string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(n.pid), "stat"))
	if err != nil {
		return "CPU not readable: " + err.Error()
	}
	st, err := sample.ParseProcStat(data)
	if err != nil {
		return "CPU not readable: " + err.Error()
	}
	cpu := time.Duration(st.CPU) * (time.Second / sample.UserHZ)
	el := time.Since(n.start)
	return fmt.Sprintf("%v of CPU in %v, %.3f cores", cpu.Round(10*time.Millisecond), el.Round(time.Second), cpu.Seconds()/el.Seconds())
}

func saturate(s *scenario.Scenario) (float64, string, error) {
	res, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 16, Duration: 10 * time.Second, MaxRequests: 100000})
	if err != nil {
		return 0, "", err
	}
	if res.OK == 0 {
		return 0, "", fmt.Errorf("saturation run: no successful request: %v", res.ErrSamples)
	}
	return float64(res.OK) / res.Elapsed.Seconds(), res.String(), nil
}

// compare runs each policy at each offered load: set the policy and capacity factors,
// confirm the controller runs that policy and that pinned weights reached the switch, settle
// under the same load, then the measured run. With a deadline, search runs that would end
// after their level's part of it (the time up to the deadline split evenly between levels,
// each run estimated as the longest so far) are skipped and reported so.
func (b *bench) compare(s *scenario.Scenario, capacity float64, levels []float64, runs []policyRun, deadline time.Time) ([]runResult, error) {
	ns := names(s)
	start := time.Now()
	var longest time.Duration
	var out []runResult
	fmt.Println("| offered load | policy | weights before → after (dump-groups) | requests ok | failed (by kind) | p50 | p99 of answers | p99 of all | max | share of answers |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	runs = b.selected(runs)
	for i, lvl := range levels {
		rate := lvl * capacity
		// Each repetition starts one run later, so no policy always runs first or last: the
		// lab's state (the client's port reuse, the switch's conntrack) drifts over a level.
		for rep := range max(b.repeat, 1) {
			for j := range runs {
				r := runs[(j+rep)%len(runs)]
				if r.search && !deadline.IsZero() && time.Now().Add(longest).After(levelDeadline(start, deadline, i, len(levels))) {
					fmt.Printf("| %s | %s | skipped: it would overrun the time budget | | | | | | | |\n", b.levelCell(lvl, rate, rep), r.label)
					out = append(out, runResult{level: lvl, rep: rep, run: r, skipped: true})
					continue
				}
				t0 := time.Now()
				res, err := b.measureRun(s, r, rate, lvl, rep, ns)
				if err != nil {
					return nil, fmt.Errorf("%.0f%% %s: %w", 100*lvl, r.label, err)
				}
				longest = max(longest, time.Since(t0))
				out = append(out, res)
			}
		}
	}
	fmt.Println()
	return out, nil
}

// levelCell is the first column of a row: the offered load, and the repetition when repeated.
func (b *bench) levelCell(lvl, rate float64, rep int) string {
	c := fmt.Sprintf("%.0f%% (%.0f req/s)", 100*lvl, rate)
	if b.repeat > 1 {
		c += fmt.Sprintf(" #%d", rep+1)
	}
	return c
}

// selected is runs without those -policies leaves out.
func (b *bench) selected(runs []policyRun) []policyRun {
	if len(b.policies) == 0 {
		return runs
	}
	var out []policyRun
	for _, r := range runs {
		for _, p := range b.policies {
			if strings.HasPrefix(r.label, p) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

func (b *bench) measureRun(s *scenario.Scenario, r policyRun, rate, lvl float64, rep int, ns []string) (runResult, error) {
	caps := r.caps
	if caps == nil {
		caps = make([]float64, len(ns))
		for i := range caps {
			caps[i] = 1
		}
	}
	s.Opts.ServiceKeys = r.service // read by the Reload in setPolicy, on this goroutine
	if err := setPolicy(s, r.policy, r.extra, caps); err != nil {
		return runResult{}, err
	}
	v, err := s.Service()
	if err != nil {
		return runResult{}, err
	}
	if v.Policy != r.policy {
		return runResult{}, fmt.Errorf("the controller runs policy %q after the reload, not %q", v.Policy, r.policy)
	}
	if r.want != nil {
		if _, err := waitShares(s, r.want, 0.01, 30*time.Second); err != nil {
			return runResult{}, err
		}
	}
	settle := r.settle
	if settle == 0 {
		settle = settlePinned
	}
	// Enough clients that the offered rate is kept while responses slow down: with 64, a
	// policy whose latency grew got fewer requests (the ticker's ticks are dropped while every
	// client waits), and its p99 came from a lower load than the others' (2026-12-01).
	lo := scenario.LoadOptions{Concurrency: max(64, int(rate/2)), Rate: rate, Timeout: 5 * time.Second}
	lo.Duration, lo.MaxRequests = settle, int(rate*settle.Seconds())+1
	if _, err := s.Load(context.Background(), lo); err != nil {
		return runResult{}, err
	}
	before, err := s.GroupWeights()
	if err != nil {
		return runResult{}, err
	}
	vb, err := s.Service()
	if err != nil {
		return runResult{}, err
	}
	lo.Duration, lo.MaxRequests = b.measure, int(rate*b.measure.Seconds())+1
	res, err := s.Load(context.Background(), lo)
	if err != nil {
		return runResult{}, err
	}
	after, err := s.GroupWeights()
	if err != nil {
		return runResult{}, err
	}
	va, err := s.Service()
	if err != nil {
		return runResult{}, err
	}
	out := runResult{level: lvl, rep: rep, run: r, res: res, fallback: firstNonEmpty(vb.PolicyFallback, va.PolicyFallback)}
	label := r.label
	if out.fallback != "" {
		label += " — fell back to 1/AL: " + out.fallback
	}
	share := make([]float64, len(ns))
	for i, n := range ns {
		share[i] = float64(res.PerBackend[n]) / float64(max(res.OK, 1))
	}
	failed := strconv.Itoa(res.Errors)
	if res.Errors > 0 {
		failed += " (" + res.ErrSummary() + ")"
	}
	all := ms(res.P99All)
	if res.P99Failed {
		all = "failed"
	}
	fmt.Printf("| %s | %s | %s → %s | %d | %s | %s | %s | %s | %s | %s |\n", b.levelCell(lvl, rate, rep), label,
		fmtWeights(before, ns), fmtWeights(after, ns), res.OK, failed, ms(res.P50), ms(res.P99), all, ms(res.Max), fmtShares(share))
	return out, nil
}

// levelDeadline is the end of level i's part of the time from start to deadline.
func levelDeadline(start, deadline time.Time, i, n int) time.Time {
	return start.Add(deadline.Sub(start) * time.Duration(i+1) / time.Duration(n))
}

// find returns the median of the measured runs at level whose label starts with prefix
// (over the repetitions; the worse of the middle two for an even count), and how many there
// were.
func find(results []runResult, level float64, prefix string) (runResult, bool) {
	var rs []runResult
	for _, r := range results {
		if r.level == level && !r.skipped && strings.HasPrefix(r.run.label, prefix) {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return runResult{}, false
	}
	return median(rs), true
}

// median is the median of rs by better, with reps set to all of them.
func median(rs []runResult) runResult {
	s := slices.Clone(rs)
	slices.SortStableFunc(s, func(a, b runResult) int {
		switch {
		case better(a.res, b.res):
			return -1
		case better(b.res, a.res):
			return 1
		}
		return 0
	})
	m := s[len(s)/2]
	m.reps = rs
	return m
}

// bestSearched returns the search split at level with the lowest median p99 over all
// requests (a p99 that is a failure ranking after every latency), and how many splits were
// measured.
func bestSearched(results []runResult, level float64) (best runResult, measured int, ok bool) {
	var labels []string
	for _, r := range results {
		if r.level == level && r.run.search && !r.skipped && !slices.Contains(labels, r.run.label) {
			labels = append(labels, r.run.label)
		}
	}
	for _, l := range labels {
		m, _ := find(results, level, l)
		measured++
		if !ok || better(m.res, best.res) {
			best, ok = m, true
		}
	}
	return best, measured, ok
}

// better ranks by the p99 over all requests (failures ranked last), then by fewer failures.
func better(a, b scenario.LoadResult) bool {
	if a.P99Failed != b.P99Failed {
		return !a.P99Failed
	}
	if a.P99Failed || a.P99All == b.P99All {
		return a.Errors < b.Errors
	}
	return a.P99All < b.P99All
}

// p99Cell is a run's p99 over every request, a failed one ranking above every success, with
// its failures when there were any and a note when headroom fell back to 1/AL.
func p99Cell(r runResult) string {
	out := ms(r.res.P99All)
	if r.res.P99Failed {
		out = "failed"
	}
	if r.res.Errors > 0 {
		out += fmt.Sprintf(" (%d of %d failed)", r.res.Errors, r.res.Errors+r.res.OK)
	}
	if r.fallback != "" {
		out += " (ran as 1/AL)"
	}
	if len(r.reps) > 1 {
		var each []string
		for _, x := range r.reps {
			if x.res.P99Failed {
				each = append(each, "failed")
			} else {
				each = append(each, ms(x.res.P99All))
			}
		}
		out += fmt.Sprintf("; median of %d: %s", len(r.reps), strings.Join(each, ", "))
	}
	return out
}

// ratioCell is num's p99 over den's, both over all requests, with the verdict against target
// (at most target is met). A p99 that is a failed request is worse than any latency.
func ratioCell(num, den scenario.LoadResult, target float64) string {
	switch {
	case num.P99Failed && den.P99Failed:
		return "– (both p99s are failures)"
	case num.P99Failed:
		return "∞ (missed: over 1 % failed)"
	case den.P99Failed:
		return "0 (met: the reference's p99 is a failure)"
	case den.P99All <= 0:
		return "– (no latency measured)"
	}
	q := float64(num.P99All) / float64(den.P99All)
	verdict := "met"
	if q > target {
		verdict = "missed"
	}
	return fmt.Sprintf("%.2f (%s)", q, verdict)
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}
