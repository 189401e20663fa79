//go:build integration

package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// Share correction (docs/dataplane.md, "Correcting the measured share"): with client
// affinity, one client opening 30 % of all new connections is pinned to the backend it was
// first given, past the group. Uncorrected, that backend gets its 30 % on top of its slots'
// share of the rest; corrected, each switch gives its slots to the others until the whole
// split meets the weights.

const (
	correctionRate    = 100  // new connections a second, all clients together
	correctionMeasure = 5000 // connections counted per phase
	correctionLight   = 205  // light client addresses: .20 to .99 and .130 to .254
)

// correctionTraffic is one phase's answers: per backend, the first n (all) and the heavy
// client's among them; answered is every answer, the ones past n that were in flight when
// the n-th came included, and cancelled the requests the end of the phase cut short (their
// connections may have reached the switch).
type correctionTraffic struct {
	all, heavy, answered map[string]int
	n, errs, cancelled   int
	sample               error
}

func (c correctionTraffic) share(name string) float64 {
	return float64(c.all[name]) / float64(c.n)
}

// correctionLoad opens new connections at correctionRate until n answered or ctx ends (each a
// GET on its own connection): 3 in 10 from heavy, the others from the light addresses in
// turn, so a light address comes back about every 3 s (most find their learned flow expired). It stops at limit whatever happens.
func correctionLoad(ctx context.Context, s *scenario.Scenario, heavy netip.Addr, light []netip.Addr, n int, limit time.Duration) correctionTraffic {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	url := fmt.Sprintf("http://%s:%d/", s.VIP, scenario.VIPPort)
	heavyClient := s.Client.HTTPClientFrom(heavy, 5*time.Second)
	lightClients := make([]*http.Client, len(light))
	for i, a := range light {
		lightClients[i] = s.Client.HTTPClientFrom(a, 5*time.Second)
	}
	out := correctionTraffic{all: map[string]int{}, heavy: map[string]int{}, answered: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	start := time.Now()
	nextLight := 0
	for i := 0; ; i++ {
		mu.Lock()
		done := out.n >= n
		mu.Unlock()
		if done || i >= 2*n || ctx.Err() != nil {
			break
		}
		// Paced by the schedule, not by the answers: a slow backend must not slow the load.
		if d := time.Until(start.Add(time.Duration(i) * time.Second / correctionRate)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		isHeavy := i%10 == 0 || i%10 == 3 || i%10 == 6
		c := heavyClient
		if !isHeavy {
			c = lightClients[nextLight%len(lightClients)]
			nextLight++
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			name, err := scenario.Get(ctx, c, url)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if ctx.Err() == nil {
					out.errs++
					out.sample = err
				} else {
					out.cancelled++
				}
				return
			}
			out.answered[name]++
			if out.n >= n {
				return
			}
			out.n++
			out.all[name]++
			if isHeavy {
				out.heavy[name]++
			}
		})
	}
	wg.Wait()
	return out
}

// correctionState is the scenario service's correction on its one switch, per backend.
func correctionState(s *scenario.Scenario) (map[string]measuredCorrection, error) {
	bs, err := apiService(s)
	if err != nil {
		return nil, err
	}
	out := map[string]measuredCorrection{}
	for _, b := range bs {
		if len(b.Measured) != 1 || b.Measured[0].Correction == nil {
			return nil, fmt.Errorf("backend %s: no correction in %+v", b.Name, b.Measured)
		}
		out[b.Name] = *b.Measured[0].Correction
	}
	return out, nil
}

type measuredCorrection struct {
	State         string  `json:"state"`
	Settled       int     `json:"settled_readings"`
	ComputedShare float64 `json:"computed_share"`
	PinnedShare   float64 `json:"pinned_share"`
	GroupShare    float64 `json:"group_share"`
	Bound         string  `json:"bound"`
	Reason        string  `json:"reason"`
}

// TestShareCorrection: three backends of equal weight, affinity on, one client opening 30 %
// of all new connections and 205 others the rest. Phase "off" (share_correction = "off", the
// split as every release before had it): the switch counts every connection where the clients
// saw it go, and the heavy client's backend gets about its 30 % plus a third of the rest, far
// off its third. Phase "on" (the default), in the same run: once the switch's correction has
// settled, every backend's share of the next 5,000 connections is its computed third (the
// target ±2 points; the test allows 3 for sampling).
func TestShareCorrection(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 109, Work: 200, Quotas: []float64{0.5, 0.5, 0.5}, Capacities: []float64{1, 1, 1}, AffinityTimeout: time.Second,
		Weighting:   map[string]string{"policy": `"static"`, "capacity": cpuOnly},
		ServiceKeys: map[string]string{"share_correction": `"off"`}})
	ctx := context.Background()
	heavy := netip.AddrFrom4([4]byte{10, 77, s.Opts.Net, 120})
	var light []netip.Addr
	for i := range correctionLight {
		host := 20 + i // past the controller (.2), the client (.10) and the backends (.11-.13)
		if host >= 100 {
			host += 30 // past the VIP (.100) and the heavy client (.120)
		}
		light = append(light, netip.AddrFrom4([4]byte{10, 77, s.Opts.Net, byte(host)}))
	}
	for _, a := range append([]netip.Addr{heavy}, light...) {
		if err := s.Client.AddAddr(a); err != nil {
			t.Fatal(err)
		}
	}
	w := stableSync(t, s, 30*time.Second)
	var total float64
	for _, v := range w {
		total += float64(v)
	}
	computed := map[string]float64{}
	for name, v := range w {
		computed[name] = float64(v) / total
	}

	// Phase off: 5,000 connections from counters standing still, then counters standing
	// still again: what the switch counted (the group's buckets and the table-8 flows) is
	// what the clients saw, connection for connection (nothing rewrites the group here; a
	// request that failed or was cut short may have been counted without an answer).
	before := waitCountersStill(t, s)
	off := correctionLoad(ctx, s, heavy, light, correctionMeasure, 90*time.Second)
	if off.n < correctionMeasure {
		t.Fatalf("phase off: %d of %d answered (%d errors, e.g. %v)", off.n, correctionMeasure, off.errs, off.sample)
	}
	if _, err := waitFor(15*time.Second, func() error {
		after := measuredCounters(t, s)
		slack, diff := off.errs+off.cancelled, 0
		for name := range computed {
			d := int(after[name]-before[name]) - off.answered[name]
			if d < 0 || d > slack {
				return fmt.Errorf("backend %s: switch counted %.0f new connections, clients saw %d (slack %d)", name, after[name]-before[name], off.answered[name], slack)
			}
			diff += d
		}
		if diff > slack {
			return fmt.Errorf("switch counted %d more new connections than answered, slack %d", diff, slack)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	heavyAt, heavyN := "", 0
	for name, n := range off.heavy {
		if n > heavyN {
			heavyAt, heavyN = name, n
		}
	}
	t.Logf("phase off: %v (heavy client %v, %d errors)", off.all, off.heavy, off.errs)
	figure(t, "share correction off: heavy client's backend share vs computed", "%.3f vs %.3f (%s; all %v)",
		off.share(heavyAt), computed[heavyAt], heavyAt, shares(off, computed))
	if d := off.share(heavyAt) - computed[heavyAt]; d < 0.1 {
		t.Errorf("phase off: the heavy client's backend %s got %.3f, computed %.3f: the pinned client skews less than the test needs (10 points)",
			heavyAt, off.share(heavyAt), computed[heavyAt])
	}

	// Phase on: the correction turned on, the load runs while it settles, then the next
	// 5,000 are counted without a pause (the heavy client's learned flow, 1 s, must not
	// expire between the two).
	if err := s.SetServiceKey("share_correction", `"on"`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bg, stop := context.WithCancel(ctx)
	settling := make(chan correctionTraffic, 1)
	go func() { settling <- correctionLoad(bg, s, heavy, light, 1<<30, 150*time.Second) }()
	_, err := waitFor(120*time.Second, func() error {
		c, err := correctionState(s)
		if err != nil {
			return err
		}
		most := 0.0
		for name, b := range c {
			// Five readings in a row within a point of the computed shares.
			if b.State != "settled" || b.Settled < 5 {
				return fmt.Errorf("backend %s: correction %s for %d readings (%s)", name, b.State, b.Settled, b.Reason)
			}
			most = math.Max(most, b.PinnedShare)
		}
		// The heavy client went quiet between the phases, so it may have been placed anew:
		// its whole 30 % pinned to one backend says the correction's window (the latest
		// 2,000 connections) holds only where it is now.
		if most < 0.28 {
			return fmt.Errorf("no backend holds the heavy client's pinned 30 %% in the correction's window (at most %.3f)", most)
		}
		return nil
	})
	took := time.Since(start)
	stop()
	<-settling
	if err != nil {
		t.Fatalf("correction never settled: %v\n%s", err, grepLines(controllerLogText(t, s), "measured share"))
	}
	on := correctionLoad(ctx, s, heavy, light, correctionMeasure, 90*time.Second)
	figure(t, "share correction: time from the load's start to settled", "%v", took.Round(100*time.Millisecond))
	if c, err := correctionState(s); err == nil {
		t.Logf("correction after phase on: %+v", c)
	}
	if on.n < correctionMeasure {
		t.Fatalf("phase on: %d of %d answered (%d errors, e.g. %v)", on.n, correctionMeasure, on.errs, on.sample)
	}
	t.Logf("phase on: %v (heavy client %v, %d errors)", on.all, on.heavy, on.errs)
	worst := 0.0
	for name, p := range computed {
		worst = math.Max(worst, math.Abs(on.share(name)-p))
	}
	figure(t, "share correction on: largest difference from the computed share (points)", "%.2f (all %v)", 100*worst, shares(on, computed))
	// The target is ±2 points (docs/benchmarks.md reports the runs); the test's bound adds
	// what 5,000 connections leave to chance: the group places 3,500 of them, a backend's
	// share of which strays by about 0.6 point (one sampling error), and a settled correction
	// may sit up to two slots (0.5 point) from its solve.
	for name, p := range computed {
		if d := on.share(name) - p; math.Abs(d) > 0.03 {
			t.Errorf("phase on: backend %s got %.3f of %d connections, computed %.3f: %+.1f points", name, on.share(name), on.n, p, 100*d)
		}
	}

	if log := controllerLogText(t, s); !strings.Contains(log, "correcting the slots for pinned connections") {
		t.Errorf("the controller did not log the correction:\n%s", grepLines(log, "measured share"))
	}
}

// shares renders each backend's share beside its computed one.
func shares(c correctionTraffic, computed map[string]float64) string {
	names := make([]string, 0, len(computed))
	for n := range computed {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %.3f/%.3f ", n, c.share(n), computed[n])
	}
	return strings.TrimSpace(b.String())
}
