package poll

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"flowweight/collector"
	"flowweight/collector/snmp"
	"flowweight/internal/health"
	"flowweight/internal/testutil"
)

// sink records what the runner hands the pool.
type sink struct {
	mu      sync.Mutex
	failed  map[string]int
	samples int
}

func (s *sink) Observe(string, collector.Sample) {
	s.mu.Lock()
	s.samples++
	s.mu.Unlock()
}

func (s *sink) CheckResult(name string, h collector.Health) {
	s.mu.Lock()
	if !h.OK {
		s.failed[name]++
	}
	s.mu.Unlock()
}

func (s *sink) failures(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed[name]
}

type passing struct{}

func (passing) Check(context.Context) health.Result { return health.Result{OK: true} }

// TestRunnerSetStartsOnlyWhatChanged: jobs set before Start wait for it; a later Set restarts
// a job whose Spec changed, leaves an unchanged one running and stops one that is gone; a
// poll of an agent that never answers reaches the sink as a failed check.
func TestRunnerSetStartsOnlyWhatChanged(t *testing.T) {
	agent, err := net.ListenPacket("udp", "127.0.0.1:0") // takes requests, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	var mu sync.Mutex
	starts := map[string]int{}
	job := func(name, spec string) Job {
		return Job{Name: name, Spec: spec, Interval: 50 * time.Millisecond,
			Target: snmp.Target{Address: agent.LocalAddr().String(), Version: "v2c", Community: "c", Timeout: 10 * time.Millisecond},
			Check: func(*slog.Logger) (health.Prober, error) {
				mu.Lock()
				starts[name]++
				mu.Unlock()
				return passing{}, nil
			}}
	}
	started := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return starts[name]
	}
	sk := &sink{failed: map[string]int{}}
	pollFailed := map[string]int{}
	var pmu sync.Mutex
	r := New(Config{Sink: sk, PollFailed: func(name string) { pmu.Lock(); pollFailed[name]++; pmu.Unlock() }})

	r.Set([]Job{job("a", "1"), job("b", "1")})
	if n := len(r.Running()); n != 0 {
		t.Fatalf("%d jobs running before Start", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)
	testutil.Until(t, 10*time.Second, func() bool { return started("a") == 1 && started("b") == 1 }, "both jobs started")
	testutil.Until(t, 10*time.Second, func() bool { return sk.failures("a") > 0 }, "a failed poll in the sink")

	r.Set([]Job{job("a", "1"), job("b", "2")})
	testutil.Until(t, 10*time.Second, func() bool { return started("b") == 2 }, "b restarted")
	r.Set([]Job{job("a", "1")})
	if got := r.Running(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("running %v, want [a]", got)
	}
	if started("a") != 1 {
		t.Errorf("a started %d times, want once (its spec never changed)", started("a"))
	}
	cancel()
	r.Wait()
	pmu.Lock()
	defer pmu.Unlock()
	if pollFailed["a"] == 0 {
		t.Error("failed polls not reported to PollFailed")
	}
}

// TestRunnerJobWithoutCheckDoesNotRun: a health check that cannot be built is logged and its
// job does not run (nothing reaches the sink), the others do.
func TestRunnerJobWithoutCheckDoesNotRun(t *testing.T) {
	sk := &sink{failed: map[string]int{}}
	r := New(Config{Sink: sk})
	bad := Job{Name: "bad", Interval: time.Hour, Target: snmp.Target{Address: "127.0.0.1:1", Version: "v2c", Community: "c", Timeout: time.Millisecond},
		Check: func(*slog.Logger) (health.Prober, error) { return nil, net.ErrClosed }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Set([]Job{bad})
	r.Start(ctx)
	ended := make(chan struct{})
	go func() { r.Wait(); close(ended) }()
	select {
	case <-ended: // the job gave up by itself, its context still live
	case <-time.After(10 * time.Second):
		t.Fatal("a job whose health check could not be built is still running")
	}
	if n := sk.failures("bad"); n != 0 {
		t.Errorf("%d results from a job that could not start", n)
	}
}

// TestRunnerSetAfterShutdownStartsNothing: a reload that lands after the run's context ended
// (the controller shutting down) starts no job, so nothing joins the group Wait is waiting on.
func TestRunnerSetAfterShutdownStartsNothing(t *testing.T) {
	var mu sync.Mutex
	starts := 0
	job := func(name string) Job {
		return Job{Name: name, Spec: name, Interval: time.Hour,
			Target: snmp.Target{Address: "127.0.0.1:1", Version: "v2c", Community: "c", Timeout: 10 * time.Millisecond},
			Check: func(*slog.Logger) (health.Prober, error) {
				mu.Lock()
				starts++
				mu.Unlock()
				return passing{}, nil
			}}
	}
	r := New(Config{Sink: &sink{failed: map[string]int{}}})
	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)
	cancel()
	r.Set([]Job{job("late")})
	if got := r.Running(); len(got) != 0 {
		t.Errorf("running %v after the run ended, want none", got)
	}
	r.Wait()
	mu.Lock()
	defer mu.Unlock()
	if starts != 0 {
		t.Errorf("%d jobs started after the run ended", starts)
	}
}
