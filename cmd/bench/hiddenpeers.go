package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"flowweight/e2e/scenario"
)

// hiddenPeers is the hidden run (equal quotas declared equal, a neighbour using about half of
// be1's and be2's quota) against the peers: flowweight's default, HAProxy weighted leastconn
// (weights = the declared capacities, equal) and the static splits of staticSearch, under the
// open-loop load; it ends with flowweight's p99 over HAProxy's and over the best split's.
func (b *bench) hiddenPeers() error {
	t0 := time.Now()
	quotas := []float64{0.5, 0.5, 0.5}
	work := b.work
	if work == 0 {
		work = 20000
	}
	// The probes send in-flight reports for the banded fast loop's run, as in the peers run.
	s, stop, err := b.start(scenario.Options{Quotas: quotas, NoServiceCPU: b.noServiceCPU, Work: work,
		InFlight:  fastLoopPeriod,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	if err != nil {
		return err
	}
	defer stop()
	if err := b.waitServiceCPU(s); err != nil {
		return err
	}
	if _, err := waitShares(s, quotas, 0.01, 30*time.Second); err != nil {
		return err
	}
	calibration := fmt.Sprintf("-work %d given", work)
	if b.work == 0 {
		// Before the neighbours start: the cost of a request, not of the CPU they take.
		if work, calibration, err = calibrate(s, quotas, b.requestCPU); err != nil {
			return err
		}
	}
	levels := b.levelsOr(0.5, 0.8)
	reps := b.repeatOr(3)
	runsPerLevel := 3 + len(staticSearch)
	burnFor := 5*time.Minute + time.Duration(len(levels)*reps*runsPerLevel)*(settleFeedback+b.measure+10*time.Second)
	var burners []*neighbour
	for _, be := range s.Backends[:2] {
		n, err := startNeighbour(be, neighbourDuty*be.Quota, burnFor)
		if err != nil {
			return err
		}
		defer n.p.Stop()
		burners = append(burners, n)
	}
	if err := setPolicy(s, "headroom", nil, []float64{1, 1, 1}); err != nil {
		return err
	}
	if _, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 8, Duration: 10 * time.Second, MaxRequests: 100000}); err != nil {
		return err
	}
	capacity, sat, err := saturate(s)
	if err != nil {
		return err
	}
	weights, err := haproxyWeights([]float64{1, 1, 1})
	if err != nil {
		return err
	}
	hap, err := startHAProxy(s, s.Lab.Dir, labelHAWeighted, portHAWeighted, weights)
	if err != nil {
		return err
	}
	defer func() {
		if err := hap.Stop(); err != nil {
			slog.Error("haproxy stop", "err", err)
		}
	}()
	fmt.Printf("## Hidden capacity against the peers: quotas 0.5/0.5/0.5 core declared equal, a neighbour using about half of be1's and be2's quota\n\n")
	fmt.Printf("Backend work: %s; `backendd -work %d`. Neighbours: `backendd -burn-cores %.2f -burn-period 100ms` in be1's and be2's cgroups. ", calibration, work, neighbourDuty*quotas[0])
	fmt.Printf("Pool capacity under headroom (16 clients, no rate limit, 10 s): %.1f req/s (%s). ", capacity, sat)
	fmt.Printf("Load: open-loop Poisson, from %s (see the peers run). HAProxy %s leastconn, `weight` %v (the declared capacities, equal), `%s`.\n\n", sourcesText(), haproxyVersion(), weights, haproxyCheck)
	runs := []policyRun{
		fastLoopOff(feedback(labelFWDefault, "headroom")),
		{label: labelHAWeighted, hap: hap, settle: settleHAProxy},
		banded(feedback(fastLabel(labelFWBanded), "headroom")),
		reactive(feedback(labelFWReactive, "headroom")),
	}
	for _, c := range staticSearch {
		runs = append(runs, policyRun{label: "static " + fmtShares(c), policy: "static",
			extra: map[string]string{"capacity": cpuOnly}, caps: c, want: c, search: true})
	}
	runs = b.selected(runs)
	results, err := peerLoop(s, capacity, levels, runs, reps, b.measure)
	if err != nil {
		return err
	}
	if err := running(burners); err != nil {
		return err
	}
	printPeerMedians(results, levels, runs)
	fmt.Println("| offered load | flowweight default p99 | HAProxy weighted leastconn p99 | best static split (of those measured) | its p99 | flowweight / HAProxy weighted (target ≤ 1.0) | flowweight / best static (target ≤ 1.0) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, lvl := range levels {
		f, okF := find(results, lvl, labelFWDefault)
		h, okH := find(results, lvl, labelHAWeighted)
		best, n, okB := bestSearched(results, lvl)
		if !okF {
			fmt.Printf("| %.0f%% | not measured | | | | | |\n", 100*lvl)
			continue
		}
		hc, hr, bl, bc, br := "not measured", "–", "none measured", "–", "–"
		if okH {
			hc, hr = p99Only(h.res), ratioCell(f.res, h.res, 1.0)
		}
		if okB {
			bl, bc, br = fmt.Sprintf("%s (best of %d)", best.run.label, n), p99Only(best.res), ratioCell(f.res, best.res, 1.0)
		}
		fmt.Printf("| %.0f%% | %s | %s | %s | %s | %s | %s |\n", 100*lvl, p99Only(f.res), hc, bl, bc, hr, br)
	}
	fmt.Println()
	for _, n := range burners {
		fmt.Printf("Neighbour in %s: %s.\n", n.backend, n.used())
	}
	fmt.Printf("\nHidden-peers run: %v in all.\n\n", time.Since(t0).Round(time.Second))
	return nil
}
