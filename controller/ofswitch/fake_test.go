package ofswitch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"flowweight/internal/testutil"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// guard bounds every wait in these tests; it is a failure guard, never a way to let
// time pass (time is the manualClock's).
const guard = 10 * time.Second

// fakeSwitch is an OpenFlow 1.3 peer over loopback TCP with a software group table that
// rejects what Open vSwitch rejects: ADD of an existing group, MODIFY of a missing one.
type fakeSwitch struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex

	dpid          uint64
	helloVersion  uint8
	helloBitmap   uint32 // 0: send no bitmap element
	answerBarrier atomic.Bool
	answerEcho    atomic.Bool
	descParts     [][]byte                              // GROUP_DESC reply payloads, one part each
	replyType     uint16                                // when set, multipart replies claim this type instead of the request's
	dial          func(addr net.Addr) (net.Conn, error) // when set, replaces a plain dial (TLS)
	descRequests  atomic.Int32
	descReply     []byte // OFPMP_DESC reply payload; nil: Open vSwitch 3.1.0's

	mu     sync.Mutex
	groups map[uint32]bool
	// Controller role as Open vSwitch keeps it for this one connection: the generation is
	// checked for MASTER and SLAVE requests (wrapping comparison, ofproto/connmgr.c), and a
	// SLAVE's group mods are refused with OFPBRC_IS_SLAVE.
	role       uint32
	gen        uint64
	genDefined bool
	// roleHook, when set, answers ROLE_REQUESTs instead (malformed replies, silence).
	roleHook func(fr ofwire.Frame)

	recv chan ofwire.Frame // every message the controller sent, in order
	eof  chan struct{}
}

func newFake(t *testing.T, dpid uint64) *fakeSwitch {
	f := &fakeSwitch{t: t, dpid: dpid, helloVersion: ofwire.Version13, helloBitmap: 1 << ofwire.Version13,
		groups: map[uint32]bool{}, recv: make(chan ofwire.Frame, 1024), eof: make(chan struct{}), role: 1}
	f.answerBarrier.Store(true)
	f.answerEcho.Store(true)
	return f
}

// connect dials the server and serves until the connection ends.
func (f *fakeSwitch) connect(addr net.Addr) {
	dial := f.dial
	if dial == nil {
		dial = func(a net.Addr) (net.Conn, error) { return net.Dial(a.Network(), a.String()) }
	}
	c, err := dial(addr)
	if err != nil {
		f.t.Fatalf("fake switch %x: dial %v: %v", f.dpid, addr, err)
	}
	f.conn, f.br = c, bufio.NewReader(c)
	f.t.Cleanup(func() { c.Close() })
	var hello []byte
	if f.helloBitmap != 0 {
		hello = make([]byte, 8)
		binary.BigEndian.PutUint16(hello[0:], 1)
		binary.BigEndian.PutUint16(hello[2:], 8)
		binary.BigEndian.PutUint32(hello[4:], f.helloBitmap)
	}
	f.sendVersion(f.helloVersion, of.TypeHello, 1, hello)
	go f.serve()
}

func (f *fakeSwitch) send(t of.Type, xid uint32, body []byte) {
	f.sendVersion(ofwire.Version13, t, xid, body)
}

func (f *fakeSwitch) sendVersion(v uint8, t of.Type, xid uint32, body []byte) {
	b, err := ofwire.EncodeMessage(t, xid, ofwire.RawBody(body))
	if err != nil {
		panic(err)
	}
	b[0] = v
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.conn.Write(b) // errors show up as a closed connection in the test
}

func (f *fakeSwitch) serve() {
	defer close(f.eof)
	for {
		fr, err := ofwire.ReadFrame(f.br)
		if err != nil {
			return
		}
		if fr.Type == of.TypeMultipartRequest && len(fr.Body) >= 2 && binary.BigEndian.Uint16(fr.Body) == 0 {
			// OFPMP_DESC, asked once at connect (desc.go): answered like Open vSwitch 3.1.0.
			f.descRequests.Add(1)
			reply := f.descReply
			if reply == nil {
				reply = testDesc("3.1.0")
			}
			f.send(of.TypeMultipartReply, fr.Xid, append(make([]byte, 8), reply...))
			continue
		}
		f.recv <- fr
		switch fr.Type {
		case of.TypeFeaturesRequest:
			body := make([]byte, 24)
			binary.BigEndian.PutUint64(body, f.dpid)
			body[12] = 254
			f.send(of.TypeFeaturesReply, fr.Xid, body)
		case of.TypeEchoRequest:
			if f.answerEcho.Load() {
				f.send(of.TypeEchoReply, fr.Xid, fr.Body)
			}
		case of.TypeBarrierRequest:
			if f.answerBarrier.Load() {
				f.send(of.TypeBarrierReply, fr.Xid, nil)
			}
		case of.TypeGroupMod:
			f.groupMod(fr)
		case of.TypeRoleRequest:
			if f.roleHook != nil {
				f.roleHook(fr)
			} else {
				f.roleRequest(fr)
			}
		case of.TypeMultipartRequest:
			parts := f.descParts
			if len(parts) == 0 {
				parts = [][]byte{{}}
			}
			for i, p := range parts {
				var flags uint16
				if i < len(parts)-1 {
					flags = ofwire.ReplyMore
				}
				body := make([]byte, 8, 8+len(p))
				copy(body, fr.Body[0:2])
				if f.replyType != 0 {
					binary.BigEndian.PutUint16(body, f.replyType)
				}
				binary.BigEndian.PutUint16(body[2:], flags)
				f.send(of.TypeMultipartReply, fr.Xid, append(body, p...))
			}
		}
	}
}

// reject answers fr with an OFPT_ERROR carrying its first 64 bytes, as Open vSwitch does.
func (f *fakeSwitch) reject(fr ofwire.Frame, typ, code uint16) {
	raw, _ := ofwire.EncodeMessage(fr.Type, fr.Xid, ofwire.RawBody(fr.Body))
	f.send(of.TypeError, fr.Xid, ofwire.ErrorBody(typ, code, raw[:min(64, len(raw))]))
}

// roleRequest is handle_role_request of Open vSwitch's ofproto.c for one connection.
func (f *fakeSwitch) roleRequest(fr ofwire.Frame) {
	role, gen := binary.BigEndian.Uint32(fr.Body[0:4]), binary.BigEndian.Uint64(fr.Body[8:16])
	f.mu.Lock()
	defer f.mu.Unlock()
	if role != 0 { // not NOCHANGE
		if role != 1 { // MASTER and SLAVE carry a generation
			if f.genDefined && int64(gen-f.gen) < 0 {
				f.reject(fr, errTypeRoleRequestFailed, errCodeStale)
				return
			}
			f.gen, f.genDefined = gen, true
		}
		f.role = role
	}
	f.send(of.TypeRoleReply, fr.Xid, roleBody(f.role, f.replyGen()))
}

func (f *fakeSwitch) replyGen() uint64 {
	if !f.genDefined {
		return ^uint64(0)
	}
	return f.gen
}

// roleBody is an ofp_role_request/ofp_role_reply body.
func roleBody(role uint32, gen uint64) []byte { return ofwire.RoleBody(ofp.ControllerRole(role), gen) }

// roleStatusBody is an ONFT_ROLE_STATUS body as Open vSwitch sends it, followed by props.
func roleStatusBody(role uint32, reason uint8, gen uint64, props []byte) []byte {
	return ofwire.RoleStatusBody(ofp.ControllerRole(role), reason, gen, props)
}

// demote is what Open vSwitch does to this connection when another controller becomes
// MASTER with generation gen: SLAVE, and a role status saying so.
func (f *fakeSwitch) demote(gen uint64) {
	f.mu.Lock()
	f.role, f.gen, f.genDefined = 3, gen, true
	f.mu.Unlock()
	f.send(of.TypeExperiment, 0, roleStatusBody(3, 0, gen, nil))
}

func (f *fakeSwitch) groupMod(fr ofwire.Frame) {
	cmd := binary.BigEndian.Uint16(fr.Body[0:2])
	id := binary.BigEndian.Uint32(fr.Body[4:8])
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.role == 3 {
		f.reject(fr, errTypeBadRequest, errCodeIsSlave)
		return
	}
	reject := func(code uint16) { f.reject(fr, 6, code) }
	switch cmd {
	case 0: // add
		if f.groups[id] {
			reject(0) // OFPGMFC_GROUP_EXISTS
			return
		}
		f.groups[id] = true
	case 1: // modify
		if !f.groups[id] {
			reject(8) // OFPGMFC_UNKNOWN_GROUP
		}
	case 2:
		delete(f.groups, id)
	}
}

// next returns the next message the controller sent of type t, skipping others.
func (f *fakeSwitch) next(t of.Type) ofwire.Frame {
	f.t.Helper()
	timeout := time.After(guard)
	for {
		select {
		case fr := <-f.recv:
			if fr.Type == t {
				return fr
			}
		case <-timeout:
			f.t.Fatalf("fake switch %x: no %v from controller within %v", f.dpid, t, guard)
		}
	}
}

// manualClock is the server's clock in unit tests: time moves only by Advance, and keepalive
// ticks come only from tick.
type manualClock struct {
	*testutil.Clock
	ticks chan time.Time
}

func newManualClock() *manualClock {
	return &manualClock{Clock: testutil.NewClock(time.Unix(1_800_000_000, 0)), ticks: make(chan time.Time)}
}

func (c *manualClock) Ticker(time.Duration) (<-chan time.Time, func()) { return c.ticks, func() {} }

// waitTimer returns the duration of the next timer the code under test starts.
func (c *manualClock) waitTimer(t *testing.T) time.Duration {
	t.Helper()
	return c.WaitTimer(t, guard)
}

// tick delivers one keepalive tick to whichever session takes it.
func (c *manualClock) tick(t *testing.T) {
	t.Helper()
	select {
	case c.ticks <- c.Now():
	case <-time.After(guard):
		t.Fatalf("no keepalive took the tick within %v", guard)
	}
}

// event is one Handler call.
type event struct {
	kind string // connected, disconnected
	sw   *Switch
	err  error
}

type recHandler struct {
	events    chan event
	packetIns chan PacketIn
	gate      chan struct{} // when set, PacketIn blocks until it is closed
	entered   chan struct{}
}

func newRecHandler() *recHandler {
	return &recHandler{events: make(chan event, 64), packetIns: make(chan PacketIn, 64), entered: make(chan struct{}, 64)}
}

func (h *recHandler) Connected(sw *Switch) { h.events <- event{"connected", sw, nil} }
func (h *recHandler) Disconnected(sw *Switch, err error) {
	h.events <- event{"disconnected", sw, err}
}
func (h *recHandler) PacketIn(sw *Switch, pi PacketIn) {
	h.entered <- struct{}{}
	if h.gate != nil {
		<-h.gate
	}
	h.packetIns <- pi
}

func (h *recHandler) wait(t testing.TB, kind string) event {
	t.Helper()
	return h.waitFor(t, kind, guard)
}

func (h *recHandler) waitFor(t testing.TB, kind string, d time.Duration) event {
	t.Helper()
	select {
	case ev := <-h.events:
		if ev.kind != kind {
			t.Fatalf("handler got %s (err %v), want %s", ev.kind, ev.err, kind)
		}
		return ev
	case <-time.After(d):
		t.Fatalf("handler got no %s within %v", kind, d)
	}
	return event{}
}

// testServer starts a Server on loopback with a manual clock and stops it at cleanup.
func testServer(t *testing.T, cfg Config, h Handler) (*Server, *manualClock) {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	if cfg.Logger == nil { // a test that reads the log brings its own
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if testing.Verbose() {
			cfg.Logger = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
	srv, err := NewServer(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	clk := newManualClock()
	srv.now, srv.after, srv.ticker = clk.Now, clk.After, clk.Ticker
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(guard):
			t.Errorf("Serve did not return within %v of cancel", guard)
		}
	})
	return srv, clk
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// connectFake connects a fake switch and waits for the handler's Connected.
func connectFake(t *testing.T, srv *Server, h *recHandler, dpid uint64) (*fakeSwitch, *Switch) {
	t.Helper()
	f := newFake(t, dpid)
	f.connect(srv.Addr())
	ev := h.wait(t, "connected")
	if ev.sw.DatapathID() != dpid {
		t.Fatalf("connected datapath %x, want %x", ev.sw.DatapathID(), dpid)
	}
	return f, ev.sw
}

// testDesc is an OFPMP_DESC reply body as Open vSwitch sends it, with software version sw.
func testDesc(sw string) []byte {
	return ofwire.DescBody(ofwire.Desc{Manufacturer: "Nicira, Inc.", Hardware: "Open vSwitch", Software: sw, Serial: "None", Datapath: "None"})
}
