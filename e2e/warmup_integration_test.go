//go:build integration

package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestWarmupWatches brings be3 back while a neighbour fills its CPU quota, as a newcomer
// whose first requests cost far more than the pool's would look (docs/weights.md, "Warm-up
// that watches"). With the default warm-up mode the ramp backs off below the timer's, and the
// switch gives be3 less than any timer would (the timer never goes below warmup_start of the
// full weight); once the neighbour stops, the ramp climbs back and ends at the full weight.
// With warmup_mode = "timer" the same newcomer gets the timer's ramp: the signals did it.
func TestWarmupWatches(t *testing.T) {
	const quota, warmup = 0.25, 20 * time.Second
	s := startScenario(t, scenario.Options{Net: 107, Quotas: []float64{quota, quota, quota}, Warmup: warmup,
		Weighting: map[string]string{"policy": `"static"`, "capacity": "{ cpu = 1.0, mem = 0.0 }"}})
	waitWarm(t, s)
	be3 := s.Backend("be3")

	// rejoin stops be3's service, waits until the controller has it down, starts a neighbour
	// filling its quota and starts the service again; it returns the neighbour's stop.
	rejoin := func(t *testing.T) func() {
		t.Helper()
		if err := be3.StopHTTP(); err != nil {
			t.Fatal(err)
		}
		if _, err := waitFor(30*time.Second, func() error { return backendState(s, "be3", "down") }); err != nil {
			t.Fatal(err)
		}
		burner, err := be3.StartBurner(quota, 3*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				if err := burner.Stop(); err != nil {
					t.Logf("burner stop: %v", err)
				}
			}
		}
		t.Cleanup(stop)
		if err := be3.StartHTTP(); err != nil {
			t.Fatal(err)
		}
		return stop
	}

	t.Run("watch", func(t *testing.T) {
		stop := rejoin(t)
		up := time.Now() // be3 accepts connections: its warm-up begins after this
		// Held or backed off (the neighbour's CPU reads about 0.9, where holding turns into
		// backing off) half-way through the timer's ramp or later: the ramp still at most 0.1
		// where the timer gives 0.75 or more (a ramp left free would be there too by then), the
		// switch in sync with it, and be3's slots on the switch below what any timer would leave.
		var seen scenario.BackendView
		if _, err := waitFor(60*time.Second, func() error {
			b, err := backendView(s, "be3")
			if err != nil {
				return err
			}
			e := b.Explanation
			held := strings.HasPrefix(e.WarmupWatch, "back off") || strings.HasPrefix(e.WarmupWatch, "hold")
			if !held || e.Warmup > 0.1 || e.WarmupTimer < 0.75 {
				return fmt.Errorf("be3 %s: ramp %.3f, timer %.3f, %q, cpu %.2f", b.State, e.Warmup, e.WarmupTimer, e.WarmupWatch, b.CPU)
			}
			got, err := s.InSync()
			if err != nil {
				return err
			}
			full := e.Full * 256
			if float64(got["be3"]) > 0.25*full+1 {
				return fmt.Errorf("be3 has %d slots on the switch, want at most a quarter of its full %.1f", got["be3"], full)
			}
			seen = b
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("held back: be3 ramp %.3f (timer %.3f, %s), cpu %.2f, %d slots on the switch", seen.Explanation.Warmup,
			seen.Explanation.WarmupTimer, seen.Explanation.WarmupWatch, seen.CPU, seen.Slots)

		stop()
		// Climbing back once be3's CPU falls to the pool's, and done at the full weight.
		if _, err := waitFor(150*time.Second, func() error {
			b, err := backendView(s, "be3")
			if err != nil {
				return err
			}
			e := b.Explanation
			if b.State != "up" || e.Warmup != 1 || e.WarmupTimer != 0 {
				return fmt.Errorf("be3 %s: ramp %.3f, timer %.3f, %q", b.State, e.Warmup, e.WarmupTimer, e.WarmupWatch)
			}
			got, err := s.InSync()
			if err != nil {
				return err
			}
			if full := e.Full * 256; math.Abs(float64(got["be3"])-full) > 2 {
				return fmt.Errorf("be3 has %d slots on the switch, want its full %.1f", got["be3"], full)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// The ramp's limit (3 warm-ups from the warm-up's start, which is after up) would end it
		// at 60 s at the earliest: done before that, its signals ended it.
		if took := time.Since(up); took >= 3*warmup {
			t.Errorf("be3 reached its full weight %v after it came up: the limit ended its ramp, not its signals", took.Round(time.Second))
		}
	})

	t.Run("timer", func(t *testing.T) {
		s.Opts.Weighting["warmup_mode"] = `"timer"`
		if err := s.Reload(s.Capacities(), ""); err != nil {
			t.Fatal(err)
		}
		stop := rejoin(t)
		defer stop()
		// The same busy newcomer, seen busy: the timer's ramp all the same.
		if _, err := waitFor(45*time.Second, func() error {
			b, err := backendView(s, "be3")
			if err != nil {
				return err
			}
			e := b.Explanation
			if b.State != "warming" || b.CPU < 0.5 { // the watched ramp holds from 0.12 here
				return fmt.Errorf("be3 %s, cpu %.2f", b.State, b.CPU)
			}
			// 0.6: 6 s into the ramp, where a watched one would be at most 0.05 × 1.25^6 = 0.19.
			if e.WarmupTimer < 0.6 || math.Abs(e.Warmup-e.WarmupTimer) > 1e-9 || e.WarmupWatch != "" {
				return fmt.Errorf("be3 ramp %.3f, timer %.3f, %q: want the timer's", e.Warmup, e.WarmupTimer, e.WarmupWatch)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// backendView is backend name as the controller's API shows it.
func backendView(s *scenario.Scenario, name string) (scenario.BackendView, error) {
	v, err := s.Service()
	if err != nil {
		return scenario.BackendView{}, err
	}
	for _, b := range v.Backends {
		if b.Name == name {
			return b, nil
		}
	}
	return scenario.BackendView{}, fmt.Errorf("no backend %s", name)
}

// backendState fails unless the controller shows backend name in state.
func backendState(s *scenario.Scenario, name, state string) error {
	b, err := backendView(s, name)
	if err != nil {
		return err
	}
	if b.State != state {
		return fmt.Errorf("backend %s is %s, want %s", name, b.State, state)
	}
	return nil
}
