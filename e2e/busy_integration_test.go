//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestBusyBackendNotEvicted overloads the pool (far more clients than its quotas serve) so
// that the probes' health checks queue behind real work and time out (the scenario's probes
// check with a 500 ms timeout, then every 100 ms), and checks that no backend is evicted for
// it (docs/weights.md, "Busy is not dead"); then, still under overload, it kills one
// backend's service and checks that the switch takes it out: a refused connection proves
// death whatever the load.
func TestBusyBackendNotEvicted(t *testing.T) {
	// A 100 ms health timeout: a check that meets its cgroup throttled (87.5 ms of every
	// 100 ms at 0.125 core) behind the queued requests answers late.
	s := startScenario(t, scenario.Options{Net: 44, Quotas: []float64{0.125, 0.25, 0.5}, Work: 100000,
		ProbeFastInterval: 100 * time.Millisecond, ProbeHealthTimeout: 100 * time.Millisecond, Warmup: 2 * time.Second,
		Weighting: map[string]string{"policy": `"static"`, "capacity": "{ cpu = 1.0, mem = 0.0 }"}})
	waitWarm(t, s)
	overload := func(ctx context.Context, d time.Duration) <-chan scenario.LoadResult {
		out := make(chan scenario.LoadResult, 1)
		go func() {
			// Bounded in time, count and clients; 48 clients keep every backend's queue long.
			r, err := s.Load(ctx, scenario.LoadOptions{Concurrency: 48, Duration: d, MaxRequests: 50000, Timeout: 10 * time.Second})
			if err != nil {
				t.Error(err)
			}
			out <- r
		}()
		return out
	}

	since := time.Now()
	loaded := overload(context.Background(), 12*time.Second)
	// Watch the overload: how many times a backend was seen slow (late checks), which says
	// the test tested something; the verdict is the event list below.
	seenSlow := map[string]int{}
	var r scenario.LoadResult
watch:
	for {
		select {
		case r = <-loaded:
			break watch
		case <-time.After(200 * time.Millisecond):
		}
		if v, err := s.Service(); err == nil {
			for _, b := range v.Backends {
				if b.Slow {
					seenSlow[b.Name]++
				}
			}
		}
	}
	t.Logf("overload: %v; backends seen slow (late health checks while busy), polls: %v", r, seenSlow)
	if len(seenSlow) == 0 {
		t.Errorf("no backend was ever slow: the overload made no health check late, so nothing was tested")
	}
	var evs []scenario.Event
	if err := s.API("/api/v1/events", &evs); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == "state" && !e.Time.Before(since) && strings.Contains(e.Text, "-> down") {
			t.Errorf("evicted under load: %s %s", e.Backend, e.Text)
		}
	}
	if err := s.WaitReady(10 * time.Second); err != nil {
		t.Errorf("after the overload: %v", err)
	}

	// Death under load: be3's service killed during a second overload.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := overload(ctx, 15*time.Second)
	be := s.Backend("be3")
	if _, err := waitFor(5*time.Second, func() error {
		if v, err := s.Service(); err != nil || !v.Backends[2].Slow && v.Backends[2].CPU < 0.5 {
			return fmt.Errorf("be3 not busy yet (%v)", err)
		}
		return nil
	}); err != nil {
		t.Logf("be3 before the kill: %v", err)
	}
	killed := time.Now()
	if err := be.KillHTTP(); err != nil {
		t.Fatal(err)
	}
	_, err := waitFor(10*time.Second, func() error {
		w, err := s.GroupWeights()
		if err != nil {
			return err
		}
		if w["be3"] != 0 {
			return fmt.Errorf("be3 still has %d slots", w["be3"])
		}
		return nil
	})
	took := time.Since(killed)
	cancel()
	<-done
	if err != nil {
		t.Fatalf("killed under load, not taken out: %v", err)
	}
	t.Logf("be3 killed under load: weight 0 on the switch within %v of the kill", took.Round(time.Millisecond))
}
