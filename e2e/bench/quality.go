package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"flowweight/e2e/scenario"
)

// cpuOnly makes declared capacity the CPU count alone (the cgroup quota the probe reports),
// so policy static weighs the backends exactly by their quotas: the oracle.
const cpuOnly = "{ cpu = 1.0, mem = 0.0 }"

type policyRun struct {
	label, policy string
	extra         map[string]string
	want          []float64 // shares the switch must show before the run; nil: feedback decides
}

// quality measures the lab's pool (quotas 0.25/0.5/1 core) at two offered loads under equal,
// oracle and dynamic weights.
func (b *bench) quality() error {
	quotas := []float64{0.25, 0.5, 1.0}
	s, stop, err := b.start(scenario.Options{Quotas: quotas, Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	if err != nil {
		return err
	}
	defer stop()
	if _, err := waitShares(s, quotas, 0.01, 30*time.Second); err != nil {
		return fmt.Errorf("oracle weights: %w", err)
	}
	capacity, sat, err := saturate(s)
	if err != nil {
		return err
	}
	fmt.Printf("## Balancing quality, backends with quotas 0.25/0.5/1.0 core, a new connection per request\n\n")
	fmt.Printf("Pool capacity measured under oracle weights (16 clients, no rate limit, 10 s): %.1f req/s (%s).\n\n", capacity, sat)
	runs := []policyRun{
		{"equal", "equal", nil, []float64{1, 1, 1}},
		{"oracle (static, C = quota)", "static", map[string]string{"capacity": cpuOnly}, quotas},
		{"dynamic (default tuning)", "dynamic", nil, nil},
	}
	return b.compare(s, capacity, []float64{0.4, 0.8}, runs)
}

// hidden gives every backend the same quota and declared capacity, then burns CPU inside two
// backends' cgroups: only feedback can see that they have less left for the service.
func (b *bench) hidden() error {
	s, stop, err := b.start(scenario.Options{Quotas: []float64{0.5, 0.5, 0.5}})
	if err != nil {
		return err
	}
	defer stop()
	for _, be := range s.Backends[:2] {
		// A busy loop bounded in time, charged to the backend's own cgroup (its quota).
		cmd := exec.Command("timeout", "480", "sh", "-c", "while :; do :; done")
		p, err := s.Lab.Start(be.Name+"-burn", cmd, be.Cgroup)
		if err != nil {
			return err
		}
		defer p.Stop()
	}
	// Let dynamic see the burners under some load before measuring the pool.
	if _, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 8, Duration: 10 * time.Second, MaxRequests: 100000}); err != nil {
		return err
	}
	capacity, sat, err := saturate(s)
	if err != nil {
		return err
	}
	fmt.Printf("## Hidden capacity: quotas 0.5/0.5/0.5 core declared equal, a CPU burner in be1's and be2's cgroups\n\n")
	fmt.Printf("Pool capacity measured under dynamic weights (16 clients, no rate limit, 10 s): %.1f req/s (%s).\n\n", capacity, sat)
	runs := []policyRun{
		{"equal", "equal", nil, []float64{1, 1, 1}},
		{"dynamic (default tuning)", "dynamic", nil, nil},
	}
	return b.compare(s, capacity, []float64{0.5, 0.8}, runs)
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

// compare runs each policy at each offered load: set the policy, confirm its weights reached
// the switch, 8 s of the same load to settle (dynamic learns here), then the measured run.
func (b *bench) compare(s *scenario.Scenario, capacity float64, levels []float64, runs []policyRun) error {
	ns := names(s)
	fmt.Println("| offered load | policy | weights before → after (dump-groups) | requests ok | errors | p50 | p99 | max | share of answers |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, lvl := range levels {
		rate := lvl * capacity
		for _, r := range runs {
			if err := setPolicy(s, r.policy, r.extra, nil); err != nil {
				return err
			}
			if r.want != nil {
				if _, err := waitShares(s, r.want, 0.01, 30*time.Second); err != nil {
					return fmt.Errorf("%s: %w", r.label, err)
				}
			}
			lo := scenario.LoadOptions{Concurrency: 64, Rate: rate, Timeout: 5 * time.Second}
			lo.Duration, lo.MaxRequests = 8*time.Second, int(rate*8)+1
			if _, err := s.Load(context.Background(), lo); err != nil {
				return err
			}
			before, err := s.GroupWeights()
			if err != nil {
				return err
			}
			lo.Duration, lo.MaxRequests = b.measure, int(rate*b.measure.Seconds())+1
			res, err := s.Load(context.Background(), lo)
			if err != nil {
				return err
			}
			after, err := s.GroupWeights()
			if err != nil {
				return err
			}
			share := make([]float64, len(ns))
			for i, n := range ns {
				share[i] = float64(res.PerBackend[n]) / float64(max(res.OK, 1))
			}
			fmt.Printf("| %.0f%% (%.0f req/s) | %s | %s → %s | %d | %d | %s | %s | %s | %s |\n", 100*lvl, rate, r.label,
				fmtWeights(before, ns), fmtWeights(after, ns), res.OK, res.Errors, ms(res.P50), ms(res.P99), ms(res.Max), fmtShares(share))
		}
	}
	fmt.Println()
	return nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}
