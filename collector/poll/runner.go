package poll

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"flowweight/collector"
	"flowweight/collector/snmp"
	"flowweight/internal/health"
)

// Job is one backend the collector polls: its SNMP agent and its health check, on a pace.
type Job struct {
	Name   string
	Target snmp.Target
	// Check builds the health check, once per start of the job, logging to log (which names
	// the backend) anything the operator should hear about it; an error is logged and the job
	// does not run.
	Check func(log *slog.Logger) (health.Prober, error)
	// Interval is the poll period; Fast and Rise the fast pace after a failed check
	// (checkPace). A health check's timeout is Check's.
	Interval, Fast time.Duration
	Rise           int
	// Spec is what the job was built from: a Set whose job of this name has another Spec
	// restarts it, one with the same Spec leaves it running.
	Spec string
}

// Sink takes what the polls find: a collector.Pool.
type Sink interface {
	Observe(name string, s collector.Sample)
	CheckResult(name string, h collector.Health)
}

// Config is what a Runner is given.
type Config struct {
	Sink   Sink
	Logger *slog.Logger
	// PollFailed, if set, is called for each failed SNMP poll (a metric).
	PollFailed func(name string)
}

// Runner runs one goroutine per Job. Set, Start and Wait are safe from any goroutine.
type Runner struct {
	cfg Config

	mu      sync.Mutex
	ctx     context.Context // nil until Start
	want    map[string]Job
	running map[string]running
	wg      sync.WaitGroup
}

type running struct {
	cancel context.CancelFunc
	spec   string
}

// New returns a runner with no jobs; nothing runs before Start.
func New(cfg Config) *Runner {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, want: map[string]Job{}, running: map[string]running{}}
}

// Set makes jobs the ones to run: a job that is new or whose Spec changed is (re)started, one
// that is gone is stopped, the others keep running undisturbed. Before Start it only records
// them.
func (r *Runner) Set(jobs []Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want = make(map[string]Job, len(jobs))
	for _, j := range jobs {
		r.want[j.Name] = j
	}
	r.applyLocked()
}

// Start runs the jobs set, and those of later Sets, until ctx ends.
func (r *Runner) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx = ctx
	r.applyLocked()
}

// Wait returns when every job's goroutine has returned (after Start's context ended).
func (r *Runner) Wait() { r.wg.Wait() }

// Running lists the names of the jobs started and not stopped since (a job that could not
// start, its error logged, stays listed until a Set drops or changes it).
func (r *Runner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.running))
	for n := range r.running {
		out = append(out, n)
	}
	return out
}

func (r *Runner) applyLocked() {
	if r.ctx == nil {
		return // Start calls us again
	}
	if r.ctx.Err() != nil {
		return // shutting down: Wait may be running, and nothing new may join its group
	}
	for name, run := range r.running {
		if j, ok := r.want[name]; !ok || j.Spec != run.spec {
			run.cancel()
			delete(r.running, name)
		}
	}
	for name, j := range r.want {
		if _, ok := r.running[name]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(r.ctx)
		r.running[name] = running{cancel: cancel, spec: j.Spec}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.run(ctx, j)
		}()
	}
}

// run polls j and runs its health check on the schedule of a checkPace until ctx ends.
func (r *Runner) run(ctx context.Context, j Job) {
	log := r.cfg.Logger.With("backend", j.Name, "source", "snmp")
	poller, err := snmp.NewPoller(j.Target)
	if err != nil {
		log.Error("snmp source not started", "err", err)
		return
	}
	defer poller.Close()
	checker, err := j.Check(log)
	if err != nil {
		log.Error("health check not started", "err", err)
		return
	}
	sink := r.cfg.Sink
	pace := newCheckPace(j.Interval, j.Fast, j.Rise)
	check := func() {
		res := checker.Check(ctx)
		if ctx.Err() != nil {
			return // stopping: a check cut short says nothing about the backend
		}
		pace.checked(res.OK)
		sink.CheckResult(j.Name, collector.Health{OK: res.OK, Status: int(res.Status), Latency: res.Latency, Err: res.Err,
			Timeout: !res.OK && res.Status == 0 && health.TimedOut(res.Err)})
	}
	for {
		if pace.step(time.Now()) {
			pctx, cancel := context.WithTimeout(ctx, j.Interval)
			s, err := poller.Poll(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				// An unreachable or refusing agent counts as a failed check.
				if r.cfg.PollFailed != nil {
					r.cfg.PollFailed(j.Name)
				}
				log.Warn("snmp poll failed", "err", err)
				pace.pollFailed()
				sink.CheckResult(j.Name, collector.Health{OK: false, Err: err.Error()})
			} else {
				sink.Observe(j.Name, collector.Sample{CPUUtil: s.CPUUtil, HasCPU: s.CPUKnown, MemUtil: s.MemUtil,
					Conns: float64(s.Conns), CPUCount: s.CPUCount, MemBytes: float64(s.MemBytes)})
				check()
			}
		} else {
			check() // the fast pace: the health check alone
		}
		t := time.NewTimer(pace.wait(time.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
