//go:build integration

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// Detection targets on the real switch, SIGKILL of the HTTP service to weight 0 in the group,
// at a 1 s probe interval with fail_threshold 3 (docs/design.md, "Failure detection time").
const (
	detectMedianTarget = time.Second
	detectWorstTarget  = 1500 * time.Millisecond
)

// BenchmarkKillDetection measures fast failure detection end to end: it SIGKILLs one
// backend's HTTP service killDetectionKills times per b.N, each time under a load of
// killDetectionRate new connections a second through the VIP, and measures the time from the
// kill until the switch's group holds weight 0 for that backend, the client requests that
// failed meanwhile, and, after restarting the service, the time until the switch gives the
// backend a bucket again. Between kills the backend is back past warm-up, so each kill starts
// from the probe's normal pace.
//
// It starts its own Open vSwitch, namespaces and controller (scenario.Start) and needs root.
// Run it alone on an otherwise idle machine, once:
//
//	go test -tags integration -run XXX -bench KillDetection -benchtime 1x -timeout 20m ./e2e/
//
// The detection time is measured to the end of the first group read (ovs-ofctl dump-groups)
// that shows weight 0, so it is an upper bound by at most one read (read-median-ms).
func BenchmarkKillDetection(b *testing.B) {
	const victim = "be2"
	// Equal weights and quotas make each case send the victim the same third of the load.
	s := startScenario(b, scenario.Options{Net: 81, Quotas: []float64{0.5, 0.5, 0.5}, Work: 200,
		ProbeInterval: time.Second, ProbeFastInterval: 100 * time.Millisecond, FailThreshold: 3, RiseThreshold: 2,
		Warmup: 2 * time.Second, Weighting: map[string]string{"policy": `"equal"`}})
	waitWarm(b, s)
	be := s.Backend(victim)
	var cases []killCase
	b.ResetTimer()
	for range b.N {
		for i := range killDetectionKills {
			c := killOnce(b, s, be)
			b.Logf("kill %2d: weight 0 after %v (read %v), %d of %d requests failed, bucket back %v after restart",
				i+1, c.detect.Round(time.Millisecond), c.read.Round(time.Millisecond), c.failed, c.requests, c.recover.Round(time.Millisecond))
			cases = append(cases, c)
		}
	}
	b.StopTimer()
	pick := func(f func(killCase) time.Duration, q float64) time.Duration {
		var ds []time.Duration
		for _, c := range cases {
			ds = append(ds, f(c))
		}
		return scenario.Percentile(ds, q)
	}
	detect := func(c killCase) time.Duration { return c.detect }
	failed := func(c killCase) time.Duration { return time.Duration(c.failed) } // counts, ranked as durations
	msOf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	med, worst := pick(detect, 0.5), pick(detect, 1)
	b.ReportMetric(msOf(med), "detect-median-ms")
	b.ReportMetric(msOf(worst), "detect-worst-ms")
	b.ReportMetric(msOf(pick(func(c killCase) time.Duration { return c.read }, 0.5)), "read-median-ms")
	b.ReportMetric(float64(pick(failed, 0.5)), "failed-median")
	b.ReportMetric(float64(pick(failed, 1)), "failed-worst")
	b.ReportMetric(msOf(pick(func(c killCase) time.Duration { return c.recover }, 0.5)), "recover-median-ms")
	b.ReportMetric(msOf(pick(func(c killCase) time.Duration { return c.recover }, 1)), "recover-worst-ms")
	if med > detectMedianTarget || worst > detectWorstTarget {
		b.Errorf("detection median %v, worst %v over %d kills: target ≤ %v median, ≤ %v worst",
			med, worst, len(cases), detectMedianTarget, detectWorstTarget)
	}
}

const (
	killDetectionKills = 20
	killDetectionRate  = 300 // new connections a second through the VIP during each case
)

// killCase is what one kill measured.
type killCase struct {
	detect           time.Duration // SIGKILL to the end of the first group read showing weight 0
	read             time.Duration // how long that read took: detect's resolution
	failed, requests int           // client requests between the kill and that read
	recover          time.Duration // service accepting again to the end of the first read giving it a bucket
}

// killOnce kills be's backendd under load, waits for weight 0 in the switch, checks the
// controller calls it down, restarts it and waits until it is up again.
func killOnce(tb testing.TB, s *scenario.Scenario, be *scenario.Backend) killCase {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type loadOut struct {
		r   scenario.LoadResult
		err error
	}
	out := make(chan loadOut, 1)
	go func() {
		// Bounded twice over: cancelled once the switch holds weight 0, and never more than
		// 10 s or 3000 requests in any case.
		r, err := s.Load(ctx, scenario.LoadOptions{Concurrency: 16, Rate: killDetectionRate, Duration: 10 * time.Second,
			MaxRequests: 3000, Timeout: time.Second})
		out <- loadOut{r, err}
	}()
	var c killCase
	// The kill falls anywhere in the probe's interval, as a crash would: without this the
	// kills came at nearly the same phase after each recovery and measured that phase only.
	phase := time.Duration(killPhase.Float64() * float64(s.Opts.ProbeInterval))
	time.Sleep(phase)
	start := time.Now()
	if err := be.KillHTTP(); err != nil {
		tb.Fatal(err)
	}
	// Each read runs ovs-ofctl, which takes tens of milliseconds: the reads pace the loop.
	read, err := groupUntil(s, 10*time.Second, func(w map[string]uint16) error {
		if w[be.Name] != 0 {
			return fmt.Errorf("%s bucket weight still %d", be.Name, w[be.Name])
		}
		return othersCarry(s, w, be.Name)
	})
	cancel()
	lo := <-out
	if err != nil {
		tb.Fatalf("%s not at weight 0 within 10 s of SIGKILL: %v", be.Name, err)
	}
	if lo.err != nil {
		tb.Fatal(lo.err)
	}
	c.detect, c.read = read.end.Sub(start), read.took
	c.failed, c.requests = lo.r.Errors, lo.r.OK+lo.r.Errors
	v, err := s.Service()
	if err != nil {
		tb.Fatal(err)
	}
	if bv, _ := v.Backend(be.Name); bv.State != "down" {
		tb.Errorf("%s is %q after its service was killed, want down", be.Name, bv.State)
	}

	if err := be.StartHTTP(); err != nil { // returns once it accepts connections
		tb.Fatal(err)
	}
	accepting := time.Now()
	read, err = groupUntil(s, 10*time.Second, func(w map[string]uint16) error {
		if w[be.Name] == 0 {
			return fmt.Errorf("%s still at weight 0", be.Name)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("%s did not get a bucket back within 10 s of its restart: %v", be.Name, err)
	}
	c.recover = read.end.Sub(accepting)
	if _, err := waitFor(s.Opts.Warmup+10*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		if bv, _ := v.Backend(be.Name); bv.State != "up" {
			return fmt.Errorf("%s is %q", be.Name, bv.State)
		}
		return nil
	}); err != nil {
		tb.Fatalf("%s did not finish warm-up: %v", be.Name, err)
	}
	return c
}

// killPhase draws each kill's moment within the probe interval; seeded, so a rerun draws the
// same phases.
var killPhase = rand.New(rand.NewPCG(20261201, 1))

// groupRead is the group read that satisfied a condition.
type groupRead struct {
	end  time.Time
	took time.Duration
}

// groupUntil reads the switch's group back to back until ok accepts it or timeout passes.
func groupUntil(s *scenario.Scenario, timeout time.Duration, ok func(map[string]uint16) error) (groupRead, error) {
	deadline := time.Now().Add(timeout)
	for {
		t0 := time.Now()
		w, err := s.GroupWeights()
		t1 := time.Now()
		if err == nil {
			err = ok(w)
		}
		if err == nil {
			return groupRead{end: t1, took: t1.Sub(t0)}, nil
		}
		if t1.After(deadline) {
			return groupRead{}, err
		}
	}
}

// othersCarry guards against a read that lost every bucket (a group being replaced, an
// unparsable dump): weight 0 for the victim counts only when every other backend has weight.
func othersCarry(s *scenario.Scenario, w map[string]uint16, victim string) error {
	var missing []string
	for _, b := range s.Backends {
		if b.Name != victim && w[b.Name] == 0 {
			missing = append(missing, b.Name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("backends %v at weight 0 too (buckets %v)", missing, w)
	}
	return nil
}
