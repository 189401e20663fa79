package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"flowweight/internal/health"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
	"flowweight/probe/sample"
)

var testKey = []byte("flowweight-test-key-0123456789ab")

// fakeSender hands datagrams to the test; fail makes the next sends fail.
type fakeSender struct {
	out  chan []byte
	mu   sync.Mutex
	fail int
}

func (s *fakeSender) Send(b []byte) error {
	s.mu.Lock()
	fail := s.fail > 0
	if fail {
		s.fail--
	}
	s.mu.Unlock()
	s.out <- bytes.Clone(b)
	if fail {
		return errors.New("connection refused")
	}
	return nil
}

// script is a sampler returning queued results, then repeating the last.
type script struct {
	mu      sync.Mutex
	results []result
}

type result struct {
	v   sample.Values
	err error
}

func (s *script) Sample(context.Context) (sample.Values, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.results[0]
	if len(s.results) > 1 {
		s.results = s.results[1:]
	}
	return r.v, r.err
}

func (s *script) set(rs ...result) {
	s.mu.Lock()
	s.results = rs
	s.mu.Unlock()
}

type fakeHealth struct{ r health.Result }

func (h fakeHealth) Check(context.Context) health.Result { return h.r }

var full = sample.Values{
	Known:   sample.FieldCPUUtil | sample.FieldCPUCount | sample.FieldMemUtil | sample.FieldMemBytes | sample.FieldConns,
	CPUUtil: 0.375, CPUCount: 2.5, MemUtil: 0.5, MemBytes: 4 << 30, Conns: 17,
}

type harness struct {
	t      *testing.T
	a      *Agent
	clk    *testutil.Clock
	snd    *fakeSender
	src    *script
	drain  chan bool
	cancel context.CancelFunc
	done   chan error
	logs   *bytes.Buffer
}

func start(t *testing.T, configure func(*Agent)) *harness {
	t.Helper()
	h := &harness{t: t, clk: testutil.NewClock(time.Date(2026, 11, 30, 21, 0, 0, 0, time.UTC)), snd: &fakeSender{out: make(chan []byte, 100)},
		src: &script{results: []result{{full, nil}}}, drain: make(chan bool), done: make(chan error, 1), logs: &bytes.Buffer{}}
	h.a = &Agent{
		BackendID: "web-1", Key: testKey, Interval: 5 * time.Second, Jitter: 0.1,
		Sources: []Source{{"fake", h.src}},
		Sender:  h.snd, Clock: h.clk, Rand: func() float64 { return 0.5 },
		Log:       slog.New(slog.NewTextHandler(&syncWriter{w: h.logs}, nil)),
		BootNonce: 0x5eed,
	}
	if configure != nil {
		configure(h.a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.a.Run(ctx, h.drain) }()
	t.Cleanup(func() {
		cancel()
		<-h.done
	})
	return h
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (h *harness) logText() string {
	return h.logs.String() // read only after the agent stopped or is blocked
}

// tick lets one interval pass and returns the report sent for it.
func (h *harness) tick() report.Report {
	h.t.Helper()
	d := <-h.clk.Started()
	h.clk.Advance(d)
	return h.recv()
}

func (h *harness) recv() report.Report {
	h.t.Helper()
	b := <-h.snd.out
	var r report.Report
	if err := report.Open(b, func(string) ([]byte, bool) { return testKey, true }, &r); err != nil {
		h.t.Fatalf("open: %v", err)
	}
	return r
}

func (h *harness) stop() report.Report {
	h.t.Helper()
	<-h.clk.Started()
	h.cancel()
	r := h.recv()
	if err := <-h.done; err != nil {
		h.t.Fatal(err)
	}
	h.done <- nil // for Cleanup
	return r
}

func TestReportsEveryInterval(t *testing.T) {
	h := start(t, func(a *Agent) {
		a.Health = fakeHealth{health.Result{OK: true, Status: 200, Latency: 1500 * time.Microsecond}}
	})
	t0 := h.clk.Now()
	for seq := uint64(1); seq <= 3; seq++ {
		r := h.tick()
		want := report.Report{
			BackendID: "web-1", BootNonce: 0x5eed, Seq: seq, Time: t0.Add(time.Duration(seq) * 5 * time.Second),
			Interval: 5 * time.Second, Flags: report.FlagHealthOK,
			CPUUtil: 0.375, CPUCount: 2.5, MemUtil: 0.5, MemBytes: 4 << 30, Conns: 17,
			HealthLatency: 1500 * time.Microsecond, HealthStatus: 200,
			Version: report.Version2, Signals: report.SignalHealthLatency,
		}
		if !r.Time.Equal(want.Time) {
			t.Errorf("seq %d: time %v, want %v", seq, r.Time, want.Time)
		}
		r.Time = want.Time
		if r != want {
			t.Errorf("seq %d:\n got %+v\nwant %+v", seq, r, want)
		}
	}
	last := h.stop()
	if last.Seq != 4 || last.Flags != report.FlagHealthOK|report.FlagLeaving || last.CPUUtil != 0.375 {
		t.Errorf("leaving report %+v", last)
	}
	if h.a.Stats.Sent.Load() != 4 {
		t.Errorf("stats sent %d", h.a.Stats.Sent.Load())
	}
}

func TestJitter(t *testing.T) {
	tests := []struct {
		u    float64
		want time.Duration
	}{
		{0, 4500 * time.Millisecond},
		{0.5, 5 * time.Second},
		{0.75, 5250 * time.Millisecond},
	}
	for _, tt := range tests {
		a := &Agent{Interval: 5 * time.Second, Jitter: 0.1, Rand: func() float64 { return tt.u }}
		if got := a.nextWait(); got != tt.want {
			t.Errorf("u=%v: wait %v, want %v", tt.u, got, tt.want)
		}
	}
	// The loop asks the clock for exactly that wait.
	h := start(t, func(a *Agent) { a.Rand = func() float64 { return 0 } })
	if d := <-h.clk.Started(); d != 4500*time.Millisecond {
		t.Errorf("loop waited %v", d)
	}
	h.clk.Advance(4500 * time.Millisecond)
	h.recv()
}

// slowHealth takes d of the fake clock's time.
type slowHealth struct {
	clk *testutil.Clock
	d   time.Duration
}

func (h slowHealth) Check(context.Context) health.Result {
	h.clk.Advance(h.d)
	return health.Result{OK: true, Status: 200, Latency: h.d}
}

// Time spent in a tick comes off the next wait, so reports keep the configured period.
func TestSlowTickKeepsPeriod(t *testing.T) {
	var clk *testutil.Clock
	h := start(t, func(a *Agent) {
		clk = a.Clock.(*testutil.Clock)
		a.Health = slowHealth{clk, 1500 * time.Millisecond}
	})
	if d := <-h.clk.Started(); d != 5*time.Second {
		t.Fatalf("first wait %v", d)
	}
	h.clk.Advance(5 * time.Second)
	r1 := h.recv()
	if d := <-h.clk.Started(); d != 3500*time.Millisecond {
		t.Errorf("wait after a 1.5 s tick: %v, want 3.5 s", d)
	}
	h.clk.Advance(3500 * time.Millisecond)
	if r2 := h.recv(); r2.Time.Sub(r1.Time) != 5*time.Second {
		t.Errorf("reports %v apart", r2.Time.Sub(r1.Time))
	}
}

func TestDrainSignals(t *testing.T) {
	h := start(t, nil)
	if r := h.tick(); r.Flags != report.FlagHealthOK {
		t.Fatalf("flags %v", r.Flags)
	}
	<-h.clk.Started()
	h.drain <- true // at once, without waiting for the interval
	if r := h.recv(); r.Flags != report.FlagHealthOK|report.FlagDrain || r.Seq != 2 {
		t.Errorf("after drain: %+v", r)
	}
	if r := h.tick(); r.Flags&report.FlagDrain == 0 {
		t.Errorf("drain did not stick: %+v", r)
	}
	<-h.clk.Started()
	h.drain <- false
	if r := h.recv(); r.Flags != report.FlagHealthOK {
		t.Errorf("after undrain: %+v", r)
	}
	<-h.clk.Started()
	h.drain <- true
	h.recv()
	if r := h.stop(); r.Flags != report.FlagHealthOK|report.FlagDrain|report.FlagLeaving {
		t.Errorf("leaving while drained: %+v", r)
	}
}

func TestDrainFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "drain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(a *Agent) { a.DrainFile = file })
	if r := h.tick(); r.Flags&report.FlagDrain == 0 {
		t.Errorf("file present at start: %+v", r)
	}
	os.Remove(file)
	if r := h.tick(); r.Flags&report.FlagDrain != 0 {
		t.Errorf("file removed: %+v", r)
	}
	os.WriteFile(file, nil, 0o644)
	if r := h.tick(); r.Flags&report.FlagDrain == 0 {
		t.Errorf("file created: %+v", r)
	}
	// The latest action wins: a signal overrides the file until the file changes again.
	<-h.clk.Started()
	h.drain <- false
	if r := h.recv(); r.Flags&report.FlagDrain != 0 {
		t.Errorf("undrain signal with file present: %+v", r)
	}
	if r := h.tick(); r.Flags&report.FlagDrain != 0 {
		t.Errorf("unchanged file re-drained: %+v", r)
	}
	os.Remove(file)
	os.WriteFile(file, nil, 0o644) // removed and recreated within one interval: no change seen
	if r := h.tick(); r.Flags&report.FlagDrain != 0 {
		t.Errorf("recreated file: %+v", r)
	}
}

func TestSendErrorsDoNotStopTheLoop(t *testing.T) {
	h := start(t, nil)
	h.snd.mu.Lock()
	h.snd.fail = 3
	h.snd.mu.Unlock()
	for seq := uint64(1); seq <= 4; seq++ {
		if r := h.tick(); r.Seq != seq {
			t.Errorf("seq %d, want %d (failed sends still use a seq)", r.Seq, seq)
		}
	}
	h.stop()
	if s, e := h.a.Stats.Sent.Load(), h.a.Stats.SendErrors.Load(); s != 2 || e != 3 {
		t.Errorf("sent %d errors %d, want 2 and 3", s, e)
	}
	// Three failures within a minute: logged once.
	if n := strings.Count(h.logText(), "sending report failed"); n != 1 {
		t.Errorf("%d log lines for 3 failures in 15 s:\n%s", n, h.logText())
	}
}

func TestSamplerFailures(t *testing.T) {
	other := &script{results: []result{{sample.Values{Known: sample.FieldNetUtil, NetUtil: 0.25}, nil}}}
	h := start(t, func(a *Agent) { a.Sources = append(a.Sources, Source{"nic", other}) })
	if r := h.tick(); r.CPUUtil != 0.375 || r.NetUtil != 0.25 {
		t.Fatalf("%+v", r)
	}
	// The first sampler now measures only the capacities; its utilisations are held for
	// StaleAfter intervals, then reported as fully used. The other sampler is unaffected.
	boom := errors.New("cpuacct.usage: no such file")
	h.src.set(result{sample.Values{Known: sample.FieldCPUCount | sample.FieldMemBytes, CPUCount: 2.5, MemBytes: 4 << 30}, boom})
	for i := 1; i <= StaleAfter; i++ {
		if r := h.tick(); r.CPUUtil != 0.375 || r.MemUtil != 0.5 || r.Conns != 17 || r.NetUtil != 0.25 || r.Signals&report.SignalConnsStale != 0 {
			t.Errorf("interval %d after failure: %+v", i, r)
		}
	}
	// The 0 sent for a count too old is marked as not a count (a drain must not read it as
	// no connections).
	if r := h.tick(); r.CPUUtil != 1 || r.MemUtil != 1 || r.Conns != 0 || r.Signals&report.SignalConnsStale == 0 || r.NetUtil != 0.25 || r.CPUCount != 2.5 {
		t.Errorf("stale: %+v", r)
	}
	h.src.set(result{full, nil})
	if r := h.tick(); r.CPUUtil != 0.375 || r.MemUtil != 0.5 || r.Signals&report.SignalConnsStale != 0 {
		t.Errorf("recovered: %+v", r)
	}
	h.stop()
	if n := h.a.Stats.SampleErrors.Load(); n != StaleAfter+1 {
		t.Errorf("sample errors %d", n)
	}
	logs := h.logText()
	if strings.Count(logs, "sampler failed") != 1 || !strings.Contains(logs, "sampler=fake") || !strings.Contains(logs, "sampler recovered") {
		t.Errorf("logs:\n%s", logs)
	}
}

func TestNoReportWithoutCapacity(t *testing.T) {
	h := start(t, func(a *Agent) {
		a.Sources = []Source{{"fake", &script{results: []result{{sample.Values{Known: sample.FieldCPUUtil, CPUUtil: 0.5}, nil}}}}}
	})
	<-h.clk.Started()
	h.clk.Advance(5 * time.Second)
	<-h.clk.Started() // the loop came round without sending
	h.cancel()
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	h.done <- nil
	if len(h.snd.out) != 0 || h.a.Stats.Unsent.Load() != 1 {
		t.Errorf("%d datagrams, %d unsent", len(h.snd.out), h.a.Stats.Unsent.Load())
	}
}

func TestUnhealthy(t *testing.T) {
	h := start(t, func(a *Agent) {
		a.Health = fakeHealth{health.Result{Status: 503, Latency: 2 * time.Second, Err: "GET /healthz: 503 Service Unavailable"}}
	})
	r := h.tick()
	if r.Flags != 0 || r.HealthStatus != 503 || r.HealthError != "GET /healthz: 503 Service Unavailable" || r.HealthLatency != 2*time.Second {
		t.Errorf("%+v", r)
	}
}

func TestLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	l := limiter{every: time.Minute, now: func() time.Time { return now }}
	steps := []struct {
		at         time.Duration
		key        string
		ok         bool
		suppressed int
	}{
		{0, "a", true, 0},
		{10 * time.Second, "a", false, 0},
		{20 * time.Second, "b", true, 0},
		{30 * time.Second, "a", false, 0},
		{60 * time.Second, "a", true, 2},
		{61 * time.Second, "a", false, 0},
	}
	for _, s := range steps {
		now = time.Unix(0, 0).Add(s.at)
		n, ok := l.allow(s.key)
		if ok != s.ok || n != s.suppressed {
			t.Errorf("at %v key %s: %d %v, want %d %v", s.at, s.key, n, ok, s.suppressed, s.ok)
		}
	}
}

func TestRunRefusesIncompleteAgent(t *testing.T) {
	err := (&Agent{}).Run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "Sender") || !strings.Contains(err.Error(), "Clock") {
		t.Errorf("error %v", err)
	}
}

// A signal the machine does not offer is logged once, is not a sampler failure, and its
// return is logged.
func TestUnavailableSignal(t *testing.T) {
	absent := fmt.Errorf("cpu pressure: %w: open /proc/pressure/cpu: no such file or directory", sample.ErrUnavailable)
	psi := &script{results: []result{{sample.Values{Unavailable: sample.FieldCPUPressure}, absent}}}
	h := start(t, func(a *Agent) { a.Sources = append(a.Sources, Source{"cpu_pressure", psi}) })
	for range 3 {
		if r := h.tick(); r.CPUUtil != 0.375 {
			t.Fatalf("%+v", r)
		}
	}
	if v := h.a.held.v; v.Has(sample.FieldCPUPressure) || v.Unavailable != sample.FieldCPUPressure {
		t.Errorf("sample %+v: want cpu pressure absent and marked unavailable", v)
	}
	psi.set(result{sample.Values{Known: sample.FieldCPUPressure, CPUPressure: 0.25, PressureScope: sample.ScopeHost}, nil})
	h.tick()
	h.stop()
	if v := h.a.held.v; !v.Has(sample.FieldCPUPressure) || v.CPUPressure != 0.25 || v.Unavailable != 0 {
		t.Errorf("sample after recovery %+v", v)
	}
	if n := h.a.Stats.SampleErrors.Load(); n != 0 {
		t.Errorf("%d sample errors, want 0: absence is not a failure", n)
	}
	logs := h.logText()
	if strings.Count(logs, "reported as absent") != 1 || !strings.Contains(logs, "sampler=cpu_pressure") ||
		!strings.Contains(logs, "unavailable=cpu_pressure") || strings.Count(logs, "signal available") != 1 {
		t.Errorf("logs:\n%s", logs)
	}
}

// The health check's latency is a signal of the sample when the service answered.
func TestHealthLatencySignal(t *testing.T) {
	tests := []struct {
		name string
		r    health.Result
		want bool
	}{
		{"answered", health.Result{OK: true, Status: 200, Latency: 1500 * time.Microsecond}, true},
		{"answered 503", health.Result{Status: 503, Latency: 2 * time.Millisecond, Err: "status 503"}, true},
		{"refused", health.Result{Latency: 50 * time.Microsecond, Err: "connection refused"}, false},
	}
	for _, tt := range tests {
		h := start(t, func(a *Agent) { a.Health = fakeHealth{tt.r} })
		h.tick()
		h.stop()
		v := h.a.held.v
		if v.Has(sample.FieldHealthLatency) != tt.want || (tt.want && v.HealthLatency != tt.r.Latency) {
			t.Errorf("%s: sample %+v", tt.name, v)
		}
	}
}

// The version-2 signals measured this interval travel with their bits; the others are absent,
// never 0 with a bit, and an impossible value is dropped rather than costing the report.
func TestReportSignals(t *testing.T) {
	with := func(mod func(v *sample.Values)) sample.Values {
		v := full // CPUCount 2.5
		mod(&v)
		return v
	}
	answered := health.Result{OK: true, Status: 200, Latency: 3 * time.Millisecond}
	tests := []struct {
		name      string
		v         sample.Values
		health    health.Result // zero: no checker
		want      report.Signals
		pressure  float64
		throttled float64
		service   float64
		latency   time.Duration
	}{
		{name: "nothing but the load", v: full},
		{name: "host pressure", v: with(func(v *sample.Values) {
			v.Known |= sample.FieldCPUPressure
			v.CPUPressure, v.PressureScope = 0.4, sample.ScopeHost
		}), want: report.SignalCPUPressure, pressure: 0.4},
		{name: "cgroup pressure and throttling", v: with(func(v *sample.Values) {
			v.Known |= sample.FieldCPUPressure | sample.FieldThrottled
			v.CPUPressure, v.PressureScope, v.Throttled = 0.125, sample.ScopeCgroup, 0.5
		}), want: report.SignalCPUPressure | report.SignalPressureCgroup | report.SignalThrottled, pressure: 0.125, throttled: 0.5},
		{name: "measured zero pressure is present", v: with(func(v *sample.Values) {
			v.Known |= sample.FieldCPUPressure
			v.PressureScope = sample.ScopeHost
		}), want: report.SignalCPUPressure},
		{name: "a value without its Known bit stays absent", v: with(func(v *sample.Values) {
			v.CPUPressure, v.PressureScope, v.Throttled, v.ServiceCores = 0.9, sample.ScopeCgroup, 0.9, 1
		})},
		{name: "service cpu is a fraction of the cpu count", v: with(func(v *sample.Values) {
			v.Known |= sample.FieldServiceCPU
			v.ServiceCores = 0.5
		}), want: report.SignalServiceCPU, service: 0.2},
		{name: "service cpu above the cpu count is clamped", v: with(func(v *sample.Values) {
			v.Known |= sample.FieldServiceCPU
			v.ServiceCores = 4
		}), want: report.SignalServiceCPU, service: 1},
		{name: "an idle service is a measured 0", v: with(func(v *sample.Values) {
			v.Known |= sample.FieldServiceCPU
		}), want: report.SignalServiceCPU},
		{name: "answered health check", v: full, health: answered, want: report.SignalHealthLatency, latency: 3 * time.Millisecond},
		{name: "refused health check keeps its latency, not the signal", v: full,
			health: health.Result{Latency: 40 * time.Microsecond, Err: "connection refused"}, latency: 40 * time.Microsecond},
		{name: "out-of-range values are dropped", v: with(func(v *sample.Values) {
			v.Known |= sample.FieldThrottled | sample.FieldCPUPressure | sample.FieldServiceCPU
			v.Throttled, v.CPUPressure, v.PressureScope, v.ServiceCores = 1.5, 0.25, sample.ScopeHost, -1
		}), want: report.SignalCPUPressure, pressure: 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, func(a *Agent) {
				a.Sources = []Source{{"fake", &script{results: []result{{tt.v, nil}}}}}
				if tt.health != (health.Result{}) {
					a.Health = fakeHealth{tt.health}
				}
			})
			r := h.tick()
			if r.Version != report.Version2 || r.Signals != tt.want || r.CPUPressure != tt.pressure ||
				r.Throttled != tt.throttled || r.ServiceCPU != tt.service || r.HealthLatency != tt.latency {
				t.Errorf("report version %d signals %s pressure %v throttled %v service %v latency %v,\nwant version 2 signals %s pressure %v throttled %v service %v latency %v",
					r.Version, r.Signals, r.CPUPressure, r.Throttled, r.ServiceCPU, r.HealthLatency,
					tt.want, tt.pressure, tt.throttled, tt.service, tt.latency)
			}
			if r.CPUUtil != 0.375 {
				t.Errorf("cpu_util %v: the load must travel whatever the signals", r.CPUUtil)
			}
		})
	}
}

// The service's CPU is a fraction of the CPU count the report carries, also when that count
// is held from an earlier interval because its sampler failed now.
func TestServiceCPUWithHeldCount(t *testing.T) {
	svc := &script{results: []result{{sample.Values{}, fmt.Errorf("service cpu: %w", sample.ErrFirstSample)}}}
	h := start(t, func(a *Agent) { a.Sources = append(a.Sources, Source{"service_cpu", svc}) })
	if r := h.tick(); r.Signals&report.SignalServiceCPU != 0 {
		t.Fatalf("first reading: signals %s, want no service_cpu", r.Signals)
	}
	h.src.set(result{sample.Values{}, errors.New("cgroup cpu: gone")})
	svc.set(result{sample.Values{Known: sample.FieldServiceCPU, ServiceCores: 1.25}, nil})
	r := h.tick()
	if r.CPUCount != 2.5 || r.Signals&report.SignalServiceCPU == 0 || r.ServiceCPU != 0.5 {
		t.Errorf("cpu_count %v signals %s service_cpu %v, want 2.5 (held), service_cpu 0.5", r.CPUCount, r.Signals, r.ServiceCPU)
	}
	unavailable := fmt.Errorf("service cpu: %w: pidfile /run/web.pid names PID 7, which is not running (stale pidfile)", sample.ErrUnavailable)
	svc.set(result{sample.Values{Unavailable: sample.FieldServiceCPU}, unavailable})
	h.tick()
	if r := h.tick(); r.Signals&report.SignalServiceCPU != 0 || r.ServiceCPU != 0 {
		t.Errorf("stale pidfile: signals %s service_cpu %v, want it absent", r.Signals, r.ServiceCPU)
	}
	h.stop()
	if logs := h.logText(); strings.Count(logs, "stale pidfile") != 1 {
		t.Errorf("the stale pidfile is logged %d times, want once:\n%s", strings.Count(logs, "stale pidfile"), logs)
	}
}

// The memory bound is logged when first known and when it changes, not every interval.
func TestMemBoundLogged(t *testing.T) {
	bound := full
	bound.MemBound = sample.MemBoundAncestor + "/sys/fs/cgroup/memory/lab"
	h := start(t, func(a *Agent) { a.Sources = []Source{{"fake", &script{results: []result{{bound, nil}}}}} })
	h.tick()
	h.tick()
	h.stop()
	logs := h.logText()
	if strings.Count(logs, "memory bound") != 1 || !strings.Contains(logs, "mem_bound=ancestor:/sys/fs/cgroup/memory/lab") {
		t.Errorf("logs:\n%s", logs)
	}
}

// healthScript is a health checker that plays results in order, repeating the last, and takes
// each step's time off the fake clock.
type healthScript struct {
	clk   *testutil.Clock
	mu    sync.Mutex
	steps []healthStep
}

type healthStep struct {
	ok   bool
	took time.Duration
}

func (h *healthScript) Check(context.Context) health.Result {
	h.mu.Lock()
	s := h.steps[0]
	if len(h.steps) > 1 {
		h.steps = h.steps[1:]
	}
	h.mu.Unlock()
	h.clk.Advance(s.took)
	if s.ok {
		return health.Result{OK: true, Status: 200, Latency: s.took}
	}
	return health.Result{Latency: s.took, Err: "GET http://127.0.0.1/healthz: connection refused"}
}

func (h *healthScript) set(steps ...healthStep) {
	h.mu.Lock()
	h.steps = steps
	h.mu.Unlock()
}

// counting counts the samples taken.
type counting struct {
	sample.Sampler
	mu sync.Mutex
	n  int
}

func (c *counting) Sample(ctx context.Context) (sample.Values, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Sampler.Sample(ctx)
}

func (c *counting) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

var (
	up   = healthStep{ok: true}
	down = healthStep{}
)

// fastHarness is a probe at a 1 s interval without jitter, 100 ms fast_interval, fast_rise 3,
// with a scripted health check and a sampler that counts its calls.
func fastHarness(t *testing.T, steps ...healthStep) (*harness, *healthScript, *counting) {
	t.Helper()
	hs := &healthScript{steps: steps}
	cnt := &counting{}
	h := start(t, func(a *Agent) {
		hs.clk = a.Clock.(*testutil.Clock)
		cnt.Sampler = a.Sources[0].Sampler
		a.Sources[0].Sampler = cnt
		a.Interval, a.Jitter = time.Second, 0
		a.FastInterval, a.FastRise = 100*time.Millisecond, 3
		a.Health = hs
	})
	return h, hs, cnt
}

// step lets the loop's next wait pass and returns the wait and the report sent.
func (h *harness) step() (time.Duration, report.Report) {
	h.t.Helper()
	d := <-h.clk.Started()
	h.clk.Advance(d)
	return d, h.recv()
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// The pace through a failure and a recovery: each row is one report, the wait before it and
// whether it says healthy. The failing check's report goes out in the tick that made it, the
// next ones every fast_interval until fast_rise checks in a row have passed, then the normal
// interval resumes counted from the last sample.
func TestFastPaceThroughFailureAndRecovery(t *testing.T) {
	h, _, cnt := fastHarness(t, up, up, down, down, down, down, up, up, up, up, up)
	t0 := h.clk.Now()
	want := []struct {
		wait    time.Duration
		ok      bool
		sampled bool // the samplers ran for this report
	}{
		{ms(1000), true, true},
		{ms(1000), true, true},
		{ms(1000), false, true}, // the first failed check, reported at once
		{ms(100), false, false},
		{ms(100), false, false}, // the collector's third failure, 200 ms after the first
		{ms(100), false, false},
		{ms(100), true, false}, // recovery: the first passing check
		{ms(100), true, false},
		{ms(100), true, false}, // fast_rise passes in a row: the fast pace ends
		{ms(400), true, true},  // 1 s after the sample at 3 s
		{ms(1000), true, true},
	}
	at := t0
	samples := 1 // the first reading, before the loop
	for i, w := range want {
		d, r := h.step()
		at = at.Add(d)
		if d != w.wait {
			t.Errorf("report %d: waited %v, want %v", i, d, w.wait)
		}
		if !r.Time.Equal(at) {
			t.Errorf("report %d: time %v, want %v (sent when checked)", i, r.Time.Sub(t0), at.Sub(t0))
		}
		if got := r.Flags&report.FlagHealthOK != 0; got != w.ok {
			t.Errorf("report %d: healthy %v, want %v", i, got, w.ok)
		}
		if r.Seq != uint64(i+1) || r.Interval != time.Second || r.CPUUtil != 0.375 || r.Conns != 17 {
			t.Errorf("report %d: %+v (want seq %d, the normal interval and the last load)", i, r, i+1)
		}
		n := cnt.count()
		if sampled := n > samples; sampled != w.sampled {
			t.Errorf("report %d: sampled %v, want %v", i, sampled, w.sampled)
		}
		samples = n
	}
}

// A service that stays down is checked and reported every fast_interval, and its load is
// still sampled every interval, not every check.
func TestFastPaceWhileDownSamplesEveryInterval(t *testing.T) {
	h, _, cnt := fastHarness(t, down)
	t0 := h.clk.Now()
	var times []time.Duration
	for range 31 {
		_, r := h.step()
		times = append(times, r.Time.Sub(t0))
	}
	// The first check at 1 s fails; the next 30 follow every 100 ms, to 4 s.
	for i, got := range times {
		if want := ms(1000 + 100*i); got != want {
			t.Errorf("report %d at %v, want %v", i, got, want)
		}
	}
	// The first reading before the loop, then samples at 1, 2, 3 and 4 s.
	if n := cnt.count(); n != 5 {
		t.Errorf("%d samples over 3 s of fast checks, want 5", n)
	}
}

// Held values age per sample, not per fast check: with the CPU sampler failing while the
// service is down, 25 fast reports still carry the held utilisation (StaleAfter is 3).
func TestFastPaceDoesNotAgeHeldValues(t *testing.T) {
	h, _, _ := fastHarness(t, up, down)
	h.step()
	h.src.set(result{sample.Values{Known: sample.FieldCPUCount | sample.FieldMemBytes, CPUCount: 2.5, MemBytes: 4 << 30},
		errors.New("cpuacct.usage: no such file")})
	for i := range 25 { // 2 s: two failed samples, fewer than StaleAfter
		if _, r := h.step(); r.CPUUtil != 0.375 || r.MemUtil != 0.5 {
			t.Fatalf("report %d: %+v, want the held utilisations", i, r)
		}
	}
}

// Reports between samples repeat the last sample's signals, as they repeat its utilisations;
// a signal the last sample lacked stays absent. Without them each fast report restarted the
// collector's averages and, lacking the service's CPU, sent the headroom pool back to 1/AL.
func TestFastPaceRepeatsSignals(t *testing.T) {
	withSignals := full
	withSignals.Known |= sample.FieldServiceCPU | sample.FieldCPUPressure
	withSignals.ServiceCores, withSignals.CPUPressure, withSignals.PressureScope = 0.5, 0.25, sample.ScopeHost
	h, _, cnt := fastHarness(t, up, down)
	h.src.set(result{withSignals, nil})
	h.step() // 1 s: healthy, sampled
	want := report.SignalServiceCPU | report.SignalCPUPressure
	for i := range 11 { // 2 s: the failing check, sampled; then the fast pace to 3 s
		if i == 10 {
			h.src.set(result{full, nil}) // the sample at 3 s has no signals
		}
		n := cnt.count()
		_, r := h.step()
		if sampled := cnt.count() > n; i < 10 && (i == 0) != sampled {
			t.Fatalf("report %d: sampled %v; the script's pace changed", i, sampled)
		}
		got := r.Signals & want
		switch {
		case i < 10 && (got != want || r.ServiceCPU != 0.2 || r.CPUPressure != 0.25):
			t.Errorf("report %d: signals %v, service %v, pressure %v; want the last sample's (%v, 0.2, 0.25)", i, got, r.ServiceCPU, r.CPUPressure, want)
		case i == 10 && got != 0:
			t.Errorf("report %d, after a sample without signals: signals %v, want none", i, got)
		}
	}
	if _, r := h.step(); r.Signals&want != 0 { // fast, after the sample without
		t.Errorf("fast report after a sample without signals: %v, want none", r.Signals&want)
	}
}

// A service flapping on every check keeps the fast pace and never goes faster: reports are
// fast_interval apart, also when a slow check is followed by a quick one.
func TestFastPaceFlappingIsBounded(t *testing.T) {
	tests := []struct {
		name  string
		steps []healthStep
	}{
		{"instant checks", []healthStep{down, up}},
		{"slow then quick", []healthStep{{took: ms(90)}, {ok: true}, {took: ms(60)}, {ok: true, took: ms(5)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps []healthStep
			for range 20 {
				steps = append(steps, tt.steps...)
			}
			h, _, _ := fastHarness(t, append([]healthStep{up}, steps...)...)
			_, prev := h.step()
			for i := range len(steps) - 1 {
				d, r := h.step()
				if gap := r.Time.Sub(prev.Time); gap < ms(100) {
					t.Errorf("report %d: %v after the one before, less than fast_interval", i, gap)
				}
				if i > 0 && d != ms(100) {
					t.Errorf("report %d: waited %v while flapping, want fast_interval", i, d)
				}
				prev = r
			}
		})
	}
}

// With a healthy service the fast pace never starts: the cadence is the interval.
func TestHealthyKeepsInterval(t *testing.T) {
	h, _, cnt := fastHarness(t, up)
	for i := range 5 {
		if d, r := h.step(); d != time.Second || r.Flags != report.FlagHealthOK {
			t.Errorf("report %d: waited %v, flags %v", i, d, r.Flags)
		}
	}
	if n := cnt.count(); n != 6 {
		t.Errorf("%d samples for 5 reports, want 6 with the first reading", n)
	}
}

// fast_interval not below interval, or unset, switches the fast pace off.
func TestFastPaceOff(t *testing.T) {
	for _, fast := range []time.Duration{0, time.Second} {
		hs := &healthScript{steps: []healthStep{down}}
		h := start(t, func(a *Agent) {
			hs.clk = a.Clock.(*testutil.Clock)
			a.Interval, a.Jitter, a.FastInterval, a.FastRise, a.Health = time.Second, 0, fast, 3, hs
		})
		for i := range 3 {
			if d, r := h.step(); d != time.Second || r.Flags&report.FlagHealthOK != 0 {
				t.Errorf("fast_interval %v, report %d: waited %v, flags %v", fast, i, d, r.Flags)
			}
		}
	}
}

// A failure and a recovery are each logged once, however fast the checks come.
func TestHealthTransitionsLogged(t *testing.T) {
	h, _, _ := fastHarness(t, up, down, down, down, up, up, up)
	for range 7 {
		h.step()
	}
	h.stop()
	logs := h.logText()
	if strings.Count(logs, "health check failing") != 1 || strings.Count(logs, "health check passing again") != 1 ||
		!strings.Contains(logs, "connection refused") {
		t.Errorf("logs:\n%s", logs)
	}
}

// Leaving the fast pace just before a sample is due, the wait is still fast_interval: the
// last fast check ends at 2.95 s, the sample is due at 3 s, and it waits until 3.05 s.
func TestLeavingFastPaceKeepsGap(t *testing.T) {
	steps := []healthStep{up, down}
	for range 6 {
		steps = append(steps, down)
	}
	steps = append(steps, up, up, healthStep{ok: true, took: ms(50)}, up)
	h, _, _ := fastHarness(t, steps...)
	t0 := h.clk.Now()
	var last report.Report
	for range len(steps) - 1 {
		_, last = h.step()
	}
	if at := last.Time.Sub(t0); at != ms(2950) {
		t.Fatalf("last fast report at %v, want 2.95s", at)
	}
	if d, r := h.step(); d != ms(100) || r.Time.Sub(last.Time) != ms(100) {
		t.Errorf("waited %v, report %v after the last fast one; want 100ms", d, r.Time.Sub(last.Time))
	}
}
