package balancer

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowweight/collector"
	"flowweight/collector/push"
	"flowweight/controller/config"
	"flowweight/controller/state"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
	"flowweight/weights"
)

// stateRig builds balancers that share one configuration directory and one state file, as
// successive runs of the controller on one host would.
type stateRig struct {
	t     *testing.T
	clk   *testutil.Clock
	path  string
	key   string
	log   bytes.Buffer
	m     *Metrics
	extra string
}

func newStateRig(t *testing.T) *stateRig {
	r := &stateRig{t: t, clk: testutil.NewClock(time.Unix(1e9, 0)), path: filepath.Join(t.TempDir(), "controller.state")}
	r.key = testConfig(t, "").Collector.KeyFile
	return r
}

// cfg is testConfig's service with the given backends (names a..d at 10.0.0.1..4).
func (r *stateRig) cfg(backends ...string) *config.Config {
	c := testConfig(r.t, r.extra)
	c.Collector.KeyFile = r.key
	c.Services[0].Backends = nil
	for _, n := range backends {
		c.Services[0].Backends = append(c.Services[0].Backends, config.Backend{Name: n, IP: "10.0.0." + string(rune('1'+n[0]-'a')),
			Port: 80, Source: "probe", Capacity: 1})
	}
	if err := c.Validate(); err != nil { // as Load does: a Config is parsed by its validation
		r.t.Fatal(err)
	}
	return c
}

func (r *stateRig) start(cfg *config.Config) *Balancer {
	r.t.Helper()
	r.m = NewMetrics()
	b, err := New(cfg, Options{Now: r.clk.Now, StatePath: r.path, Metrics: r.m, Logger: slog.New(slog.NewTextHandler(&r.log, nil))})
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

func operatorDrained(t *testing.T, b *Balancer, name string) bool {
	t.Helper()
	st, ok := b.pool.Get(name)
	if !ok {
		t.Fatalf("%s not in the pool", name)
	}
	return st.OperatorDrain
}

func (r *stateRig) file() *state.File {
	r.t.Helper()
	f, err := state.Load(r.path)
	if err != nil {
		r.t.Fatal(err)
	}
	return f
}

func TestDrainSurvivesRestart(t *testing.T) {
	r := newStateRig(t)
	b := r.start(r.cfg("a", "b"))
	if b.Drain("a", true) != nil {
		t.Fatal("drain refused")
	}
	if e := r.file().Backends["a"]; !e.OperatorDrain || e.Service != "web" {
		t.Fatalf("the drain was not written before Drain returned: %+v", r.file().Backends)
	}
	b2 := r.start(r.cfg("a", "b"))
	if !operatorDrained(t, b2, "a") || operatorDrained(t, b2, "b") {
		t.Fatal("the operator drain did not survive a restart")
	}
	b2.pool.Tick()
	if st, _ := b2.pool.Get("a"); st.Status != weights.StatusDrained {
		t.Fatalf("restored drain: status %v", st.Status)
	}
	// An undrain survives too.
	b2.Drain("a", false)
	if b3 := r.start(r.cfg("a", "b")); operatorDrained(t, b3, "a") {
		t.Fatal("the undrain did not survive a restart")
	}
}

// TestDrainSurvivesReloadRemoveRestore: a drained backend removed by one reload and put back by
// another is still drained, both after the pool's own tombstone has expired and across a
// restart in between.
func TestDrainSurvivesReloadRemoveRestore(t *testing.T) {
	r := newStateRig(t)
	b := r.start(r.cfg("a", "b"))
	b.Drain("a", true)
	b.services[0].books[0].learned = 1.6
	if err := b.Reload(r.cfg("b")); err != nil {
		t.Fatal(err)
	}
	if e := r.file().Backends["a"]; !e.OperatorDrain || e.Removed == nil || e.LearnedCapacity != 1.6 {
		t.Fatalf("the removed backend's drain was not kept in the state file: %+v", e)
	}
	r.clk.Advance(collector.DefaultTombstoneGrace + time.Minute) // past the pool's tombstone
	if err := b.Reload(r.cfg("a", "b")); err != nil {
		t.Fatal(err)
	}
	if !operatorDrained(t, b, "a") || b.services[0].books[0].learned != 1.6 {
		t.Fatalf("restored backend: drained %v learned %v", operatorDrained(t, b, "a"), b.services[0].books[0].learned)
	}

	// Removed, restart, then put back.
	if err := b.Reload(r.cfg("b")); err != nil {
		t.Fatal(err)
	}
	b2 := r.start(r.cfg("b"))
	if err := b2.Reload(r.cfg("a", "b")); err != nil {
		t.Fatal(err)
	}
	if !operatorDrained(t, b2, "a") {
		t.Fatal("a drain kept while the backend was out of the configuration did not survive a restart")
	}
	// A drain is forgotten RememberRemovedFor after the removal.
	if err := b2.Reload(r.cfg("b")); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(RememberRemovedFor + time.Hour)
	b3 := r.start(r.cfg("b"))
	if err := b3.Reload(r.cfg("a", "b")); err != nil {
		t.Fatal(err)
	}
	if operatorDrained(t, b3, "a") {
		t.Fatal("a drain outlived RememberRemovedFor")
	}
}

func TestLearnedCapacitySurvivesRestart(t *testing.T) {
	r := newStateRig(t)
	b := r.start(r.cfg("a", "b"))
	b.services[0].books[0].learned = 1.7
	b.services[0].books[1].learned = 0.6
	maybeSaveState(b) // the first periodic write is due at once
	b2 := r.start(r.cfg("b", "a"))
	if got := b2.services[0].books; got[0].learned != 0.6 || got[1].learned != 1.7 {
		t.Fatalf("learned capacity after a restart: %+v", got)
	}
	// Learned capacity is relative to its service's pool: not carried into another service.
	moved := r.cfg("a", "b")
	moved.Services[0].Name = "other"
	if b3 := r.start(moved); b3.services[0].books[0].learned != 0 {
		t.Fatalf("learned capacity carried into another service: %+v", b3.services[0].books)
	}
}

// TestStateWritesBounded: learned capacity that changes every period is written at most once
// per StateEvery; a drain is written at once.
func TestStateWritesBounded(t *testing.T) {
	r := newStateRig(t)
	b := r.start(r.cfg("a", "b"))
	writes := func() float64 { return counterValue(t, r.m.stateWrites.WithLabelValues("ok")) }
	for i := range 60 { // five minutes of 5 s periods
		b.services[0].books[0].learned = 1 + float64(i+1)/100
		maybeSaveState(b)
		r.clk.Advance(5 * time.Second)
	}
	if got := writes(); got != 5 {
		t.Fatalf("%v writes in 5 minutes, want 5 (one per %s)", got, DefaultStateEvery)
	}
	b.Drain("b", true)
	if got := writes(); got != 6 {
		t.Fatalf("a drain was not written at once: %v writes", got)
	}
	b.Drain("b", true) // no change, no write
	if got := writes(); got != 6 {
		t.Fatalf("an unchanged state was written again: %v writes", got)
	}
}

// TestCorruptStateFile: an unusable file is moved aside whole, the controller starts with
// nothing from it (not even its valid entries), says so once, and writes a fresh file.
func TestCorruptStateFile(t *testing.T) {
	cases := map[string]string{
		"garbage":          "\x00\x01not json",
		"truncated":        `{"version":1,"backends":{"a":{"service":"web","operator_drain":true},"b":{"serv`,
		"one bad entry":    `{"version":1,"backends":{"a":{"service":"web","operator_drain":true},"b":{"service":"web","learned_capacity":-3}}}`,
		"future version":   `{"version":9,"backends":{"a":{"service":"web","operator_drain":true}}}`,
		"empty":            ``,
		"a directory here": "",
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			r := newStateRig(t)
			if name == "a directory here" {
				if err := os.Mkdir(r.path, 0o700); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(r.path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			b := r.start(r.cfg("a", "b"))
			if operatorDrained(t, b, "a") {
				t.Fatal("an entry of an unusable state file was applied")
			}
			if !strings.Contains(r.log.String(), "state file unusable") || !strings.Contains(r.log.String(), r.path) {
				t.Fatalf("no warning naming the file:\n%s", r.log.String())
			}
			if name != "a directory here" {
				kept, err := os.ReadFile(r.path + ".corrupt")
				if err != nil || string(kept) != content {
					t.Fatalf("the bad file was not kept aside whole: %q %v", kept, err)
				}
			}
			if ev := b.View().Events(); len(ev) == 0 || !strings.Contains(ev[0].Text, ".corrupt") {
				t.Fatalf("no event: %+v", ev)
			}
			b.Drain("b", true)
			if e := r.file().Backends["b"]; !e.OperatorDrain {
				t.Fatal("no fresh state file after a corrupt one")
			}
		})
	}
}

func TestStateWriteFailureDoesNotStopDrains(t *testing.T) {
	r := newStateRig(t)
	r.path = filepath.Join(t.TempDir(), "missing-dir", "controller.state")
	b := r.start(r.cfg("a", "b"))
	if b.Drain("a", true) != nil || !operatorDrained(t, b, "a") {
		t.Fatal("a drain failed because the state file could not be written")
	}
	b.Drain("b", true)
	if got := counterValue(t, r.m.stateWrites.WithLabelValues("error")); got != 2 {
		t.Fatalf("%v write errors counted, want 2", got)
	}
	if n := strings.Count(r.log.String(), "state file not written"); n != 1 {
		t.Fatalf("the write failure was logged %d times, want once:\n%s", n, r.log.String())
	}
}

type fakeReplay struct{ restored, marks map[string]json.RawMessage }

func (f *fakeReplay) ReplayState() map[string]json.RawMessage         { return f.marks }
func (f *fakeReplay) RestoreReplayState(m map[string]json.RawMessage) { f.restored = m }

// TestReplaySection: the replay section is written from the ReplayStore when there is one,
// handed back to it at start, and kept unchanged when there is none.
func TestReplaySection(t *testing.T) {
	r := newStateRig(t)
	b := r.start(r.cfg("a", "b"))
	fr := &fakeReplay{marks: map[string]json.RawMessage{"a": json.RawMessage(`{"epoch":3,"seq":99}`)}}
	b.st.rs = fr
	b.Drain("a", true)
	if got := string(r.file().Replay["a"]); got != `{"epoch":3,"seq":99}` {
		t.Fatalf("replay section %q", got)
	}
	b2 := r.start(r.cfg("a", "b")) // no store: the section is carried over untouched
	b2.Drain("b", true)
	if got := string(r.file().Replay["a"]); got != `{"epoch":3,"seq":99}` {
		t.Fatalf("a rewrite without a ReplayStore dropped the marks: %q", got)
	}
	fr2 := &fakeReplay{}
	b3 := r.start(r.cfg("a", "b"))
	b3.mu.Lock()
	loaded := b3.st.replay
	b3.mu.Unlock()
	b3.st.rs = nil
	restore := replayStoreOf
	replayStoreOf = func(*push.Server, *slog.Logger) ReplayStore { return fr2 }
	defer func() { replayStoreOf = restore }()
	b3.st.attach(replayStoreOf(nil, b3.log))
	if string(fr2.restored["a"]) != string(loaded["a"]) || len(fr2.restored) != 1 {
		t.Fatalf("restored %v", fr2.restored)
	}
}

// TestBackendBackWithinGraceIsNotUnknown is the review's finding: a backend removed and put
// back by reloads came back unknown, its EWMA and health gone.
func TestBackendBackWithinGraceIsNotUnknown(t *testing.T) {
	r := newStateRig(t)
	b := r.start(r.cfg("a", "b"))
	rep := func(id string) *report.Report {
		return &report.Report{BackendID: id, Flags: report.FlagHealthOK, CPUUtil: 0.4, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30}
	}
	b.pool.Accept(rep("a"), netip.AddrPort{})
	r.clk.Advance(11 * time.Second) // past warm-up
	b.pool.Accept(rep("a"), netip.AddrPort{})
	b.pool.Tick()
	before, _ := b.pool.Get("a")
	if before.Status != weights.StatusUp {
		t.Fatalf("setup: a is %v", before.Status)
	}
	if err := b.Reload(r.cfg("b")); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(time.Second)
	if err := b.Reload(r.cfg("a", "b")); err != nil {
		t.Fatal(err)
	}
	b.pool.Tick()
	after, _ := b.pool.Get("a")
	if after.Status != weights.StatusUp || after.CPU != before.CPU || after.Reports != before.Reports {
		t.Fatalf("back within the grace: %v cpu %v reports %d, was %v cpu %v reports %d",
			after.Status, after.CPU, after.Reports, before.Status, before.CPU, before.Reports)
	}
}
