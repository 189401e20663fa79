package main

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"flowweight/e2e/scenario"
)

// Shares turns per-backend weights into fractions of their sum, in the order of names.
func Shares(w map[string]uint16, names []string) []float64 {
	var sum float64
	for _, n := range names {
		sum += float64(w[n])
	}
	out := make([]float64, len(names))
	if sum == 0 {
		return out
	}
	for i, n := range names {
		out[i] = float64(w[n]) / sum
	}
	return out
}

// Normalize scales xs to sum to 1 (all zero stays zero).
func Normalize(xs []float64) []float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	out := make([]float64, len(xs))
	if sum == 0 {
		return out
	}
	for i, x := range xs {
		out[i] = x / sum
	}
	return out
}

// MaxDiff is the largest absolute difference between two share vectors of equal length.
func MaxDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

func names(s *scenario.Scenario) []string {
	var out []string
	for _, b := range s.Backends {
		out = append(out, b.Name)
	}
	return out
}

// waitShares polls until the switch's buckets (dump-groups) have the wanted shares within tol,
// equal the controller's applied weights, and no backend is warming up; it returns the
// switch's weights. This is the check that a pinned configuration really reached the switch.
func waitShares(s *scenario.Scenario, want []float64, tol float64, timeout time.Duration) (map[string]uint16, error) {
	ns := names(s)
	want = Normalize(want)
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		got, err := s.InSync()
		if err == nil {
			if d := MaxDiff(Shares(got, ns), want); d > tol {
				err = fmt.Errorf("dump-groups %s: shares differ from %v by %.3f > %.3f", fmtWeights(got, ns), fmtShares(want), d, tol)
			}
		}
		if err == nil {
			err = notWarming(s)
		}
		if err == nil {
			return got, nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("weights not reached in %v: %w", timeout, last)
}

func notWarming(s *scenario.Scenario) error {
	v, err := s.Service()
	if err != nil {
		return err
	}
	for _, b := range v.Backends {
		if b.State != "up" {
			return fmt.Errorf("backend %s is %q", b.Name, b.State)
		}
	}
	return nil
}

// waitStable polls until two reads of dump-groups 1.5 s apart are equal and in sync with
// the API, and no backend is warming; it returns the weights.
func waitStable(s *scenario.Scenario, timeout time.Duration) (map[string]uint16, error) {
	deadline := time.Now().Add(timeout)
	var prev map[string]uint16
	last := errors.New("no read")
	for time.Now().Before(deadline) {
		got, err := s.InSync()
		if err == nil {
			err = notWarming(s)
		}
		if err != nil {
			last, prev = err, nil
		} else if prev != nil && equalWeights(prev, got) {
			return got, nil
		} else {
			prev = got
		}
		time.Sleep(1500 * time.Millisecond)
	}
	return nil, fmt.Errorf("weights not stable in %v: %w", timeout, last)
}

func equalWeights(a, b map[string]uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// setPolicy rewrites the [weighting] policy (and optional extra keys) and the capacity
// factors, reloads the controller with SIGHUP and waits for the reload event.
func setPolicy(s *scenario.Scenario, policy string, extra map[string]string, capacities []float64) error {
	w := map[string]string{"policy": fmt.Sprintf("%q", policy)}
	if policy == "static" {
		// A fixed split, as ovs-ofctl would write it: no cut for late health answers
		// (weighting.slow_share), which would move it under load.
		w["slow_share"] = "1"
	}
	for k, v := range extra {
		w[k] = v
	}
	// Opts is only read by the scenario when it writes the configuration, which Reload does
	// from this goroutine.
	s.Opts.Weighting = w
	return s.Reload(capacities, "")
}

func fmtWeights(w map[string]uint16, ns []string) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, fmt.Sprint(w[n]))
	}
	return strings.Join(parts, "/")
}

func fmtShares(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.1f", 100*x))
	}
	return strings.Join(parts, "/") + "%"
}
