package main

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"flowweight/e2e/scenario"
)

// requestCost measures the CPU one request costs a backendd (SHA-256 work plus the HTTP
// server's own share: accept, parse, answer): its CPU over a short unpaced load divided by
// the requests answered.
func requestCost(s *scenario.Scenario) (time.Duration, error) {
	var pids []int
	for _, be := range s.Backends {
		pids = append(pids, be.HTTPPID())
	}
	m, err := startCPU(pids...)
	if err != nil {
		return 0, fmt.Errorf("backendd CPU: %w", err)
	}
	res, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 8, Duration: 4 * time.Second, MaxRequests: 40000})
	if err != nil {
		return 0, err
	}
	u, err := m.stop()
	if err != nil {
		return 0, fmt.Errorf("backendd CPU: %w", err)
	}
	if res.OK < 50 {
		return 0, fmt.Errorf("cost of a request: only %d answers in 4 s (%v)", res.OK, res.ErrSamples)
	}
	return u.cpu / time.Duration(res.OK), nil
}

// nextWork is the work for a cost of target per request, from two measured points on the
// line cost = fixed + per-round × rounds (one point: proportional). Bounded to [1000,
// 10,000,000] rounds.
func nextWork(w1 int, c1 time.Duration, w2 int, c2 time.Duration, target time.Duration) int {
	var w float64
	if w2 != w1 && c2 > c1 {
		k := float64(c2-c1) / float64(w2-w1)
		a := float64(c1) - k*float64(w1)
		w = (float64(target) - a) / k
	} else {
		c, wk := c1, w1
		if w2 != 0 {
			c, wk = c2, w2
		}
		w = float64(wk) * float64(target) / float64(max(c, 1))
	}
	return int(min(max(w, 1000), 10_000_000))
}

// calibrate tunes backendd's -work so one request costs about target of CPU: a measurement
// at the current work, one at the proportional guess, then the work on the line through both,
// measured again. It leaves the backends on the final work with the fixed split's weights.
func calibrate(s *scenario.Scenario, quotas []float64, target time.Duration) (int, string, error) {
	w1 := s.Opts.Work
	c1, err := requestCost(s)
	if err != nil {
		return 0, "", err
	}
	set := func(w int) (time.Duration, error) {
		if err := s.SetWork(w); err != nil {
			return 0, err
		}
		if _, err := waitShares(s, quotas, 0.01, 30*time.Second); err != nil {
			return 0, fmt.Errorf("after -work %d: %w", w, err)
		}
		return requestCost(s)
	}
	w2 := nextWork(w1, c1, 0, 0, target)
	c2, err := set(w2)
	if err != nil {
		return 0, "", err
	}
	w3 := nextWork(w1, c1, w2, c2, target)
	c3, err := set(w3)
	if err != nil {
		return 0, "", err
	}
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return w3, fmt.Sprintf("tuned to %v of backendd CPU per request (measured %v at %d rounds, %v at %d, %v at %d, the one used)",
		target, r(c1), w1, r(c2), w2, r(c3), w3), nil
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
