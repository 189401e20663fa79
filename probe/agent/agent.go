package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"flowweight/internal/health"
	"flowweight/internal/report"
	"flowweight/probe/sample"
)

// StaleAfter is how many intervals a utilisation keeps its last measured value when its
// sampler fails. After that the probe reports CPU and memory as fully used (so the backend
// gets less traffic rather than more while it cannot measure itself), connections and NIC as
// 0. The wire format has no "unknown", so this is the probe's stated policy; capacities
// (CPU count, memory size) keep their last value indefinitely, and until they are first known
// no report is sent at all.
const StaleAfter = 3

// LogEvery bounds how often one kind of failure is logged.
const LogEvery = time.Minute

// Clock gives the loop its time: Now for report timestamps and After for the waits.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Sender sends one datagram.
type Sender interface {
	Send(datagram []byte) error
}

// HealthChecker checks the local service.
type HealthChecker interface {
	Check(ctx context.Context) health.Result
}

// Source is a sampler with the name its failures are logged under.
type Source struct {
	Name    string
	Sampler sample.Sampler
}

// Stats counts what the loop did; safe to read from another goroutine (for metrics).
type Stats struct {
	Sent         atomic.Uint64 // reports that at least one collector took (the sender gave no error, or a *FanoutError with Delivered > 0)
	SendErrors   atomic.Uint64 // failed sends (collector unreachable, no route), one per collector that failed
	SampleErrors atomic.Uint64 // sampler failures, each sampler counted once per interval
	Unsent       atomic.Uint64 // intervals with no report: capacity unknown or report invalid
}

// Agent is the probe loop. Fill the exported fields, then call Run once.
type Agent struct {
	BackendID string
	Key       []byte
	Interval  time.Duration
	// Jitter: each wait is Interval·(1 + Jitter·(2u−1)) with u from Rand, uniform in [0,1).
	Jitter    float64
	DrainFile string // drained while it exists; "" disables the file

	Sources []Source
	Health  HealthChecker // nil: no check, reported healthy
	Sender  Sender
	Clock   Clock
	Rand    func() float64
	Log     *slog.Logger
	// BootNonce identifies this run of the probe; set it from crypto/rand (NewBootNonce).
	BootNonce uint64
	// Stat reports whether a file exists; default os.Stat.
	Stat func(name string) (fs.FileInfo, error)

	// FastInterval is the pace after a failed health check (HAProxy's fastinter): the
	// collector needs several failed checks in a row, one per report, before it takes the
	// backend out, and at Interval those alone would take whole intervals. After a failure the
	// loop checks and reports every FastInterval, counted from the end of the last report so
	// that no two are closer even when one check is slow and the next quick, until FastRise
	// checks in a row have passed, so that a recovery reaches the collector's rise_threshold
	// as quickly. Load is still sampled every Interval; the reports between carry the last
	// sample (see tick). Zero, or not below Interval: off, every report waits Interval.
	FastInterval time.Duration
	// FastRise is the number of passing checks in a row that ends the fast pace; below 1
	// counts as 1.
	FastRise int

	// InFlight, when set, also counts the connections afresh for a report whose health check
	// timed out between two samples, so that the collector sees the load the late answer
	// queued behind. InFlightInterval, when > 0 and InFlight is set, sends an in-flight report
	// (report.SignalInFlight) this often between full reports: InFlight's connection count
	// now, with everything else as in the last full report. It feeds the controller's fast
	// loop (weighting.in_flight_period), which follows the queues at tens of hertz while
	// load is sampled every Interval. Each costs one connection count: a walk of the
	// kernel's TCP hash (docs/probe.md, "In-flight reports").
	InFlightInterval time.Duration
	InFlight         sample.Sampler
	// Recount, when set, counts the connections afresh for a report whose health check timed
	// out, in place of InFlight: exactly, ESTABLISHED only. The in-flight count also counts
	// CLOSE_WAIT (sample.StatesInFlight, as the kernel's running count does), and a hung
	// service never closes the connections its late health checks gave up on: counted, they
	// would make it look busy, and the collector would take it for slow instead of dead.
	Recount sample.Sampler

	Stats Stats

	seq       uint64
	drained   bool
	fileSeen  bool
	held      held
	last      report.Report // the last report built, for the leaving one
	haveLast  bool
	buf       []byte
	limiter   limiter
	failing   map[string]bool
	absent    map[string]bool // sources whose signal this machine does not offer, logged once
	memBound  string          // the last memory bound logged
	connsVia  string          // the last way of counting connections logged
	flightVia string          // the same for the in-flight reports' counts

	dueFull    time.Time // when the next sample is due: the start of the last one + nextWait
	dueFlight  time.Time // when the next in-flight report is due
	dueFast    time.Time // the end of the last tick + FastInterval: the next check at the fast pace
	fastLeft   int       // passing checks still to make at FastInterval; 0: normal pace
	paced      bool      // the last tick was made at the fast pace
	healthOK   bool      // the last check's result, for logging transitions
	healthSeen bool      // a check has been made
}

// Run samples and reports until ctx ends, then sends one report flagged leaving and returns
// nil. drain delivers operator requests (true: drain, false: undrain) that take effect at once,
// with an immediate report; it may be nil.
func (a *Agent) Run(ctx context.Context, drain <-chan bool) error {
	if err := a.check(); err != nil {
		return err
	}
	a.limiter = limiter{every: LogEvery, now: a.Clock.Now}
	a.failing = map[string]bool{}
	a.absent = map[string]bool{}
	a.fileSeen = a.drainFileExists()
	a.drained = a.fileSeen
	if a.drained {
		a.Log.Info("starting drained", "drain_file", a.DrainFile)
	}
	// Rates need two readings: take the first now, so the first report has them.
	var provided, unavailable sample.Field
	for _, s := range a.Sources {
		v, err := s.Sampler.Sample(ctx)
		a.noteUnavailable(s.Name, err)
		if p, ok := s.Sampler.(sample.Provider); ok {
			provided |= p.Provides()
		}
		unavailable |= v.Unavailable
	}
	a.Log.Info("sampling", "signals", provided&^unavailable, "unavailable", unavailable)
	a.dueFull = a.Clock.Now().Add(a.nextWait())
	a.dueFlight = a.Clock.Now().Add(a.InFlightInterval)
	for {
		w, flight := a.wait(), false
		if a.inFlightOn() && a.haveLast {
			if d := a.dueFlight.Sub(a.Clock.Now()); d < w {
				w, flight = max(d, 0), true
			}
		}
		timer := a.Clock.After(w)
		select {
		case <-ctx.Done():
			a.leave()
			return nil
		case d := <-drain:
			if d != a.drained {
				a.drained = d
				a.Log.Info("drain state changed", "drained", d, "by", "signal")
			}
			a.paced = a.fast()
			a.fullTick(ctx)
			a.dueFast = a.Clock.Now().Add(a.FastInterval)
		case <-timer:
			if flight {
				a.inFlightTick(ctx)
				continue
			}
			a.pollDrainFile()
			a.paced = a.fast()
			if a.paced && a.Clock.Now().Before(a.dueFull) {
				a.tick(ctx, false)
			} else {
				a.fullTick(ctx)
			}
			a.dueFast = a.Clock.Now().Add(a.FastInterval)
			a.dueFlight = a.Clock.Now().Add(a.InFlightInterval) // in-flight reports go between, not beside
		}
	}
}

// inFlightOn reports whether in-flight reports are configured.
func (a *Agent) inFlightOn() bool {
	return a.InFlightInterval > 0 && a.InFlight != nil && a.InFlightInterval < a.Interval
}

// inFlightTick counts the connections and sends them in an in-flight report: the last full
// report with the count, the drain flag as it is now, and SignalInFlight. A failed count
// sends nothing (the collector then keeps the backend's slow share; a count is never made
// up), and is logged at most once a LogEvery.
func (a *Agent) inFlightTick(ctx context.Context) {
	start := a.Clock.Now()
	a.dueFlight = start.Add(a.InFlightInterval)
	v, err := a.InFlight.Sample(ctx)
	if err != nil || v.Known&sample.FieldConns == 0 {
		a.Stats.SampleErrors.Add(1)
		a.logLimited("in_flight", "in-flight count failed; no in-flight report", "err", err)
		return
	}
	if v.ConnsVia != a.flightVia {
		// Once per change: how the in-flight count is taken (the namespace's running count,
		// or exact counts and why), e.g. when the calibration gave up on the running count.
		a.flightVia = v.ConnsVia
		a.Log.Info("in-flight connections counted", "via", v.ConnsVia)
	}
	r := a.last
	r.Conns = v.Conns
	r.Signals = r.Signals&^report.SignalConnsStale | report.SignalInFlight
	r.Flags &^= report.FlagDrain | report.FlagLeaving
	if a.drained {
		r.Flags |= report.FlagDrain
	}
	r.Time = a.Clock.Now()
	a.send(&r)
}

// fastOn reports whether the fast pace is configured.
func (a *Agent) fastOn() bool { return a.FastInterval > 0 && a.FastInterval < a.Interval }

// fast reports whether the next check is due at FastInterval.
func (a *Agent) fast() bool { return a.fastOn() && a.fastLeft > 0 }

// wait is how long the loop sleeps before the next tick. At the normal pace the next sample
// is due a jittered interval after the start of the last one, so a slow health check does
// not stretch the period the collector expects (Report.Interval). At the fast pace it is
// FastInterval from now, the end of the last tick. Leaving the fast pace, the wait is still
// at least FastInterval, so the reports never come closer than that.
//
// The fast pace is counted from dueFast, the end of the last tick, not from the moment wait
// is called: an in-flight report between two ticks (InFlightInterval shorter than
// FastInterval) must not push the next check back each time, or the checks would starve.
func (a *Agent) wait() time.Duration {
	now := a.Clock.Now()
	if a.fast() {
		return max(a.dueFast.Sub(now), 0)
	}
	w := a.dueFull.Sub(now)
	if a.paced {
		return max(w, a.dueFast.Sub(now), 0)
	}
	return max(w, 0)
}

func (a *Agent) check() error {
	var missing []string
	if a.Sender == nil {
		missing = append(missing, "Sender")
	}
	if a.Clock == nil {
		missing = append(missing, "Clock")
	}
	if a.Interval <= 0 {
		missing = append(missing, "Interval")
	}
	if len(missing) > 0 {
		return fmt.Errorf("agent: %v not set", missing)
	}
	if a.Rand == nil {
		a.Rand = func() float64 { return 0.5 }
	}
	if a.Log == nil {
		a.Log = slog.New(slog.DiscardHandler)
	}
	if a.Stat == nil {
		a.Stat = os.Stat
	}
	return nil
}

// nextWait is the jittered interval.
func (a *Agent) nextWait() time.Duration {
	f := 1 + a.Jitter*(2*a.Rand()-1)
	return time.Duration(float64(a.Interval) * f)
}

func (a *Agent) drainFileExists() bool {
	if a.DrainFile == "" {
		return false
	}
	_, err := a.Stat(a.DrainFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.logLimited("drain_file", "cannot check drain file", "drain_file", a.DrainFile, "err", err)
		return a.fileSeen
	}
	return err == nil
}

// pollDrainFile applies a change of the drain file. Only a change counts, so the most recent
// action wins: a signal overrides the file until the file is next created or removed.
func (a *Agent) pollDrainFile() {
	exists := a.drainFileExists()
	if exists == a.fileSeen {
		return
	}
	a.fileSeen = exists
	if exists != a.drained {
		a.drained = exists
		a.Log.Info("drain state changed", "drained", exists, "by", "drain_file", "drain_file", a.DrainFile)
	}
}

// fullTick samples, checks and reports, and schedules the next sample.
func (a *Agent) fullTick(ctx context.Context) {
	start := a.Clock.Now()
	a.tick(ctx, true)
	a.dueFull = start.Add(a.nextWait())
	a.dueFlight = a.Clock.Now().Add(a.InFlightInterval) // the next in-flight report one interval on
}

// noteHealth runs the fast pace's state and logs health transitions. A failure (re)starts the
// fast pace for FastRise passing checks; each passing check counts one off.
func (a *Agent) noteHealth(h health.Result) {
	if !h.OK {
		if a.healthOK || !a.healthSeen {
			a.logLimited("health", "health check failing", "err", h.Err, "status", h.Status, "fast_interval", a.FastInterval)
		}
		a.fastLeft = max(a.FastRise, 1)
	} else {
		if !a.healthOK && a.healthSeen {
			if n, ok := a.limiter.allow("health:up"); ok {
				a.Log.Info("health check passing again", "status", h.Status, "suppressed", n)
			}
		}
		a.fastLeft = max(a.fastLeft-1, 0)
	}
	a.healthOK, a.healthSeen = h.OK, true
}

// tick checks health and sends one report. With resample it runs the samplers first; without
// (a tick at the fast pace between two samples) the report carries the held values of the
// last sample: re-sampling at FastInterval would cost a /proc or cgroup read and a netlink
// dump per check, measure CPU and NIC rates over windows ten times shorter, and count
// StaleAfter in checks instead of intervals.
func (a *Agent) tick(ctx context.Context, resample bool) {
	var v sample.Values
	sources := a.Sources
	if !resample {
		sources = nil
	}
	for _, s := range sources {
		r, err := s.Sampler.Sample(ctx)
		v.Merge(r)
		switch {
		case a.noteUnavailable(s.Name, err):
		case err != nil && !errors.Is(err, sample.ErrFirstSample):
			a.Stats.SampleErrors.Add(1)
			a.failing[s.Name] = true
			a.logLimited("sampler:"+s.Name, "sampler failed", "sampler", s.Name, "err", err)
		case err == nil && a.failing[s.Name]:
			delete(a.failing, s.Name)
			a.Log.Info("sampler recovered", "sampler", s.Name)
		}
	}
	now := a.Clock.Now()
	r := report.Report{
		BackendID: a.BackendID,
		BootNonce: a.BootNonce,
		Interval:  a.Interval,
		Flags:     report.FlagHealthOK,
	}
	if a.Health != nil {
		h := a.Health.Check(ctx)
		if ctx.Err() != nil {
			return // stopping: a check cut short says nothing about the service
		}
		a.noteHealth(h)
		r.HealthStatus, r.HealthLatency, r.HealthError = h.Status, h.Latency, h.Err
		recount := a.Recount
		if recount == nil {
			recount = a.InFlight
		}
		if !h.OK && health.TimedOut(h.Err) && recount != nil {
			// A late answer: the collector tells busy from hung by the load this report
			// carries, so the connections are counted now rather than held from a sample, or
			// a count reused for conns_interval, that may predate the load (docs/weights.md,
			// "Busy is not dead").
			if c, err := recount.Sample(ctx); err == nil && c.Known&sample.FieldConns != 0 {
				// The way of the full count stays the one logged: a recount here is not a
				// change of how connections are counted.
				v.Merge(sample.Values{Known: sample.FieldConns, Conns: c.Conns, ConnsVia: cmp.Or(v.ConnsVia, a.connsVia)})
			}
		}
		if !h.OK {
			r.Flags = 0
		}
		if h.Status != 0 {
			// Only a check the service answered times the service: a refused connection
			// fails fast and a timeout is the timeout.
			v.Merge(sample.Values{Known: sample.FieldHealthLatency, HealthLatency: h.Latency})
		}
		now = a.Clock.Now()
	}
	if resample {
		a.logSignals(v)
	}
	a.held.signals(&v, resample)
	if a.drained {
		r.Flags |= report.FlagDrain
	}
	if !a.held.fill(&r, v, resample) {
		a.Stats.Unsent.Add(1)
		a.logLimited("capacity", "report not sent: CPU count or memory size never measured")
		return
	}
	a.fillSignals(&r, v)
	r.Time = now
	a.last, a.haveLast = r, true
	a.send(&r)
}

// leave sends the last report again, fresh in seq and time, flagged leaving.
func (a *Agent) leave() {
	if !a.haveLast {
		a.Log.Info("stopping before the first report; nothing to withdraw")
		return
	}
	r := a.last
	r.Flags |= report.FlagLeaving
	if a.drained {
		r.Flags |= report.FlagDrain
	} else {
		r.Flags &^= report.FlagDrain
	}
	r.Time = a.Clock.Now()
	a.send(&r)
	a.Log.Info("sent leaving report", "seq", r.Seq)
}

func (a *Agent) send(r *report.Report) {
	a.seq++ // also for reports that fail to go out (push protocol: replay rules)
	r.Seq = a.seq
	buf, err := r.AppendSeal(a.buf[:0], a.Key)
	if err != nil {
		a.Stats.Unsent.Add(1)
		a.logLimited("seal", "report invalid, not sent", "err", err)
		return
	}
	a.buf = buf
	if err := a.Sender.Send(buf); err != nil {
		a.sendFailed(r.Seq, err)
		return
	}
	a.Stats.Sent.Add(1)
	a.Log.Debug("report sent", "seq", r.Seq, "flags", uint16(r.Flags), "cpu_util", r.CPUUtil,
		"cpu_count", r.CPUCount, "mem_util", r.MemUtil, "conns", r.Conns, "health_status", r.HealthStatus)
}

// sendFailed counts and logs a failed send, each collector's failure of a *FanoutError on its
// own, rate-limited per collector: one collector that stays down neither hides another's
// failures nor is hidden by them.
func (a *Agent) sendFailed(seq uint64, err error) {
	failed := []error{err}
	var fe *FanoutError
	if errors.As(err, &fe) {
		if fe.Delivered > 0 {
			a.Stats.Sent.Add(1)
		}
		failed = failed[:0]
		for _, f := range fe.Failed {
			failed = append(failed, f)
		}
	}
	for _, e := range failed {
		a.Stats.SendErrors.Add(1)
		key, args := "send", []any{"seq", seq, "err", e}
		if se := (*SendError)(nil); errors.As(e, &se) {
			key, args = "send:"+se.Addr, append(args, "collector", se.Addr)
		}
		a.logLimited(key, "sending report failed", args...)
	}
}

// noteUnavailable logs, once per source, that its signal is not available on this machine (a
// kernel without PSI, a cgroup without the counters), and that it has become available when a
// later sample succeeds. It reports whether err was such an absence, which is not a failure.
func (a *Agent) noteUnavailable(source string, err error) bool {
	if errors.Is(err, sample.ErrUnavailable) {
		if !a.absent[source] {
			a.absent[source] = true
			a.Log.Info("signal not available; reported as absent", "sampler", source, "err", err)
		}
		return true
	}
	if a.absent[source] && (err == nil || errors.Is(err, sample.ErrFirstSample)) {
		delete(a.absent, source)
		a.Log.Info("signal available", "sampler", source)
	}
	return false
}

// logSignals logs the memory bound and the way connections are counted when they change and, at
// debug level, the sample's signals with the details the push protocol does not carry.
func (a *Agent) logSignals(v sample.Values) {
	if v.Has(sample.FieldMemBytes) && v.MemBound != a.memBound {
		a.memBound = v.MemBound
		a.Log.Info("memory bound", "mem_bound", v.MemBound, "mem_bytes", v.MemBytes)
	}
	if v.Has(sample.FieldConns) && v.ConnsVia != a.connsVia {
		a.connsVia = v.ConnsVia
		a.Log.Info("connections counted", "via", v.ConnsVia)
	}
	if !a.Log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	args := []any{"known", v.Known, "unavailable", v.Unavailable, "mem_bound", v.MemBound}
	if v.Has(sample.FieldCPUPressure) {
		args = append(args, "cpu_pressure", v.CPUPressure, "pressure_scope", v.PressureScope)
	}
	if v.Has(sample.FieldThrottled) {
		args = append(args, "cpu_throttled", v.Throttled, "throttled_time", v.ThrottledTime)
	}
	if v.Has(sample.FieldHealthLatency) {
		args = append(args, "health_latency", v.HealthLatency)
	}
	if v.Has(sample.FieldServiceCPU) {
		args = append(args, "service_cores", v.ServiceCores)
	}
	a.Log.Debug("sample", args...)
}

func (a *Agent) logLimited(key, msg string, args ...any) {
	if n, ok := a.limiter.allow(key); ok {
		if n > 0 {
			args = append(args, "suppressed", n)
		}
		a.Log.Warn(msg, args...)
	}
}
