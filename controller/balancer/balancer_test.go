package balancer

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"context"
	"net"
	"net/netip"

	"flowweight/collector"
	"flowweight/controller/arp"
	"flowweight/controller/config"
	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
	"flowweight/weights"

	"github.com/prometheus/client_golang/prometheus"
)

// baseConfig is the balancer tests' configuration without services (testdata/base.toml).
var baseConfig = testutil.Fixture("testdata/base.toml")

// webConfig is baseConfig with service web, probe backends a and b (testdata/web.toml).
var webConfig = baseConfig + testutil.Fixture("testdata/web.toml")

// withKey is a configuration text from the fixtures above with key as its push key file and
// extra as more [weighting] lines.
func withKey(text, key, extra string) string {
	return testutil.Edit(text, `"KEY"`, `"`+key+`"`, "# EXTRA", extra)
}

// testConfig is webConfig with a real push key file and extra [weighting] lines.
func testConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	key := filepath.Join(dir, "push.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse("test.toml", []byte(withKey(webConfig, key, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestComputeFromPoolAndReloadKeepsLearning(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b, err := New(testConfig(t, ""), Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	rep := func(id string, cpu float64) *report.Report {
		return &report.Report{BackendID: id, Flags: report.FlagHealthOK, CPUUtil: cpu, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30}
	}
	b.pool.Accept(rep("a", 0.2), netip.AddrPort{})
	b.pool.Accept(rep("b", 0.6), netip.AddrPort{})
	clk.Advance(11 * time.Second)
	b.pool.Accept(rep("a", 0.2), netip.AddrPort{})
	b.pool.Accept(rep("b", 0.6), netip.AddrPort{})

	snap := b.pool.Snapshot(nil)
	states := map[string]*collector.State{}
	for i := range snap {
		states[snap[i].Name] = &snap[i]
	}
	s := b.services[0]
	if !s.compute(states, true) {
		t.Fatal("first computation must be worth a write")
	}
	s.applied = s.result.Weights(nil)
	if s.applied[0] <= s.applied[1] {
		t.Fatalf("less loaded backend got less weight: %v", s.applied)
	}
	if s.compute(states, true) {
		t.Fatal("identical inputs were worth a rewrite (dead-band)")
	}
	s.books[0].learned = 1.7

	// A reload that adds a backend keeps a's and b's books and applied weights.
	cfg2 := testConfig(t, "")
	cfg2.Collector.KeyFile = b.Config().Collector.KeyFile
	cfg2.Services[0].Backends = append(cfg2.Services[0].Backends, config.Backend{Name: "c", IP: "10.0.0.3", Port: 80, Source: "probe", Capacity: 1})
	if err := b.Reload(cfg2); err != nil {
		t.Fatal(err)
	}
	s2 := b.services[0]
	if s2.books[0].learned != 1.7 || len(s2.applied) != 3 || s2.applied[0] != s.applied[0] || s2.applied[2] != 0 {
		t.Fatalf("reload lost state: books %+v applied %v", s2.books, s2.applied)
	}
	if !b.pool.Known("c") {
		t.Fatal("reload did not add backend c to the pool")
	}
}

func TestReloadRejectsWithoutChangingAnything(t *testing.T) {
	b, err := New(testConfig(t, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := b.Config()
	bad := testConfig(t, "")
	bad.Collector.KeyFile = "/nonexistent/key"
	bad.Services[0].Backends = bad.Services[0].Backends[:1]
	if err := b.Reload(bad); err == nil || !strings.Contains(err.Error(), "/nonexistent/key") {
		t.Fatalf("reload with a missing key file: %v", err)
	}
	moved := testConfig(t, "")
	moved.Controller.Listen = "127.0.0.1:1"
	if err := b.Reload(moved); err == nil || !strings.Contains(err.Error(), "controller.listen") {
		t.Fatalf("reload changing the listener: %v", err)
	}
	if b.Config() != before || !b.pool.Known("b") || len(b.services[0].cfg.Backends) != 2 {
		t.Fatal("a rejected reload changed the running state")
	}
}

func TestPanicShownWhenNoBackendLive(t *testing.T) {
	b, err := New(testConfig(t, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := b.services[0]
	s.compute(map[string]*collector.State{}, true)
	if !s.result.Panic || s.result.Backends[0].Weight+s.result.Backends[1].Weight != uint16(s.result.Total) {
		t.Fatalf("no live backend: %+v", s.result)
	}
	if s.result.Backends[0].Status != weights.StatusUnknown.String() {
		t.Fatalf("status %q", s.result.Backends[0].Status)
	}
}

// bucketsOf returns the slots the planner would give each backend of group 5 on a switch
// where every backend is located (a backend's buckets summed: the layout may give one
// backend two buckets, see dataplane.Layout).
func bucketsOf(t *testing.T, b *Balancer) []uint16 {
	t.Helper()
	b.mu.Lock()
	for _, s := range b.services {
		for i, be := range s.cfg.Backends {
			b.nb.Learner().Adopt(1, be.ParsedIP(), arp.Location{MAC: net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)}, Port: uint32(i + 1)})
		}
	}
	b.mu.Unlock()
	desired, _ := desiredFor(b, 1)
	for _, g := range desired.Groups {
		if g.ID == 5 {
			var w []uint16
			var acts []string
			for _, k := range g.Buckets {
				i := slices.Index(acts, k.Actions)
				if i < 0 {
					acts, w, i = append(acts, k.Actions), append(w, 0), len(acts)
				}
				w[i] += k.Weight
			}
			return w
		}
	}
	t.Fatal("group 5 not planned")
	return nil
}

func TestReloadChangesWeightsAndBuckets(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b, err := New(testConfig(t, ""), Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	feed := func(names ...string) {
		for _, n := range names {
			cpu, mem := 0.8, 0.1
			if n != "a" {
				cpu, mem = 0.1, 0.8
			}
			b.pool.Accept(&report.Report{BackendID: n, Flags: report.FlagHealthOK, CPUUtil: cpu, MemUtil: mem, CPUCount: 2, MemBytes: 1 << 30}, netip.AddrPort{})
		}
		clk.Advance(11 * time.Second) // past warm-up
		for _, n := range names {
			b.pool.Accept(&report.Report{BackendID: n, Flags: report.FlagHealthOK, CPUUtil: 0.8, MemUtil: 0.1, CPUCount: 2, MemBytes: 1 << 30}, netip.AddrPort{})
		}
	}
	feed("a", "b")
	b.update(context.Background(), true)
	before := bucketsOf(t, b)
	if len(before) != 2 {
		t.Fatalf("buckets %v", before)
	}

	// Coefficients: load from memory only. a is CPU-bound, b memory-bound in the first
	// samples; the smoothed loads differ, so the split must change.
	cfg := testConfig(t, "[weighting.load]\ncpu = 0.0\nmem = 1.0\nconn = 0.0\nnet = 0.0\n")
	cfg.Collector.KeyFile = b.Config().Collector.KeyFile
	if err := b.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	b.update(context.Background(), true)
	if after := bucketsOf(t, b); after[0] == before[0] {
		t.Fatalf("a coefficient change did not alter the weights: %v -> %v", before, after)
	}

	// Adding a backend adds a bucket once it reports; removing one removes its bucket.
	grown := testConfig(t, "")
	grown.Collector.KeyFile = cfg.Collector.KeyFile
	grown.Services[0].Backends = append(grown.Services[0].Backends, config.Backend{Name: "c", IP: "10.0.0.3", Port: 80, Source: "probe", Capacity: 1})
	if err := grown.Validate(); err != nil { // as Load does: a Config is parsed by its validation
		t.Fatal(err)
	}
	if err := b.Reload(grown); err != nil {
		t.Fatal(err)
	}
	feed("a", "b", "c")
	b.update(context.Background(), true)
	if w := bucketsOf(t, b); len(w) != 3 {
		t.Fatalf("after adding c: buckets %v", w)
	}
	shrunk := testConfig(t, "")
	shrunk.Collector.KeyFile = cfg.Collector.KeyFile
	shrunk.Services[0].Backends = append(shrunk.Services[0].Backends[1:], grown.Services[0].Backends[2]) // drop a
	if err := b.Reload(shrunk); err != nil {
		t.Fatal(err)
	}
	b.update(context.Background(), true)
	if w := bucketsOf(t, b); len(w) != 2 {
		t.Fatalf("after removing a: buckets %v", w)
	}
	if b.pool.Known("a") {
		t.Fatal("removed backend still in the pool")
	}
}

// TestRefusedARPCounted: refusals show in /metrics by reason, every reason from the start.
func TestRefusedARPCounted(t *testing.T) {
	b, m, _ := newMetered(t)
	// An answer from a backend nobody asked about, as its switch would hand it up.
	backend := netip.MustParseAddr(b.Config().Services[0].Backends[0].IP)
	req, err := arp.Request(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, netip.MustParseAddr("10.0.0.99"), backend)
	if err != nil {
		t.Fatal(err)
	}
	answer, ok, err := arp.Reply(req, func(netip.Addr) (net.HardwareAddr, bool) { return net.HardwareAddr{2, 0, 0, 0, 0, 1}, true })
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for range 2 {
		if v := b.nb.Observe(1, 1, answer, b.board.Latest().Intent); v.Reason != arp.ReasonUnsolicited {
			t.Fatalf("verdict %+v, want refused as %s", v, arp.ReasonUnsolicited)
		}
	}
	got := counterValues(t, m, "flowweight_arp_refused_total", "reason")
	for _, r := range arp.Reasons {
		want := 0.0
		if r == arp.ReasonUnsolicited {
			want = 2
		}
		if v, ok := got[string(r)]; !ok || v != want {
			t.Errorf("arp_refused_total{reason=%q} = %v (present %v), want %v", r, v, ok, want)
		}
	}
	if n := len(got); n != len(arp.Reasons) {
		t.Errorf("%d reason series, want %d (a fixed set)", n, len(arp.Reasons))
	}
}

// counterValues gathers one counter family from m, by the value of label.
func counterValues(t *testing.T, m *Metrics, family, label string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, x := range mf.GetMetric() {
			for _, l := range x.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = x.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestClampLoggedOncePerTransition: a backend claiming absurd capacity is clamped, shown in
// /metrics, and logged once when clamping starts (and once when it ends), not every update.
func TestClampLoggedOncePerTransition(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	var logs strings.Builder
	m := NewMetrics()
	b, err := New(testConfig(t, ""), Options{Now: clk.Now, Metrics: m, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	report1 := func(name string, cpus float64) {
		b.pool.Accept(&report.Report{BackendID: name, Flags: report.FlagHealthOK, CPUUtil: 0.5, MemUtil: 0.5, CPUCount: cpus, MemBytes: 1 << 30}, netip.AddrPort{})
	}
	count := func() int { return strings.Count(logs.String(), "reported capacity clamped") }
	gauge := func() float64 {
		reg := prometheus.NewRegistry()
		m.Register(reg)
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "flowweight_backend_capacity_clamped" {
				for _, x := range mf.GetMetric() {
					ls := map[string]string{}
					for _, l := range x.GetLabel() {
						ls[l.GetName()] = l.GetValue()
					}
					if ls["backend"] == "b" && ls["resource"] == "cpu" {
						return x.GetGauge().GetValue()
					}
				}
			}
		}
		return -1
	}
	for range 5 {
		report1("a", 4)
		report1("b", 200_000)
		clk.Advance(11 * time.Second)
		b.update(context.Background(), true)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d clamp lines over 5 clamped updates, want 1:\n%s", n, logs.String())
	}
	if gauge() != 1 || counterValues(t, m, "flowweight_capacity_clamps_total", "resource")["cpu"] != 1 {
		t.Fatalf("gauge %v, clamps %v", gauge(), counterValues(t, m, "flowweight_capacity_clamps_total", "resource"))
	}
	b.mu.Lock()
	e := b.services[0].result.Backends[1]
	b.mu.Unlock()
	if e.Clamp.CPUCount != 200_000 || e.Clamp.CPUUsed != 16 || e.Weight > 810 { // 800 = 16 : 4 cores, the bound 4 × the other's; unbounded it is 1000
		t.Fatalf("explanation %+v", e)
	}
	// Honest again (an EWMA brings the count down over a few updates): one "no longer" line.
	for range 20 {
		report1("a", 4)
		report1("b", 4)
		clk.Advance(11 * time.Second)
		b.update(context.Background(), true)
	}
	if gauge() != 0 || !strings.Contains(logs.String(), "no longer clamped") || count() != 1 {
		t.Fatalf("after honest reports: gauge %v, logs:\n%s", gauge(), logs.String())
	}
	// Flapping across the bound every update for 10 updates (110 s): at most one line per
	// minute (two here), though every entry is counted.
	for i := range 20 {
		report1("a", 4)
		report1("b", []float64{200_000, 4}[i%2])
		clk.Advance(11 * time.Second)
		b.update(context.Background(), true)
	}
	if n := count() - 1; n > 4 {
		t.Fatalf("%d clamp lines while flapping for 220 s, want at most 4:\n%s", n, logs.String())
	}
	if got := counterValues(t, m, "flowweight_capacity_clamps_total", "resource")["cpu"]; got != 11 {
		t.Fatalf("clamps_total %v, want 11 (every entry counted)", got)
	}
}

// TestThroughputSmoothedLikeTheCPU: per-backend throughput is smoothed with the tuning's
// alpha (learned capacity divides it by a smoothed utilisation), and a period without a
// rate (no counter, or a switch's rate gone stale) makes it unknown and restarts the
// smoothing.
func TestThroughputSmoothedLikeTheCPU(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b, err := New(testConfig(t, ""), Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	s := b.services[0]
	cookie := dataplane.MakeCookie(s.index, 0, dataplane.KindReturn)
	alpha := s.tuning.Alpha
	period := b.Config().Controller.UpdatePeriod
	steps := []struct {
		rate    float64
		present bool
		age     time.Duration // of the switch's rate
		want    float64
	}{
		{1000, true, 0, 1000},
		{2000, true, 0, 1000 + alpha*1000},
		{0, false, 0, 0},
		{500, true, 0, 500}, // back: the smoothing starts afresh
		{700, true, 3 * period, 0},
		{500, true, 0, 500},
	}
	for i, st := range steps {
		clk.Advance(time.Second)
		status := &switchsync.Status{DPID: 7}
		if st.present {
			status.Rates, status.RatesAt = map[uint64]float64{cookie: st.rate}, clk.Now().Add(-st.age)
		}
		b.mu.Lock()
		s.measureThroughput(switchsync.Throughput([]*switchsync.Status{status}, b.now(), 2*period))
		got := s.books[0].throughput
		b.mu.Unlock()
		if math.Abs(got-st.want) > 1e-9 {
			t.Fatalf("step %d: throughput %v, want %v", i, got, st.want)
		}
	}
}

// TestAdvanceCarriesTheRamp: a period carries a ramping backend's warm-up fraction, clears
// it once the backend is live and done, and keeps it while the backend is not live (a stale
// report or a drain interrupting a held ramp must not end it at full weight).
func TestAdvanceCarriesTheRamp(t *testing.T) {
	for _, c := range []struct {
		name     string
		status   weights.Status
		exp      weights.Explanation
		wantWarm float64
	}{
		{"ramping", weights.StatusWarming, weights.Explanation{Warmup: 0.2, WarmupTimer: 0.6}, 0.2},
		{"done", weights.StatusUp, weights.Explanation{Warmup: 1}, 0},
		{"stale", weights.StatusStale, weights.Explanation{Warmup: 1}, 0.3},
		{"drained", weights.StatusDrained, weights.Explanation{Warmup: 1}, 0.3},
	} {
		books := []book{{warm: 0.3, warmAt: 5 * time.Second}}
		in := []weights.Backend{{Status: c.status, WarmupElapsed: 7 * time.Second}}
		advance(books, in, &weights.Result{Backends: []weights.Explanation{c.exp}}, true, false)
		if books[0].warm != c.wantWarm {
			t.Errorf("%s: carried %v, want %v", c.name, books[0].warm, c.wantWarm)
		}
	}
}
