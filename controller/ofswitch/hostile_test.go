package ofswitch

// Tests of what a hostile peer can do to the listener: anyone who can connect can claim to
// be a switch, so every input is bounded and every fault is counted and rate-limited.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"flowweight/controller/ofwire"
	"flowweight/controller/ratelog"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"flowweight/internal/testutil"
)

// pipePeer is a switch on the other end of a net.Pipe, which buffers nothing: once it stops
// reading, our writer blocks at once, so "a peer that does not read" is deterministic.
type pipePeer struct {
	c   net.Conn
	br  *bufio.Reader
	wmu sync.Mutex
}

// newPipePeer hands one end of a pipe to srv as if accepted, and does the handshake on the
// other end; after it returns, the peer reads nothing more unless the test reads p.br.
func newPipePeer(t *testing.T, srv *Server, dpid uint64) *pipePeer {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close() })
	srv.mu.Lock()
	srv.shaking[server] = shake{} // a pipe has no source address
	srv.mu.Unlock()
	srv.wg.Add(1)
	go srv.handle(server)
	p := &pipePeer{c: client, br: bufio.NewReader(client)}
	go p.write(of.TypeHello, 1, ofwire.HelloBody()) // both ends write HELLO first
	for {
		f, err := ofwire.ReadFrame(p.br)
		if err != nil {
			t.Fatalf("pipe peer %x: handshake: %v", dpid, err)
		}
		switch f.Type {
		case of.TypeFeaturesRequest:
			body := make([]byte, 24)
			binary.BigEndian.PutUint64(body, dpid)
			if err := p.write(of.TypeFeaturesReply, f.Xid, body); err != nil {
				t.Fatal(err)
			}
		case of.TypeMultipartRequest:
			// OFPMP_DESC, asked once right after the handshake (desc.go): answered like
			// Open vSwitch 3.1.0, and then the peer is whatever the test makes it.
			if len(f.Body) >= 2 && binary.BigEndian.Uint16(f.Body) == 0 {
				if err := p.write(of.TypeMultipartReply, f.Xid, append(make([]byte, 8), testDesc("3.1.0")...)); err != nil {
					t.Fatal(err)
				}
				return p
			}
		}
	}
}

func (p *pipePeer) write(t of.Type, xid uint32, body []byte) error {
	b, err := ofwire.EncodeMessage(t, xid, ofwire.RawBody(body))
	if err != nil {
		return err
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err = p.c.Write(b)
	return err
}

// TestEchoFloodNoGoroutinePerEcho: 3,000 ECHO_REQUESTs from a peer that never reads are
// answered through the one writer's queue. The queue is made big enough to hold them all,
// so what is measured is the cost per echo: no goroutine (before the fix: one each, 2,744
// extra goroutines for this flood).
func TestEchoFloodNoGoroutinePerEcho(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{WriteQueueMessages: 40000, WriteQueueBytes: 64 << 20, WriteTimeout: time.Hour}, h)
	p := newPipePeer(t, srv, 0x101)
	sw := h.wait(t, "connected").sw
	runtime.GC()
	base := runtime.NumGoroutine()
	const n = 3000
	for i := range n {
		if err := p.write(of.TypeEchoRequest, uint32(i+1), []byte("sixteen bytes!!!")); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
	}
	testutil.Until(t, guard, func() bool {
		sw.out.mu.Lock()
		defer sw.out.mu.Unlock()
		return sw.out.replies == n
	}, "all echo replies queued")
	if extra := runtime.NumGoroutine() - base; extra > 5 {
		t.Errorf("%d goroutines more than before %d echoes, want none per echo", extra, n)
	}
	if sw.Err() != nil {
		t.Errorf("session ended under a flood its queue can hold: %v", sw.Err())
	}
}

// TestPeerNotReadingIsClosed: with the default queue, a peer that sends 16 KiB echoes and
// never reads is closed once it owes us a quarter of the queue's bytes in replies, with an
// error naming it, long before the write deadline.
func TestPeerNotReadingIsClosed(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{WriteTimeout: time.Hour}, h)
	p := newPipePeer(t, srv, 0x102)
	h.wait(t, "connected")
	body := bytes.Repeat([]byte{0x55}, 16<<10)
	sent := 0
	for ; sent < 3000; sent++ {
		if err := p.write(of.TypeEchoRequest, uint32(sent+1), body); err != nil {
			break
		}
	}
	ev := h.wait(t, "disconnected")
	if !errors.Is(ev.err, ErrPeerNotReading) {
		t.Fatalf("disconnected with %v, want ErrPeerNotReading", ev.err)
	}
	for _, want := range []string{"0000000000000102", "pipe", "replies"} {
		if !strings.Contains(ev.err.Error(), want) {
			t.Errorf("error %q does not name %q", ev.err, want)
		}
	}
	budget := DefaultWriteQueueBytes / 4 / (ofwire.HeaderLen + len(body))
	if sent > budget+2 {
		t.Errorf("peer wrote %d echoes before being closed, budget %d", sent, budget)
	}
	if n := srv.Stats().Faults[FaultWriteQueueFull]; n != 1 {
		t.Errorf("write_queue_full = %d, want 1", n)
	}
}

// TestWriteDeadlineClosesPeer: one of our own writes that the peer does not take within
// WriteTimeout ends the session with ErrPeerNotReading (the write deadline is set before
// the write, which the library does not do).
func TestWriteDeadlineClosesPeer(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{WriteTimeout: 20 * time.Millisecond}, h)
	newPipePeer(t, srv, 0x103)
	sw := h.wait(t, "connected").sw
	if err := sw.PacketOut(context.Background(), uint32(ofp.PortController), nil, []byte("x")); err != nil {
		t.Fatalf("PacketOut queued nothing: %v", err)
	}
	ev := h.wait(t, "disconnected")
	if !errors.Is(ev.err, ErrPeerNotReading) || !strings.Contains(ev.err.Error(), "not written within") {
		t.Fatalf("disconnected with %v, want ErrPeerNotReading after the write deadline", ev.err)
	}
	if n := srv.Stats().Faults[FaultWriteTimeout]; n != 1 {
		t.Errorf("write_timeout = %d, want 1", n)
	}
}

// TestOwnWritesWaitForRoom: our own requests never fail for a full queue; they wait for
// room, until their context ends.
func TestOwnWritesWaitForRoom(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{WriteTimeout: time.Hour, WriteQueueMessages: 4}, h)
	p := newPipePeer(t, srv, 0x104)
	sw := h.wait(t, "connected").sw
	for i := range 4 {
		if err := sw.PacketOut(context.Background(), uint32(ofp.PortController), nil, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.PacketOut(ctx, uint32(ofp.PortController), nil, []byte("fifth")) }()
	select {
	case err := <-done:
		t.Fatalf("fifth write returned %v with the queue full", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("fifth write: %v, want context.Canceled", err)
	}
	// The peer reads: everything queued goes out in order, and room opens.
	for i := range 4 {
		f, err := ofwire.ReadFrame(p.br)
		if err != nil || f.Type != of.TypePacketOut {
			t.Fatalf("message %d: %v %v", i, f.Type, err)
		}
	}
	if err := sw.PacketOut(context.Background(), uint32(ofp.PortController), nil, []byte("sixth")); err != nil {
		t.Fatal(err)
	}
	if sw.Err() != nil {
		t.Fatalf("session ended: %v", sw.Err())
	}
}

// bareSwitch is a session reading r, with no connection and no goroutines: for checking
// what the reader does with a message, and what it costs.
func bareSwitch(r io.Reader, cfg Config) *Switch {
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg = cfg.withDefaults()
	srv := &Server{cfg: cfg, now: time.Now, switches: map[uint64]*Switch{}}
	srv.plog = newPeerLog(time.Now)
	return &Switch{srv: srv, cfg: cfg, br: bufio.NewReader(r), remote: "test", log: cfg.Logger,
		pending: map[uint32]*waiter{}, out: newOutQueue(cfg), packetIns: make(chan PacketIn, 1), done: make(chan struct{}),
		roleChanged: make(chan struct{}, 1)}
}

// readN runs the reader's routing on n messages of r.
func (sw *Switch) readN(t testing.TB, n int) {
	t.Helper()
	for i := range n {
		var hb [ofwire.HeaderLen]byte
		if _, err := io.ReadFull(sw.br, hb[:]); err != nil {
			t.Fatalf("message %d header: %v", i, err)
		}
		h, err := ofwire.ParseHeader(hb[:])
		if err != nil {
			t.Fatal(err)
		}
		if err := sw.route(h, int(h.Length)-ofwire.HeaderLen); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
}

// TestUnwantedBodiesSkippedUnread: the reader decides from the header whether a body is
// wanted; 64 KiB bodies of messages nobody waits for are skipped without being allocated,
// counted by fault, and the stream stays in step.
func TestUnwantedBodiesSkippedUnread(t *testing.T) {
	big := ofwire.MaxMessageLen - ofwire.HeaderLen
	tests := []struct {
		name  string
		typ   of.Type
		xid   uint32
		fault Fault
	}{
		{"unknown type", of.Type(200), 1, FaultIgnoredMessage},
		{"port status", of.TypePortStatus, 0, FaultIgnoredMessage},
		{"packet-in over MaxPacketInBytes", of.TypePacketIn, 0, FaultPacketInTooLarge},
		{"multipart reply nobody asked for", of.TypeMultipartReply, 77, FaultUnsolicitedReply},
		{"barrier reply nobody asked for", of.TypeBarrierReply, 78, FaultUnsolicitedReply},
		{"echo reply nobody asked for", of.TypeEchoReply, 79, FaultUnsolicitedReply},
		{"features reply after the handshake", of.TypeFeaturesReply, 80, FaultIgnoredMessage},
	}
	const n = 200
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := ofwire.EncodeMessage(tt.typ, tt.xid, ofwire.RawBody(make([]byte, big)))
			if err != nil {
				t.Fatal(err)
			}
			var stream bytes.Buffer
			for range n {
				stream.Write(msg)
			}
			sentinel, _ := ofwire.EncodeMessage(of.TypePacketIn, 0, ofwire.RawBody(ofwire.PacketInBody(7, 0, []byte("ok"))))
			stream.Write(sentinel)
			sw := bareSwitch(bytes.NewReader(stream.Bytes()), Config{})
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			sw.readN(t, n)
			runtime.ReadMemStats(&after)
			if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 1024 {
				t.Errorf("%d bytes allocated per %d-byte message, want the body skipped unread", per, len(msg))
			}
			if got := sw.srv.faults[tt.fault].Load(); got != n {
				t.Errorf("%s = %d, want %d", tt.fault, got, n)
			}
			sw.readN(t, 1) // still in step: the next message is a good packet-in
			if pi := <-sw.packetIns; pi.InPort != 7 {
				t.Errorf("sentinel packet-in in_port %d, want 7", pi.InPort)
			}
		})
	}
}

// TestMultipartLimits: a reply over its byte or part bound fails that request with an
// error naming the switch and the type; the rest of it is discarded; the session and an
// unrelated request in flight carry on.
func TestMultipartLimits(t *testing.T) {
	rep := func(n, size int) [][]byte {
		var p [][]byte
		for i := range n {
			p = append(p, bytes.Repeat([]byte{byte(i)}, size))
		}
		return p
	}
	tests := []struct {
		name      string
		cfg       Config
		parts     [][]byte
		replyType uint16
		lim       Limit
		wantErr   error
		fault     Fault
	}{
		{name: "bytes over the call's limit", parts: rep(10, 1000), lim: Limit{MaxBytes: 2500}, wantErr: ErrReplyTooLarge, fault: FaultMultipartTooLarge},
		{name: "parts over the call's limit", parts: rep(5, 8), lim: Limit{MaxParts: 3}, wantErr: ErrReplyTooLarge, fault: FaultMultipartTooLarge},
		{name: "over the configured default", cfg: Config{MaxMultipartBytes: 1000}, parts: rep(3, 600), wantErr: ErrReplyTooLarge, fault: FaultMultipartTooLarge},
		{name: "exactly at the limit", parts: rep(3, 1000), lim: Limit{MaxBytes: 3000, MaxParts: 3}},
		{name: "another type than asked", parts: rep(2, 8), replyType: uint16(ofp.MultipartTypeFlow), wantErr: ErrMalformed, fault: FaultMultipartTypeMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newRecHandler()
			srv, _ := testServer(t, tt.cfg, h)
			f := newFake(t, 0x200)
			f.descParts, f.replyType = tt.parts, tt.replyType
			f.connect(srv.Addr())
			sw := h.wait(t, "connected").sw

			// An unrelated Apply waits for its barrier while the multipart reply goes wrong.
			f.answerBarrier.Store(false)
			applied := make(chan error, 1)
			go func() {
				_, err := sw.Apply(context.Background(), []Message{groupMod(ofp.GroupAdd, 1, 1)})
				applied <- err
			}()
			barrier := f.next(of.TypeBarrierRequest)

			got, err := sw.MultipartLimit(context.Background(), ofp.MultipartTypeGroupDescription, nil, tt.lim)
			if tt.wantErr == nil {
				if err != nil || !bytes.Equal(got, bytes.Join(tt.parts, nil)) {
					t.Fatalf("MultipartLimit = %d bytes, %v; want all %d parts", len(got), err, len(tt.parts))
				}
			} else {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("MultipartLimit error %v, want %v", err, tt.wantErr)
				}
				for _, want := range []string{"0000000000000200", "MultipartTypeGroupDescription"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %q", err, want)
					}
				}
				if n := srv.Stats().Faults[tt.fault]; n != 1 {
					t.Errorf("%s = %d, want 1", tt.fault, n)
				}
			}
			f.send(of.TypeBarrierReply, barrier.Xid, nil)
			if err := <-applied; err != nil {
				t.Fatalf("unrelated Apply failed: %v", err)
			}
			f.answerBarrier.Store(true)
			if _, err := sw.Apply(context.Background(), []Message{groupMod(ofp.GroupAdd, 2, 1)}); err != nil {
				t.Fatalf("session unusable after the refused reply: %v", err)
			}
			if sw.Err() != nil {
				t.Fatalf("session closed: %v", sw.Err())
			}
		})
	}
}

// TestUnsolicitedRepliesIgnored: replies carrying xids we never sent, and repeats of a
// reply already taken, are counted and discarded; they reach no request.
func TestUnsolicitedRepliesIgnored(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f, sw := connectFake(t, srv, h, 0x201)
	f.send(of.TypeMultipartReply, 424242, make([]byte, 8+100))
	f.send(of.TypeBarrierReply, 31337, nil)
	f.send(of.TypeEchoReply, 999, []byte("12345678"))
	if _, err := sw.Multipart(context.Background(), ofp.MultipartTypeGroupDescription, nil); err != nil {
		t.Fatal(err)
	}
	if n := srv.Stats().Faults[FaultUnsolicitedReply]; n != 3 {
		t.Errorf("unsolicited_reply = %d, want 3", n)
	}
	if sw.EchoRTT() != 0 {
		t.Errorf("EchoRTT %v taken from an echo reply we never asked for", sw.EchoRTT())
	}
}

// TestApplyTakesOneErrorPerXid: a switch repeating OFPT_ERRORs for a stage's xid cannot
// grow what the stage holds; the repeats are counted.
func TestApplyTakesOneErrorPerXid(t *testing.T) {
	sw := bareSwitch(bytes.NewReader(nil), Config{})
	w := newWaiter(waitApply)
	sw.register(w, 5, 6)
	e, _ := ofwire.EncodeMessage(of.TypeError, 5, ofwire.ErrorBody(6, 0, nil))
	var stream bytes.Buffer
	for range 1000 {
		stream.Write(e)
	}
	sw.br = bufio.NewReader(&stream)
	sw.readN(t, 1000)
	if got := len(w.take()); got != 1 {
		t.Errorf("stage holds %d errors for one xid, want 1", got)
	}
}

// jsonLines counts the log lines with msg in buf and returns the last one.
func jsonLines(t *testing.T, buf *syncBuffer, msg string) (int, map[string]any) {
	t.Helper()
	n := 0
	var last map[string]any
	for _, l := range strings.Split(buf.String(), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			n++
			last = m
		}
	}
	return n, last
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFaultLogsRateLimited: 10,000 OFPT_ERRORs and 10,000 malformed packet-ins give one log
// line per reason per 10 s (before the fix: 20,000 lines), each counted exactly; the next
// line of a reason reports how many were suppressed.
func TestFaultLogsRateLimited(t *testing.T) {
	var buf syncBuffer
	h := newRecHandler()
	srv, clk := testServer(t, Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, h)
	f, sw := connectFake(t, srv, h, 0x300)
	const n = 10000
	flood := func(k int) {
		for i := range k {
			f.send(of.TypeError, uint32(1_000_000+i), ofwire.ErrorBody(1, 2, nil))
			f.send(of.TypePacketIn, 0, []byte{1, 2, 3})
		}
		if _, err := sw.Multipart(context.Background(), ofp.MultipartTypeGroupDescription, nil); err != nil {
			t.Fatal(err) // a round trip: the reader has handled everything before it
		}
	}
	flood(n)
	for _, msg := range []string{"switch error", "bad packet-in"} {
		if got, _ := jsonLines(t, &buf, msg); got != 1 {
			t.Errorf("%q: %d lines for %d messages, want 1", msg, got, n)
		}
	}
	st := srv.Stats()
	if st.Faults[FaultSwitchError] != n || st.Faults[FaultMalformedPacketIn] != n || st.ErrorsReceived != n {
		t.Errorf("faults switch_error=%d malformed_packet_in=%d errors=%d, want %d each",
			st.Faults[FaultSwitchError], st.Faults[FaultMalformedPacketIn], st.ErrorsReceived, n)
	}
	clk.Advance(ratelog.Every)
	flood(1)
	for _, msg := range []string{"switch error", "bad packet-in"} {
		got, last := jsonLines(t, &buf, msg)
		if got != 2 || last["suppressed"] != float64(n-1) || last["dpid"] != "0000000000000300" || last["reason"] == nil {
			t.Errorf("%q: %d lines, last %v; want 2 lines, the last with suppressed=%d, dpid and reason", msg, got, last, n-1)
		}
	}
}

// TestDuplicateDatapath: the established session of a datapath id wins unless it is dead.
func TestDuplicateDatapath(t *testing.T) {
	t.Run("live session keeps the id, newcomer refused", func(t *testing.T) {
		h := newRecHandler()
		srv, _ := testServer(t, Config{}, h)
		_, swA := connectFake(t, srv, h, 10)
		b := newFake(t, 10)
		b.connect(srv.Addr())
		select {
		case <-b.eof:
		case <-time.After(guard):
			t.Fatal("newcomer not closed")
		}
		if got, _ := srv.Switch(10); got != swA || swA.Err() != nil {
			t.Fatalf("Server.Switch = %v (err %v), want the established session", got, swA.Err())
		}
		select {
		case ev := <-h.events:
			t.Fatalf("handler got %s for a refused duplicate", ev.kind)
		default:
		}
		if n := srv.Stats().Faults[FaultDuplicateDatapath]; n != 1 {
			t.Errorf("duplicate_datapath = %d, want 1", n)
		}
		if _, err := swA.Apply(context.Background(), []Message{groupMod(ofp.GroupAdd, 1, 1)}); err != nil {
			t.Errorf("Apply on the established session: %v", err)
		}
	})
	t.Run("dead session replaced after an unanswered probe", func(t *testing.T) {
		h := newRecHandler()
		srv, clk := testServer(t, Config{ProbeTimeout: 3 * time.Second}, h)
		a, swA := connectFake(t, srv, h, 11)
		a.answerEcho.Store(false)
		b := newFake(t, 11)
		b.connect(srv.Addr())
		if d := clk.waitTimer(t); d != 3*time.Second {
			t.Fatalf("probe timer %v, want ProbeTimeout 3s", d)
		}
		a.next(of.TypeEchoRequest) // the probe reached the old session
		// While the probe runs, a third claim is refused at once.
		c := newFake(t, 11)
		c.connect(srv.Addr())
		select {
		case <-c.eof:
		case <-time.After(guard):
			t.Fatal("third claim not refused while the probe runs")
		}
		clk.Advance(3 * time.Second)
		ev := h.wait(t, "disconnected")
		if ev.sw != swA || !errors.Is(ev.err, ErrReplaced) {
			t.Fatalf("disconnected %v with %v, want the old session with ErrReplaced", ev.sw, ev.err)
		}
		swB := h.wait(t, "connected").sw
		if got, _ := srv.Switch(11); got != swB || swB == swA {
			t.Fatal("Server.Switch does not return the newcomer")
		}
		if _, err := swB.Apply(context.Background(), []Message{groupMod(ofp.GroupAdd, 1, 1)}); err != nil {
			t.Errorf("Apply on the new session: %v", err)
		}
		if n := srv.Stats().Faults[FaultDuplicateDatapath]; n != 1 {
			t.Errorf("duplicate_datapath = %d, want 1 (the third claim)", n)
		}
	})
	t.Run("session silent past the echo timeout replaced without a probe", func(t *testing.T) {
		h := newRecHandler()
		srv, clk := testServer(t, Config{}, h)
		_, swA := connectFake(t, srv, h, 12)
		clk.Advance(DefaultEchoTimeout)
		b := newFake(t, 12)
		b.connect(srv.Addr())
		if ev := h.wait(t, "disconnected"); ev.sw != swA || !errors.Is(ev.err, ErrReplaced) {
			t.Fatalf("disconnected %v with %v, want the old session with ErrReplaced", ev.sw, ev.err)
		}
		h.wait(t, "connected")
		select {
		case d := <-clk.Started():
			t.Errorf("a %v timer was started; a silent session needs no probe", d)
		default:
		}
	})
}

// TestMaxSwitches: datapath ids beyond MaxSwitches are refused, so peer-chosen ids cannot
// grow the session table without bound.
func TestMaxSwitches(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{MaxSwitches: 2}, h)
	connectFake(t, srv, h, 1)
	connectFake(t, srv, h, 2)
	f := newFake(t, 3)
	f.connect(srv.Addr())
	select {
	case <-f.eof:
	case <-time.After(guard):
		t.Fatal("switch beyond MaxSwitches not refused")
	}
	if n := srv.Stats().Faults[FaultTooManySwitches]; n != 1 || srv.Stats().Switches != 2 {
		t.Errorf("too_many_switches = %d, switches %d; want 1 and 2", n, srv.Stats().Switches)
	}
}

// TestMaxHandshakes: connections beyond MaxHandshakes that sit in the handshake are closed
// at accept, before a goroutine is spent on them. (All from one source, with a per-source
// share as large as the whole: TestHandshakesBudgetedPerSource tests the share.)
func TestMaxHandshakes(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{MaxHandshakes: 2, MaxHandshakesPerSource: 2}, h)
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		idle = append(idle, c)
	}
	testutil.Until(t, guard, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.shaking) == 2
	}, "two connections in the handshake")
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("third connection: %v, want EOF", err)
	}
	if n := srv.Stats().Faults[FaultTooManyHandshakes]; n != 1 {
		t.Errorf("too_many_handshakes = %d, want 1", n)
	}
	_ = idle
}

// BenchmarkEchoFlood measures what 3,000 16 KiB ECHO_REQUESTs from a peer that never reads
// leave behind over loopback TCP: goroutines and heap in use right after the flood, and
// whether the session was closed. Run with -benchtime=1x.
func BenchmarkEchoFlood(b *testing.B) {
	for range b.N {
		h := newRecHandler()
		srv, err := NewServer(Config{Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)}, h)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx) }()
		runtime.GC()
		base := runtime.NumGoroutine()
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReader(c)
		hello, _ := ofwire.EncodeMessage(of.TypeHello, 1, ofwire.HelloBody())
		c.Write(hello)
		for {
			f, err := ofwire.ReadFrame(br)
			if err != nil {
				b.Fatal(err)
			}
			if f.Type == of.TypeFeaturesRequest {
				body := make([]byte, 24)
				binary.BigEndian.PutUint64(body, 0xf100d)
				fr, _ := ofwire.EncodeMessage(of.TypeFeaturesReply, f.Xid, ofwire.RawBody(body))
				c.Write(fr)
			}
			if f.Type == of.TypeSetConfig {
				break
			}
		}
		<-h.events
		echo, _ := ofwire.EncodeMessage(of.TypeEchoRequest, 1, ofwire.RawBody(bytes.Repeat([]byte{0x55}, 16<<10)))
		c.SetWriteDeadline(time.Now().Add(guard))
		sent := 0
		for ; sent < 3000; sent++ {
			if _, err := c.Write(echo); err != nil {
				break
			}
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(runtime.NumGoroutine()-base), "goroutines")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(sent), "echoes-sent")
		closed := 0.0
		if srv.Stats().Faults[FaultWriteQueueFull] > 0 {
			closed = 1
		}
		b.ReportMetric(closed, "closed")
		c.Close()
		cancel()
		<-done
	}
}

// TestBadHeaderClosesSession: a header whose length cannot hold the header itself leaves
// the stream unreadable; the session ends with an error naming the switch, counted.
func TestBadHeaderClosesSession(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f, _ := connectFake(t, srv, h, 0x400)
	f.wmu.Lock()
	f.conn.Write([]byte{ofwire.Version13, byte(of.TypeEchoRequest), 0, 4, 0, 0, 0, 9})
	f.wmu.Unlock()
	ev := h.wait(t, "disconnected")
	if !errors.Is(ev.err, ErrMalformed) || !strings.Contains(ev.err.Error(), "0000000000000400") {
		t.Fatalf("disconnected with %v, want ErrMalformed naming the switch", ev.err)
	}
	if n := srv.Stats().Faults[FaultMalformedHeader]; n != 1 {
		t.Errorf("malformed_header = %d, want 1", n)
	}
}

// TestHandshakeReadsOnlyWhatItUses: during HELLO/FEATURES an oversized HELLO fails the
// handshake (counted), and bodies of messages the handshake does not use are skipped.
func TestHandshakeReadsOnlyWhatItUses(t *testing.T) {
	t.Run("oversized HELLO", func(t *testing.T) {
		h := newRecHandler()
		srv, _ := testServer(t, Config{}, h)
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hello, _ := ofwire.EncodeMessage(of.TypeHello, 1, ofwire.RawBody(make([]byte, maxHandshakeBody+1)))
		c.Write(hello)
		io.Copy(io.Discard, c) // until the controller closes
		if st := srv.Stats(); st.HandshakeFailure != 1 || st.Faults[FaultHandshakeFailed] != 1 {
			t.Errorf("handshake failures %d, fault %d; want 1 and 1", st.HandshakeFailure, st.Faults[FaultHandshakeFailed])
		}
	})
	t.Run("unused bodies skipped", func(t *testing.T) {
		var stream bytes.Buffer
		hello, _ := ofwire.EncodeMessage(of.TypeHello, 1, ofwire.HelloBody())
		junk, _ := ofwire.EncodeMessage(of.TypePortStatus, 2, ofwire.RawBody(make([]byte, ofwire.MaxMessageLen-ofwire.HeaderLen)))
		stream.Write(hello)
		for range 100 {
			stream.Write(junk)
		}
		br := bufio.NewReader(&stream)
		if f, err := readHandshakeFrame(br); err != nil || f.Type != of.TypeHello || len(f.Body) != 8 {
			t.Fatalf("HELLO: %v %v %d", f.Type, err, len(f.Body))
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100 {
			if f, err := readHandshakeFrame(br); err != nil || f.Body != nil {
				t.Fatalf("port status: %v, body %d bytes", err, len(f.Body))
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 1024 {
			t.Errorf("%d bytes allocated per skipped 64 KiB message", per)
		}
	})
}
