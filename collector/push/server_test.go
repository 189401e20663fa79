package push

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"flowweight/internal/report"
)

var (
	keyA      = []byte("key-of-backend-a-0123456789")
	keyB      = []byte("key-of-backend-b-0123456789")
	testEpoch = time.Date(2026, 11, 30, 21, 0, 0, 0, time.UTC)
)

func keyFor(id string) ([]byte, bool) {
	switch id {
	case "a":
		return keyA, true
	case "b":
		return keyB, true
	}
	return nil, false
}

type accepted struct {
	r    report.Report
	from netip.AddrPort
}

// chanSink copies each report, as the Sink contract asks, onto a channel.
type chanSink chan accepted

func (c chanSink) Accept(r *report.Report, from netip.AddrPort) { c <- accepted{*r, from} }

func mkReport(id string, seq uint64, at time.Time) report.Report {
	return report.Report{
		BackendID: id, BootNonce: 0xfeed, Seq: seq, Time: at, Interval: time.Second,
		Flags: report.FlagHealthOK, CPUUtil: 0.25, CPUCount: 4, MemUtil: 0.5, MemBytes: 1 << 30,
		Conns: uint32(seq), HealthStatus: 200, HealthLatency: time.Millisecond,
		Version: report.Version2, Signals: report.SignalHealthLatency,
	}
}

func mkDatagram(t testing.TB, id string, seq uint64, at time.Time, key []byte) []byte {
	t.Helper()
	r := mkReport(id, seq, at)
	b, err := r.AppendSeal(nil, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncBuffer is a log destination the test reads after the server stopped.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func recv(t *testing.T, c chanSink) accepted {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no report reached the sink within 5 s")
		return accepted{}
	}
}

func TestServe(t *testing.T) {
	sink := make(chanSink, 16)
	logs := &syncBuffer{}
	s, err := New(Config{
		Listen: "127.0.0.1:0",
		KeyFor: keyFor,
		Now:    func() time.Time { return testEpoch },
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	}, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()

	conn, err := net.DialUDP("udp", nil, s.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	send := func(b []byte) {
		t.Helper()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}

	a1 := mkDatagram(t, "a", 1, testEpoch, keyA)
	send(a1)
	got := recv(t, sink)
	if want := mkReport("a", 1, testEpoch); got.r != want {
		t.Fatalf("sink got %+v, want %+v", got.r, want)
	}
	if got.from != client {
		t.Errorf("from = %s, want %s", got.from, client)
	}

	v3 := bytes.Clone(a1) // the collector speaks versions 1 and 2
	v3[2] = 3
	unknown := mkReport("c", 1, testEpoch)
	unknownB, _ := unknown.AppendSeal(nil, keyA)
	bad := []struct {
		name string
		b    []byte
		want report.Reason
	}{
		{"wrong key", mkDatagram(t, "a", 2, testEpoch, keyB), report.ReasonBadMAC},
		{"replayed", a1, report.ReasonReplay},
		{"truncated", a1[:50], report.ReasonTruncated},
		{"garbage", bytes.Repeat([]byte("junk"), 40), report.ReasonMalformed},
		{"oversized", make([]byte, 1000), report.ReasonOversized},
		{"wrong version", v3, report.ReasonVersion},
		{"unknown backend", unknownB, report.ReasonUnknownBackend},
		{"clock skew", mkDatagram(t, "a", 3, testEpoch.Add(time.Hour), keyA), report.ReasonClockSkew},
	}
	// After each bad datagram a good one from backend b must still arrive;
	// the read loop is sequential, so by then the bad one was counted.
	for i, tt := range bad {
		before := s.Rejected()[tt.want]
		send(tt.b)
		send(mkDatagram(t, "b", uint64(i+1), testEpoch, keyB))
		got := recv(t, sink)
		if got.r.BackendID != "b" || got.r.Seq != uint64(i+1) {
			t.Fatalf("%s: sink got %s seq %d, want b seq %d", tt.name, got.r.BackendID, got.r.Seq, i+1)
		}
		if after := s.Rejected()[tt.want]; after != before+1 {
			t.Errorf("%s: rejected[%s] went %d -> %d, want +1 (all: %v)", tt.name, tt.want, before, after, s.Rejected())
		}
	}
	// Rejections under a's name left a's state alone: its next seq flows.
	send(mkDatagram(t, "a", 2, testEpoch, keyA))
	if got := recv(t, sink); got.r.BackendID != "a" || got.r.Seq != 2 {
		t.Fatalf("sink got %s seq %d, want a seq 2", got.r.BackendID, got.r.Seq)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v after cancel, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return within 5 s of cancel")
	}

	if n := s.Accepted(); n != uint64(len(bad)+2) {
		t.Errorf("Accepted = %d, want %d", n, len(bad)+2)
	}
	rej := s.Rejected()
	if len(rej) != len(report.Reasons)+1 {
		t.Errorf("Rejected has %d reasons, want all %d and shed: %v", len(rej), len(report.Reasons), rej)
	}
	for _, r := range report.Reasons {
		want := uint64(0)
		for _, tt := range bad {
			if tt.want == r {
				want++
			}
		}
		if rej[r] != want {
			t.Errorf("rejected[%s] = %d, want %d", r, rej[r], want)
		}
	}
	// The clock never moved, so each reason logged exactly once.
	seen := map[string]int{}
	for _, l := range logs.lines(t) {
		reason, _ := l["reason"].(string)
		seen[reason]++
		if l["from"] != client.String() {
			t.Errorf("log line %v: from = %v, want %s", l, l["from"], client)
		}
	}
	for _, tt := range bad {
		if seen[string(tt.want)] != 1 {
			t.Errorf("reason %s logged %d times, want 1 (%v)", tt.want, seen[string(tt.want)], seen)
		}
	}
}

type nopSink struct{ n int }

func (s *nopSink) Accept(*report.Report, netip.AddrPort) { s.n++ }

func TestRejectionLogRateLimit(t *testing.T) {
	now := testEpoch
	logs := &syncBuffer{}
	s, err := New(Config{
		Listen: "127.0.0.1:0",
		KeyFor: keyFor,
		Now:    func() time.Time { return now },
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	}, &nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	from := netip.MustParseAddrPort("127.0.0.1:4000")
	garbage := []byte("garbage, not a report, long enough to pass the size check............................")
	steps := []struct {
		at   time.Duration
		b    []byte
		logs int     // lines after this step
		supp float64 // "suppressed" on the newest line
	}{
		{0, garbage, 1, 0},
		{time.Second, garbage, 1, 0},
		{9 * time.Second, garbage, 1, 0},
		{9 * time.Second, []byte("x"), 2, 0}, // another reason has its own budget
		{LogEvery, garbage, 3, 2},
		{LogEvery + time.Second, garbage, 3, 2},
		{3 * LogEvery, garbage, 4, 1},
	}
	for i, st := range steps {
		now = testEpoch.Add(st.at)
		s.handle(st.b, from)
		lines := logs.lines(t)
		if len(lines) != st.logs {
			t.Fatalf("step %d: %d log lines, want %d", i, len(lines), st.logs)
		}
		if last := lines[len(lines)-1]; last["suppressed"] != st.supp {
			t.Errorf("step %d: suppressed = %v, want %v", i, last["suppressed"], st.supp)
		}
	}
	if got := s.Rejected()[report.ReasonMalformed]; got != 6 {
		t.Errorf("rejected[malformed] = %d, want 6: rate limiting must not limit counting", got)
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		sink Sink
		want string
	}{
		{"no listen", Config{KeyFor: keyFor}, &nopSink{}, "Listen"},
		{"no keys", Config{Listen: "127.0.0.1:0"}, &nopSink{}, "KeyFor"},
		{"no sink", Config{Listen: "127.0.0.1:0", KeyFor: keyFor}, nil, "sink"},
		{"bad address", Config{Listen: "127.0.0.1:notaport", KeyFor: keyFor}, &nopSink{}, "127.0.0.1:notaport"},
		{"address not here", Config{Listen: "192.0.2.1:0", KeyFor: keyFor}, &nopSink{}, "192.0.2.1:0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.cfg, tt.sink)
			if err == nil {
				s.Close()
				t.Fatal("New accepted the config")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
		})
	}
}

func TestServeLifecycle(t *testing.T) {
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor}, &nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.ClockSkew != report.DefaultClockSkew {
		t.Errorf("default ClockSkew = %s, want %s", s.cfg.ClockSkew, report.DefaultClockSkew)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- s.Serve(ctx) }()
	go func() { done <- s.Serve(ctx) }()
	wait := func() error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not return within 5 s")
			return nil
		}
	}
	// Whichever call came second refuses at once; the other serves.
	if err := wait(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second Serve: err = %v, want an error saying it was called twice", err)
	}
	cancel()
	if err := wait(); err != nil {
		t.Fatalf("Serve after cancel: %v, want nil", err)
	}
	// The port is released.
	c, err := net.ListenPacket("udp", s.Addr().String())
	if err != nil {
		t.Fatalf("port still bound after Serve returned: %v", err)
	}
	c.Close()
	if err := s.Close(); err != nil && !strings.Contains(err.Error(), "closed") {
		t.Errorf("second Close: %v", err)
	}
}

func TestForget(t *testing.T) {
	sink := &nopSink{}
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch }}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	from := netip.MustParseAddrPort("127.0.0.1:4000")
	d := mkDatagram(t, "a", 1, testEpoch, keyA)
	s.handle(d, from)
	s.handle(d, from)
	s.Forget("a")
	s.handle(d, from)
	if sink.n != 2 || s.Rejected()[report.ReasonReplay] != 1 {
		t.Errorf("accepted %d, replays %d; want 2 and 1 (Forget starts the backend afresh)", sink.n, s.Rejected()[report.ReasonReplay])
	}
}

// BenchmarkIngest is the per-datagram cost of the server without the
// socket: verify, decode, replay check and the sink call, over 32 backends
// whose keys come from a map, as the collector's would.
func BenchmarkIngest(b *testing.B) {
	const backends, perBackend = 32, 256
	keys := map[string][]byte{}
	var dgrams [][]byte
	for i := range backends {
		keys[fmt.Sprintf("backend-%02d", i)] = []byte(fmt.Sprintf("key-of-backend-%02d-0123456789", i))
	}
	for seq := 1; seq <= perBackend; seq++ {
		for i := range backends {
			id := fmt.Sprintf("backend-%02d", i)
			dgrams = append(dgrams, mkDatagram(b, id, uint64(seq), testEpoch, keys[id]))
		}
	}
	sink := &nopSink{}
	s, err := New(Config{
		Listen: "127.0.0.1:0",
		KeyFor: func(id string) ([]byte, bool) { k, ok := keys[id]; return k, ok },
		Now:    func() time.Time { return testEpoch },
	}, sink)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	from := netip.MustParseAddrPort("127.0.0.1:4000")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(dgrams)
		if j == 0 && i > 0 { // sequence numbers used up: fresh replay state
			b.StopTimer()
			for id := range keys {
				s.Forget(id)
			}
			b.StartTimer()
		}
		s.handle(dgrams[j], from)
	}
	b.StopTimer()
	if sink.n != b.N || s.Accepted() != uint64(b.N) {
		b.Fatalf("accepted %d of %d (rejected %v)", sink.n, b.N, s.Rejected())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}

type signalSink chan struct{}

func (c signalSink) Accept(*report.Report, netip.AddrPort) { c <- struct{}{} }

// BenchmarkServeLoopback is the whole server through a real socket: a
// client on 127.0.0.1 sends bursts of 64 datagrams and waits until the sink
// has all of them, so the figure includes the syscalls on both sides (which
// share the machine's cores) and no datagram is lost to a full buffer.
func BenchmarkServeLoopback(b *testing.B) {
	const burst = 64
	sink := make(signalSink, burst)
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch }}, sink)
	if err != nil {
		b.Fatal(err)
	}
	defer serve(b, s)()
	conn, err := net.DialUDP("udp", nil, s.Addr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	dgrams := make([][]byte, b.N)
	for i := range dgrams {
		dgrams[i] = mkDatagram(b, "a", uint64(i+1), testEpoch, keyA)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += burst {
		n := min(burst, b.N-i)
		for _, d := range dgrams[i : i+n] {
			if _, err := conn.Write(d); err != nil {
				b.Fatal(err)
			}
		}
		timeout := time.NewTimer(5 * time.Second) // one per burst, not per datagram
		for range n {
			select {
			case <-sink:
			case <-timeout.C:
				b.Fatalf("datagram lost: accepted %d, rejected %v", s.Accepted(), s.Rejected())
			}
		}
		timeout.Stop()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
}

// TestReplayMarksAcrossRestart is a controller restart at server level: the
// marks of the old server, restored into the new one, make it refuse a
// captured datagram and accept the probe's next report. Marks of backends
// with no key are dropped, malformed ones named.
func TestReplayMarksAcrossRestart(t *testing.T) {
	from := netip.MustParseAddrPort("127.0.0.1:4000")
	newServer := func() (*Server, *nopSink) {
		sink := &nopSink{}
		s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch }}, sink)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, sink
	}
	old, _ := newServer()
	var captured [][]byte
	for seq := uint64(1); seq <= 5; seq++ {
		d := mkDatagram(t, "a", seq, testEpoch, keyA)
		captured = append(captured, d)
		old.handle(d, from)
	}
	marks := old.ReplayMarks()
	js, err := json.Marshal(marks)
	if err != nil {
		t.Fatal(err)
	}
	var saved map[string]report.Mark
	if err := json.Unmarshal(js, &saved); err != nil {
		t.Fatal(err)
	}
	saved["gone"] = saved["a"]      // a backend removed while the controller was down
	saved["b"] = report.Mark{}      // malformed
	fresh, freshSink := newServer() // without marks, for comparison
	restarted, sink := newServer()
	err = restarted.RestoreReplayMarks(saved)
	if err == nil || !strings.Contains(err.Error(), `"b"`) || strings.Contains(err.Error(), "gone") {
		t.Errorf("RestoreReplayMarks error %v, want one naming the malformed mark of b only", err)
	}
	if _, ok := restarted.ReplayMarks()["gone"]; ok {
		t.Error("the mark of a backend without a key was restored")
	}
	for _, d := range captured {
		restarted.handle(d, from)
		fresh.handle(d, from)
	}
	if sink.n != 0 || restarted.Rejected()[report.ReasonReplay] != 5 {
		t.Errorf("restored server accepted %d captured datagrams (replays %d), want 0 and 5", sink.n, restarted.Rejected()[report.ReasonReplay])
	}
	if freshSink.n != 5 {
		t.Errorf("a server without marks accepted %d captured datagrams: the test no longer shows what marks prevent", freshSink.n)
	}
	restarted.handle(mkDatagram(t, "a", 6, testEpoch, keyA), from)
	if sink.n != 1 {
		t.Errorf("the probe's next report was not accepted after the restart (rejected %v)", restarted.Rejected())
	}
}

// TestRestoreReplayMarksDatedAhead: a mark dated after the collector's
// clock plus the window cannot come from an accepted report; restoring it
// would refuse the probe's next boots, so it is skipped and named.
func TestRestoreReplayMarksDatedAhead(t *testing.T) {
	mark := func(d time.Duration) report.Mark {
		at := testEpoch.Add(d).UnixNano()
		return report.Mark{Epochs: []report.EpochMark{{BootNonce: 1, TopSeq: 3, Seen: 1, Newest: at, Capped: at}}}
	}
	tests := []struct {
		name     string
		ahead    time.Duration
		restored bool
	}{
		{"in the past", -time.Hour, true},
		{"inside the window", report.DefaultClockSkew, true},
		{"beyond the window", report.DefaultClockSkew + time.Nanosecond, false},
		{"an hour ahead", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch }}, &nopSink{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.RestoreReplayMarks(map[string]report.Mark{"a": mark(tt.ahead)})
			_, got := s.ReplayMarks()["a"]
			if got != tt.restored {
				t.Fatalf("restored = %v, want %v (err %v)", got, tt.restored, err)
			}
			if !tt.restored && (err == nil || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), "after the collector's clock")) {
				t.Errorf("error %v, want one naming a and saying it is dated ahead", err)
			}
			if tt.restored && err != nil {
				t.Errorf("error %v", err)
			}
		})
	}
}

// TestServeSources: a burst of datagrams arrives complete and in order,
// with its IPv4 or IPv6 source as the Guard's and the limiter's key.
func TestServeSources(t *testing.T) {
	for _, tt := range []struct{ listen, client string }{
		{"127.0.0.1:0", "127.0.0.1"},
		{"[::1]:0", "::1"},
		{":0", "127.0.0.1"}, // dual-stack: an IPv4-mapped source comes back as IPv4
	} {
		t.Run(tt.listen, func(t *testing.T) {
			sink := make(chanSink, 200)
			s, err := New(Config{Listen: tt.listen, KeyFor: keyFor, Now: func() time.Time { return testEpoch }}, sink)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", tt.listen, err)
			}
			defer serve(t, s)()
			port := s.Addr().(*net.UDPAddr).Port
			conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(tt.client), uint16(port))))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			const n = 150
			for seq := uint64(1); seq <= n; seq++ {
				if _, err := conn.Write(mkDatagram(t, "a", seq, testEpoch, keyA)); err != nil {
					t.Fatal(err)
				}
			}
			client := conn.LocalAddr().(*net.UDPAddr).AddrPort()
			for seq := uint64(1); seq <= n; seq++ {
				got := recv(t, sink)
				if got.r.Seq != seq || got.from.Addr() != netip.MustParseAddr(tt.client) || got.from.Port() != client.Port() {
					t.Fatalf("report %d: seq %d from %s, want seq %d from %s:%d", seq, got.r.Seq, got.from, seq, tt.client, client.Port())
				}
			}
		})
	}
}

// A probe at its fastest health pace (probe/config.MinFastInterval, 10 ms) is accepted whole,
// even on a network that delivers every datagram twice: the duplicates are replays and are
// charged to the source's failure budget (DefaultSourceFailRate, 20 a second, well below 100),
// but a source whose last good report for the backend came from that address is never shed
// nor put on the kernel drop list.
// At the default fast_interval of 100 ms even the duplicates alone (10 a second) stay inside
// the budget.
func TestFastProbeAccepted(t *testing.T) {
	tests := []struct {
		name   string
		every  time.Duration
		copies int
	}{
		{"100ms", 100 * time.Millisecond, 1},
		{"100ms duplicated", 100 * time.Millisecond, 2},
		{"10ms duplicated", 10 * time.Millisecond, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := testEpoch
			sink := &nopSink{}
			s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return now }}, sink)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			from := netip.MustParseAddrPort("192.0.2.7:4000")
			const reports = 3000
			for seq := uint64(1); seq <= reports; seq++ {
				now = testEpoch.Add(time.Duration(seq) * tt.every)
				b := mkDatagram(t, "a", seq, now, keyA)
				for range tt.copies {
					s.handle(b, from)
				}
			}
			rej := s.Rejected()
			if sink.n != reports || rej[ReasonShed] != 0 {
				t.Errorf("accepted %d of %d, rejected %v", sink.n, reports, rej)
			}
			if want := uint64(reports * (tt.copies - 1)); rej[report.ReasonReplay] != want {
				t.Errorf("%d replays counted, want %d", rej[report.ReasonReplay], want)
			}
			if len(s.drops.entries) != 0 {
				t.Errorf("the probe's address was put on the kernel drop list: %v", s.drops.entries)
			}
		})
	}
}

// serve runs s's read loops until the returned stop is called, which fails tb if Serve
// returned an error.
func serve(tb testing.TB, s *Server) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	}
}
