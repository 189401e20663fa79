//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestFastLoopFollowsWorkInFlight runs the fast loop on the real switch: under load the
// probes' in-flight reports reach the controller, which corrects the slow weights by them
// (applied_weight apart from base_weight, in_flight shown per backend); once the load has
// gone every queue is empty, the corrected weights equal the slow ones, and the switch holds
// them.
func TestFastLoopFollowsWorkInFlight(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 45, Quotas: []float64{0.125, 0.25, 0.5}, Work: 100000,
		InFlight: 50 * time.Millisecond, Warmup: 2 * time.Second})
	waitWarm(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan scenario.LoadResult, 1)
	go func() {
		r, err := s.Load(ctx, scenario.LoadOptions{Concurrency: 24, Duration: 20 * time.Second, MaxRequests: 20000, Timeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	var seen scenario.Service
	_, err := waitFor(15*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		seen = v
		moved := false
		for _, b := range v.Backends {
			if !b.Followed || b.InFlight == nil {
				return fmt.Errorf("%s: followed %v, in flight %v", b.Name, b.Followed, b.InFlight)
			}
			moved = moved || b.AppliedWeight != b.BaseWeight
		}
		if !moved {
			return fmt.Errorf("no backend's applied weight differs from its base")
		}
		return nil
	})
	cancel()
	r := <-done
	t.Logf("load: %v", r)
	for _, b := range seen.Backends {
		n := -1.0
		if b.InFlight != nil {
			n = *b.InFlight
		}
		t.Logf("under load: %s base %d applied %d in flight %.0f", b.Name, b.BaseWeight, b.AppliedWeight, n)
	}
	if err != nil {
		t.Fatalf("the fast loop did not follow the queues under load: %v", err)
	}
	// Settled: no queues, the corrected weights are the slow ones, and the switch holds them.
	if _, err := waitFor(15*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		for _, b := range v.Backends {
			if b.AppliedWeight != b.BaseWeight {
				return fmt.Errorf("%s: applied %d, base %d", b.Name, b.AppliedWeight, b.BaseWeight)
			}
		}
		_, err = s.InSync()
		return err
	}); err != nil {
		t.Fatalf("after the load: %v", err)
	}
}
