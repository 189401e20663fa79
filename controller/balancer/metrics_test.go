package balancer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowweight/collector"
	"flowweight/controller/ratelog"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
	"flowweight/weights"
)

// runWithMetrics starts a Balancer on cfg with its metrics on a fresh registry and log into
// logw, and returns it with the OpenFlow listener's address.
func runWithMetrics(t *testing.T, logw io.Writer) (*Balancer, *prometheus.Registry, net.Addr) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := NewMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	// A frozen clock: the rate-limited log lines counted here all fall in one window.
	clk := testutil.NewClock(time.Unix(1_800_000_000, 0))
	b, err := New(testConfig(t, ""), Options{Metrics: m, Now: clk.Now,
		Logger: slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	addr, _, _ := startInProcess(t, b)
	return b, reg, addr
}

// ofMsg encodes one OpenFlow 1.3 message.
func ofMsg(typ uint8, xid uint32, body []byte) []byte {
	b := make([]byte, 8, 8+len(body))
	b[0], b[1] = 4, typ
	binary.BigEndian.PutUint16(b[2:], uint16(8+len(body)))
	binary.BigEndian.PutUint32(b[4:], xid)
	return append(b, body...)
}

// dialSwitch does HELLO and FEATURES as datapath dpid and then only drains what the
// controller sends.
func dialSwitch(t *testing.T, addr net.Addr, dpid uint64) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	hello := []byte{0, 1, 0, 8, 0, 0, 0, 1 << 4}
	c.Write(ofMsg(0, 1, hello))
	br := bufio.NewReader(c)
	for {
		var h [8]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("switch %x handshake: %v", dpid, err)
		}
		body := make([]byte, int(binary.BigEndian.Uint16(h[2:]))-8)
		if _, err := io.ReadFull(br, body); err != nil {
			t.Fatal(err)
		}
		switch h[1] {
		case 5: // FEATURES_REQUEST
			f := make([]byte, 24)
			binary.BigEndian.PutUint64(f, dpid)
			c.Write(ofMsg(6, binary.BigEndian.Uint32(h[4:]), f))
		case 18: // MULTIPART_REQUEST: the DESC asked once at connect; refused, as a switch
			// that is not Open vSwitch may (the controller then uses the 64-slot layout)
			c.Write(ofMsg(1, binary.BigEndian.Uint32(h[4:]), []byte{0, 1, 0, 2})) // BAD_REQUEST/BAD_MULTIPART
			go io.Copy(io.Discard, br)
			return c
		}
	}
}

// gathered returns the gathered series of one metric family as label value -> value.
func gathered(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = v
				}
			}
		}
	}
	return out
}

// TestSwitchSeriesRemovedOnDisconnect: 300 short-lived switches with distinct datapath ids
// leave no flowweight_switch_connected series behind (before the fix: 300 series at 0), no
// goroutine (each had a syncer), and their connect and disconnect lines are bounded (before:
// 602 lines).
func TestSwitchSeriesRemovedOnDisconnect(t *testing.T) {
	var logs lockedBuf
	b, reg, addr := runWithMetrics(t, &logs)
	stay := dialSwitch(t, addr, 0xaaaa)
	defer stay.Close()
	testutil.Until(t, 10*time.Second, func() bool { return slices.Contains(b.View().Switches(), 0xaaaa) }, "first switch connected")
	// Counted among the goroutines of switch sessions and syncers only: the balancer may still
	// be starting its own loops when the first switch connects, and counting every goroutine
	// took them for a leak (1 run in 20 under load).
	goroutines := switchGoroutines()
	if goroutines == 0 {
		t.Fatal("no goroutine of the connected switch found: switchGoroutines looks for names that no longer exist")
	}
	for dpid := uint64(1); dpid <= 300; dpid++ {
		c := dialSwitch(t, addr, dpid)
		testutil.Until(t, 10*time.Second, func() bool { return slices.Contains(b.View().Switches(), dpid) }, "switch connected")
		c.Close()
		testutil.Until(t, 10*time.Second, func() bool { return !slices.Contains(b.View().Switches(), dpid) }, "switch gone")
	}
	// Each session's syncer ends with it: nothing per gone switch is left running.
	testutil.Until(t, 10*time.Second, func() bool { return switchGoroutines() <= goroutines+2 }, "syncers of gone switches ended")
	testutil.Until(t, 10*time.Second, func() bool {
		return len(gathered(t, reg, "flowweight_switch_connected", "dpid")) == 1
	}, "series of gone switches removed")
	if got := gathered(t, reg, "flowweight_switch_connected", "dpid"); got["000000000000aaaa"] != 1 {
		t.Errorf("series = %v, want only the connected switch at 1", got)
	}
	if n := logs.count("switch connected") + logs.count("switch disconnected"); n > ratelog.MaxKeys+1 {
		t.Errorf("%d connect/disconnect lines for 301 switches in one window, want at most %d", n, ratelog.MaxKeys+1)
	}
}

// switchGoroutines counts the goroutines that run a switch's session or its syncer.
func switchGoroutines() int {
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 2)
	n := 0
	for g := range strings.SplitSeq(buf.String(), "\n\n") {
		if strings.Contains(g, "flowweight/controller/switchsync.(*Syncer)") ||
			strings.Contains(g, "flowweight/controller/ofswitch.(*Switch)") ||
			strings.Contains(g, "flowweight/controller/ofswitch.(*Server).handle") {
			n++
		}
	}
	return n
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count counts the Balancer's lines with msg (ofswitch's own Debug lines of the same name
// carry no "suppressed").
func (l *lockedBuf) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg && m["suppressed"] != nil {
			n++
		}
	}
	return n
}

// TestPacketInFaultsCountedAndRateLimited: 1,000 packet-ins that are not ARP are each
// counted in flowweight_arp_refused_total{reason="malformed"} but logged once (before: a line each), and the
// OpenFlow fault counters are exported with their fixed reason set.
func TestPacketInFaultsCountedAndRateLimited(t *testing.T) {
	var logs lockedBuf
	_, reg, addr := runWithMetrics(t, &logs)
	c := dialSwitch(t, addr, 0xbbbb)
	defer c.Close()
	// PACKET_IN: buffer_id, total_len, reason, table, cookie, OXM match with in_port 1, pad,
	// then a frame too short to be Ethernet.
	pi := make([]byte, 16)
	binary.BigEndian.PutUint32(pi, 0xffffffff)
	match := []byte{0, 1, 0, 12, 0x80, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	pi = append(append(pi, match...), "not a frame"...)
	const n = 1000
	for range n {
		if _, err := c.Write(ofMsg(10, 0, pi)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Until(t, 10*time.Second, func() bool {
		arp := gathered(t, reg, "flowweight_arp_refused_total", "reason")["malformed"]
		drops := gathered(t, reg, "flowweight_openflow_faults_total", "reason")["packet_in_queue_full"]
		return arp+drops == n
	}, "every packet-in counted (as a refused ARP frame or a queue drop)")
	if got := logs.count("ARP frame not learnt from"); got != 1 {
		t.Errorf("%d log lines for %d bad packet-ins, want 1", got, n)
	}
	if got := len(gathered(t, reg, "flowweight_openflow_faults_total", "reason")); got < 10 {
		t.Errorf("flowweight_openflow_faults_total has %d reasons, want the whole fixed set", got)
	}
}

// TestHeadroomSeriesOnlyWhileMeasured: the service's own CPU and the headroom are exported only
// while they exist, and the fallback gauge counts the backends that made the policy fall back.
// gaugeValues is every series of the gauge family in m, keyed by backend (or by service for
// a per-service family).
func gaugeValues(t *testing.T, m *Metrics, family string) map[string]float64 {
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
			key := ""
			for _, l := range x.GetLabel() {
				if l.GetName() == "backend" || (key == "" && l.GetName() == "service") {
					key = l.GetValue()
				}
			}
			out[key] = x.GetGauge().GetValue()
		}
	}
	return out
}

// computeAndObserve computes b's first service from the pool's state, as a periodic update
// would, and records it in m.
func computeAndObserve(b *Balancer, m *Metrics) {
	snap := b.pool.Snapshot(nil)
	states := map[string]*collector.State{}
	for i := range snap {
		states[snap[i].Name] = &snap[i]
	}
	s := b.services[0]
	s.compute(states, true)
	b.mu.Lock()
	m.observeService(s)
	b.mu.Unlock()
}

// TestConnectionsSeriesOnceReported: flowweight_backend_connections, what a drain watches
// fall and the dashboard's in-flight panel shows, exists for a backend once it has reported,
// with the count it reported.
func TestConnectionsSeriesOnceReported(t *testing.T) {
	b, m, _ := newMetered(t)
	observe := func() { computeAndObserve(b, m) }
	observe()
	if c := gaugeValues(t, m, "flowweight_backend_connections"); len(c) != 0 {
		t.Fatalf("connections series before any report: %v", c)
	}
	b.pool.Accept(&report.Report{BackendID: "a", Seq: 1, Flags: report.FlagHealthOK, CPUUtil: 0.2, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30, Conns: 7}, netip.AddrPort{})
	observe()
	if c := gaugeValues(t, m, "flowweight_backend_connections"); len(c) != 1 || c["a"] != 7 {
		t.Fatalf("connections series %v, want only a = 7", c)
	}
}

func TestHeadroomSeriesOnlyWhileMeasured(t *testing.T) {
	b, m, _ := newMetered(t)
	gauges := func(family string) map[string]float64 { t.Helper(); return gaugeValues(t, m, family) }
	seq := uint64(0)
	update := func(withB bool) {
		t.Helper()
		for _, id := range []string{"a", "b"} {
			seq++
			r := &report.Report{BackendID: id, Seq: seq, Flags: report.FlagHealthOK, CPUUtil: 0.6, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30}
			if id == "a" || withB {
				r.Signals, r.ServiceCPU = report.SignalServiceCPU, 0.3
			}
			b.pool.Accept(r, netip.AddrPort{})
		}
		computeAndObserve(b, m)
	}
	update(false)
	if f := gauges("flowweight_service_policy_fallback_backends"); f["web"] != 1 {
		t.Fatalf("fallback gauge %v, want web = 1", f)
	}
	if h := gauges("flowweight_backend_headroom_ratio"); len(h) != 0 {
		t.Fatalf("headroom series while the policy fell back: %v", h)
	}
	if c := gauges("flowweight_backend_service_cpu_ratio"); len(c) != 1 || c["a"] != 0.3 {
		t.Fatalf("service cpu series %v, want only a = 0.3", c)
	}
	update(true)
	if f := gauges("flowweight_service_policy_fallback_backends"); f["web"] != 0 {
		t.Fatalf("fallback gauge %v, want web = 0", f)
	}
	if h := gauges("flowweight_backend_headroom_ratio"); len(h) != 2 || !(h["a"] > 0) {
		t.Fatalf("headroom series %v, want a and b", h)
	}
	update(false)
	if c := gauges("flowweight_backend_service_cpu_ratio"); len(c) != 1 {
		t.Fatalf("b's service cpu series kept after it stopped reporting: %v", c)
	}
}

// TestReloadForgetsRemovedBackendsSeries: a backend or service a reload removes leaves no
// series behind (before: every name ever configured kept its series at the last value).
func TestReloadForgetsRemovedBackendsSeries(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b := staticPool(t, clk, "", 1, 1, 1)
	reg := prometheus.NewRegistry()
	if err := b.metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	periods(b, clk, 2)
	if got := gathered(t, reg, "flowweight_backend_load_ratio", "backend"); len(got) != 3 {
		t.Fatalf("series before the reload: %v, want be1..be3", got)
	}
	next := staticPool(t, clk, b.Config().Collector.KeyFile, 1, 1).Config() // be3 removed
	if err := b.reload("test.toml", next, ReloadOptions{AllowRemoval: true}); err != nil {
		t.Fatal(err)
	}
	periods(b, clk, 1)
	for _, name := range []string{"flowweight_backend_load_ratio", "flowweight_backend_weight_computed", "flowweight_backend_state",
		"flowweight_backend_weight_applied", "flowweight_backend_capacity_clamped"} {
		if got := gathered(t, reg, name, "backend"); len(got) != 2 || !hasKey(got, "be1") || hasKey(got, "be3") {
			t.Errorf("%s after be3 was removed: %v", name, got)
		}
	}
}

func hasKey(m map[string]float64, k string) bool { _, ok := m[k]; return ok }

// TestNoWarmupAtStartUp: backends that report from the controller's start are up at once,
// with no warm-up series (collector.Pool: start-up is not a recovery).
func TestNoWarmupAtStartUp(t *testing.T) {
	b, m, clk := newMetered(t)
	for seq, id := range []string{"a", "b"} {
		clk.Advance(100 * time.Millisecond)
		b.pool.Accept(&report.Report{BackendID: id, Seq: uint64(seq + 1), Flags: report.FlagHealthOK, CPUUtil: 0.3, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30}, netip.AddrPort{})
	}
	computeAndObserve(b, m)
	if w := gaugeValues(t, m, "flowweight_backend_warmup_ratio"); len(w) != 0 {
		t.Fatalf("warm-up series %v at start-up, want none", w)
	}
	for _, id := range []string{"a", "b"} {
		if st, _ := b.pool.Get(id); st.Status != weights.StatusUp {
			t.Errorf("%s is %v after its first good report at start-up, want up", id, st.Status)
		}
	}
}

// TestWarmupSeriesWhileRamping: flowweight_backend_warmup_ratio exists while a backend ramps,
// with its fraction, and goes once the ramp is over.
func TestWarmupSeriesWhileRamping(t *testing.T) {
	b, m, clk := newMetered(t) // warmup 10s
	seq := uint64(0)
	update := func() {
		for _, id := range []string{"a", "b"} {
			seq++
			b.pool.Accept(&report.Report{BackendID: id, Seq: seq, Flags: report.FlagHealthOK, CPUUtil: 0.3, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30}, netip.AddrPort{})
		}
		computeAndObserve(b, m)
	}
	// Past the start-up window: backends first seen at start-up are up at once, without a
	// ramp (collector.Pool's check).
	clk.Advance(b.Config().Collector.StaleAfter)
	update()
	if w := gaugeValues(t, m, "flowweight_backend_warmup_ratio"); len(w) != 2 || w["a"] != 0.05 {
		t.Fatalf("warm-up series %v, want a and b at 0.05 (a watched ramp's start)", w)
	}
	for range 40 {
		clk.Advance(time.Second)
		update()
	}
	if w := gaugeValues(t, m, "flowweight_backend_warmup_ratio"); len(w) != 0 {
		t.Fatalf("warm-up series %v after the ramps ended", w)
	}
}

// newMetered is a balancer on testConfig with metrics and a fake clock.
func newMetered(t *testing.T) (*Balancer, *Metrics, *testutil.Clock) {
	t.Helper()
	clk := testutil.NewClock(time.Unix(1e9, 0))
	m := NewMetrics()
	b, err := New(testConfig(t, ""), Options{Now: clk.Now, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return b, m, clk
}
