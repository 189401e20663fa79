package ofswitch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

func groupMod(cmd ofp.GroupCommand, id uint32, weights ...uint16) Message {
	g := &ofp.GroupMod{Command: cmd, Type: ofp.GroupTypeSelect, Group: ofp.Group(id)}
	for i, w := range weights {
		g.Buckets = append(g.Buckets, ofp.Bucket{Weight: w, WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny,
			Actions: ofp.Actions{&ofp.ActionOutput{Port: ofp.PortNo(i + 1)}}})
	}
	return Message{Type: of.TypeGroupMod, Body: g, Desc: fmt.Sprintf("group %d cmd %d", id, cmd)}
}

func TestHandshake(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f, sw := connectFake(t, srv, h, 0xfeedface00000001)
	hello := f.next(of.TypeHello)
	bm, ok, err := ofwire.HelloVersions(hello.Body)
	if err != nil || !ok || len(bm) != 1 || bm[0] != 1<<ofwire.Version13 {
		t.Errorf("our HELLO bitmap = %x ok=%v err=%v, want only 1.3", bm, ok, err)
	}
	f.next(of.TypeFeaturesRequest)
	sc := f.next(of.TypeSetConfig)
	if miss := binary.BigEndian.Uint16(sc.Body[2:]); miss != ofp.ContentLenNoBuffer {
		t.Errorf("SET_CONFIG miss_send_len = %#x, want %#x (OFPCML_NO_BUFFER)", miss, ofp.ContentLenNoBuffer)
	}
	if got, ok := srv.Switch(0xfeedface00000001); !ok || got != sw {
		t.Errorf("Server.Switch = %v, %v; want the connected session", got, ok)
	}
	if sw.Features().NumTables != 254 {
		t.Errorf("NumTables = %d, want 254 from FEATURES_REPLY", sw.Features().NumTables)
	}
}

func TestHelloNegotiation(t *testing.T) {
	tests := []struct {
		name    string
		version uint8
		bitmap  uint32
		ok      bool
	}{
		{"1.3 with bitmap", 4, 1 << 4, true},
		{"1.3 without bitmap", 4, 0, true},
		{"1.5 offering 1.3 too", 6, 1<<6 | 1<<4 | 1<<1, true},
		{"1.5 header no bitmap", 6, 0, true}, // lower of the two headers is 1.3
		{"1.0 only", 1, 0, false},
		{"1.0 bitmap", 1, 1 << 1, false},
		{"1.4 and 1.0 but not 1.3", 5, 1<<5 | 1<<1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newRecHandler()
			srv, _ := testServer(t, Config{}, h)
			f := newFake(t, 7)
			f.helloVersion, f.helloBitmap = tt.version, tt.bitmap
			f.connect(srv.Addr())
			if tt.ok {
				h.wait(t, "connected")
				return
			}
			e := f.next(of.TypeError)
			em, err := ofwire.ParseError(e.Body)
			if err != nil || em.Type != 0 || em.Code != 0 {
				t.Fatalf("got error %+v (%v), want HELLO_FAILED/INCOMPATIBLE", em, err)
			}
			if e.Version != min(tt.version, ofwire.Version13) {
				t.Errorf("error sent in version %d, want the peer's %d", e.Version, tt.version)
			}
			select {
			case <-f.eof:
			case <-time.After(guard):
				t.Fatal("connection not closed after HELLO_FAILED")
			}
			select {
			case ev := <-h.events:
				t.Fatalf("handler got %s for a refused switch", ev.kind)
			default:
			}
			if srv.Stats().HandshakeFailure != 1 {
				t.Errorf("HandshakeFailure = %d, want 1", srv.Stats().HandshakeFailure)
			}
		})
	}
}

func TestApplyXidsAndBarrier(t *testing.T) {
	h := newRecHandler()
	srv, clk := testServer(t, Config{}, h)
	f, sw := connectFake(t, srv, h, 1)
	stages := [][]Message{
		{groupMod(ofp.GroupAdd, 1, 10, 20, 30), groupMod(ofp.GroupAdd, 2, 5)},
		{groupMod(ofp.GroupModify, 1, 30, 20, 10)},
	}
	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	f.answerBarrier.Store(false) // the test answers the first barrier itself
	go func() {
		res, err := sw.Apply(context.Background(), stages...)
		done <- out{res, err}
	}()
	seen := map[uint32]bool{}
	for i, stage := range stages {
		for j := range stage {
			g := f.next(of.TypeGroupMod)
			if g.Xid == 0 || seen[g.Xid] {
				t.Errorf("stage %d msg %d: xid %d is zero or reused", i, j, g.Xid)
			}
			seen[g.Xid] = true
		}
		b := f.next(of.TypeBarrierRequest)
		if seen[b.Xid] || b.Xid == 0 {
			t.Errorf("stage %d: barrier xid %d is zero or reused", i, b.Xid)
		}
		seen[b.Xid] = true
		if i == 0 {
			// Stage 1 must wait for this reply; it comes 3ms later on the manual clock.
			select {
			case o := <-done:
				t.Fatalf("Apply returned %+v before the first barrier reply", o)
			case <-f.recv:
				t.Fatal("stage 1 sent before the first barrier reply")
			default:
			}
			<-clk.Started()
			clk.Advance(3 * time.Millisecond)
			f.answerBarrier.Store(true)
			f.send(of.TypeBarrierReply, b.Xid, nil)
		}
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("Apply: %v", o.err)
	}
	if len(o.res.BarrierRTT) != 2 || o.res.Messages != 3 {
		t.Fatalf("Result = %+v, want 2 stages and 3 messages", o.res)
	}
	if o.res.BarrierRTT[0] != 3*time.Millisecond || o.res.BarrierRTT[1] != 0 {
		t.Errorf("BarrierRTT = %v, want [3ms 0s] on the manual clock", o.res.BarrierRTT)
	}
}

func TestApplyErrorMapsToMessage(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f, sw := connectFake(t, srv, h, 2)
	if _, err := sw.Apply(context.Background(), []Message{groupMod(ofp.GroupAdd, 1, 1)}); err != nil {
		t.Fatalf("setup ADD group 1: %v", err)
	}
	tests := []struct {
		name     string
		stages   [][]Message
		wantDesc []string // one per expected OpError, in order
		wantCode []string
		notSent  uint32 // a group id of a later stage that must not reach the switch
	}{
		{
			name:     "modify missing",
			stages:   [][]Message{{groupMod(ofp.GroupModify, 9, 1)}, {groupMod(ofp.GroupAdd, 50, 1)}},
			wantDesc: []string{"group 9 cmd 1"}, wantCode: []string{"OFPGMFC_UNKNOWN_GROUP"}, notSent: 50,
		},
		{
			name: "two errors in one stage, good message between",
			stages: [][]Message{{groupMod(ofp.GroupAdd, 1, 1), groupMod(ofp.GroupAdd, 3, 1), groupMod(ofp.GroupModify, 4, 1)},
				{groupMod(ofp.GroupAdd, 51, 1)}},
			wantDesc: []string{"group 1 cmd 0", "group 4 cmd 1"},
			wantCode: []string{"OFPGMFC_GROUP_EXISTS", "OFPGMFC_UNKNOWN_GROUP"}, notSent: 51,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sw.Apply(context.Background(), tt.stages...)
			if err == nil {
				t.Fatal("Apply succeeded, want an OpError")
			}
			if len(res.BarrierRTT) != 0 {
				t.Errorf("a failed first stage reported %d applied stages", len(res.BarrierRTT))
			}
			var ops []*OpError
			if len(tt.wantDesc) == 1 {
				var op *OpError
				if !errors.As(err, &op) {
					t.Fatalf("error %v is not an *OpError", err)
				}
				ops = append(ops, op)
			} else {
				j, ok := err.(interface{ Unwrap() []error })
				if !ok {
					t.Fatalf("error %T is not a join of several", err)
				}
				for _, e := range j.Unwrap() {
					var op *OpError
					if !errors.As(e, &op) {
						t.Fatalf("joined error %v is not an *OpError", e)
					}
					ops = append(ops, op)
				}
			}
			if len(ops) != len(tt.wantDesc) {
				t.Fatalf("got %d OpErrors, want %d: %v", len(ops), len(tt.wantDesc), err)
			}
			for i, op := range ops {
				if op.Msg.Desc != tt.wantDesc[i] || op.CodeName != tt.wantCode[i] || op.TypeName != "OFPET_GROUP_MOD_FAILED" {
					t.Errorf("error %d = %q %s/%s, want %q OFPET_GROUP_MOD_FAILED/%s", i, op.Msg.Desc, op.TypeName, op.CodeName, tt.wantDesc[i], tt.wantCode[i])
				}
				if !strings.Contains(op.Error(), tt.wantDesc[i]) || op.DatapathID != 2 || len(op.Data) == 0 {
					t.Errorf("error %d text %q / dpid %x / data %d bytes", i, op.Error(), op.DatapathID, len(op.Data))
				}
			}
			// Synchronise on a later round trip, then check the later stage never went out.
			if _, err := sw.Apply(context.Background(), []Message{groupMod(ofp.GroupDelete, 999)}); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			sent := f.groups[tt.notSent]
			f.mu.Unlock()
			if sent {
				t.Errorf("group %d of the stage after the failed one reached the switch", tt.notSent)
			}
		})
	}
}

func TestApplyBarrierTimeout(t *testing.T) {
	h := newRecHandler()
	srv, clk := testServer(t, Config{BarrierTimeout: 2 * time.Second}, h)
	f, sw := connectFake(t, srv, h, 3)
	f.answerBarrier.Store(false) // set before any barrier is sent; the fake reads it after
	done := make(chan error, 1)
	go func() {
		_, err := sw.Apply(context.Background(), []Message{groupMod(ofp.GroupAdd, 1, 1)})
		done <- err
	}()
	if d := <-clk.Started(); d != 2*time.Second {
		t.Fatalf("barrier timer %v, want the configured 2s", d)
	}
	clk.Advance(time.Second)
	select {
	case err := <-done:
		t.Fatalf("Apply returned %v before the barrier timeout", err)
	default:
	}
	clk.Advance(time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, ErrBarrierTimeout) {
			t.Fatalf("Apply error %v, want ErrBarrierTimeout", err)
		}
	case <-time.After(guard):
		t.Fatal("Apply did not time out")
	}
	if sw.Err() != nil {
		t.Errorf("session closed by a barrier timeout: %v", sw.Err())
	}
}

func TestMultipartReplyMore(t *testing.T) {
	tests := []struct {
		name  string
		parts [][]byte
	}{
		{"one part", [][]byte{bytes.Repeat([]byte{1}, 40)}},
		{"three parts", [][]byte{bytes.Repeat([]byte{1}, 40), bytes.Repeat([]byte{2}, 16), bytes.Repeat([]byte{3}, 8)}},
		{"empty table", [][]byte{{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newRecHandler()
			srv, _ := testServer(t, Config{}, h)
			f := newFake(t, 4)
			f.descParts = tt.parts
			f.connect(srv.Addr())
			sw := h.wait(t, "connected").sw
			got, err := sw.Multipart(context.Background(), ofp.MultipartTypeGroupDescription, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := bytes.Join(tt.parts, nil); !bytes.Equal(got, want) {
				t.Errorf("Multipart = %d bytes, want %d (concatenation of all parts)", len(got), len(want))
			}
			req := f.next(of.TypeMultipartRequest)
			if typ := binary.BigEndian.Uint16(req.Body); typ != uint16(ofp.MultipartTypeGroupDescription) || len(req.Body) != 8 {
				t.Errorf("request type %d, body %d bytes", typ, len(req.Body))
			}
		})
	}
}

func TestEcho(t *testing.T) {
	h := newRecHandler()
	srv, clk := testServer(t, Config{EchoInterval: 5 * time.Second, EchoTimeout: 15 * time.Second}, h)
	f, sw := connectFake(t, srv, h, 5)

	// We answer the switch's echo with its xid and data.
	f.send(of.TypeEchoRequest, 77, []byte("ping"))
	r := f.next(of.TypeEchoReply)
	if r.Header.Xid != 77 || string(r.Body) != "ping" {
		t.Errorf("echo reply xid %d body %q, want 77 \"ping\"", r.Header.Xid, r.Body)
	}

	// A tick sends our echo; the switch answers; a round trip later the clock moves on
	// by less than the timeout and the session stays.
	clk.tick(t)
	f.next(of.TypeEchoRequest)
	if _, err := sw.Multipart(context.Background(), ofp.MultipartTypeGroupDescription, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(14 * time.Second)
	clk.tick(t)
	f.next(of.TypeEchoRequest)

	// Now the switch stops answering and says nothing: past the timeout the session ends.
	f.answerEcho.Store(false)
	if _, err := sw.Multipart(context.Background(), ofp.MultipartTypeGroupDescription, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second)
	clk.tick(t)
	ev := h.wait(t, "disconnected")
	if !errors.Is(ev.err, ErrEchoTimeout) {
		t.Fatalf("disconnected with %v, want ErrEchoTimeout", ev.err)
	}
	if _, ok := srv.Switch(5); ok {
		t.Error("timed-out switch still registered")
	}
}

func TestPacketInDispatch(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f, _ := connectFake(t, srv, h, 6)
	for i := uint32(1); i <= 3; i++ {
		f.send(of.TypePacketIn, 0, ofwire.PacketInBody(i, uint64(i)*100, []byte(fmt.Sprintf("frame-%d", i))))
	}
	for i := uint32(1); i <= 3; i++ {
		select {
		case pi := <-h.packetIns:
			if pi.InPort != i || pi.Cookie != uint64(i)*100 || string(pi.Data) != fmt.Sprintf("frame-%d", i) || pi.BufferID != ofp.NoBuffer {
				t.Errorf("packet-in %d = %+v", i, pi)
			}
		case <-time.After(guard):
			t.Fatalf("packet-in %d not delivered", i)
		}
	}
}

func TestPacketInQueueFullDrops(t *testing.T) {
	h := newRecHandler()
	h.gate = make(chan struct{})
	srv, _ := testServer(t, Config{PacketInQueue: 1}, h)
	defer close(h.gate)
	f, sw := connectFake(t, srv, h, 8)
	f.send(of.TypePacketIn, 0, ofwire.PacketInBody(1, 0, []byte("a")))
	<-h.entered // the Handler holds the first one
	for i := 0; i < 4; i++ {
		f.send(of.TypePacketIn, 0, ofwire.PacketInBody(2, 0, []byte("b")))
	}
	// A round trip proves the reader has handled all of them.
	if _, err := sw.Multipart(context.Background(), ofp.MultipartTypeGroupDescription, nil); err != nil {
		t.Fatal(err)
	}
	if got := sw.PacketInDrops(); got != 3 {
		t.Errorf("PacketInDrops = %d, want 3 (4 sent while 1 queued)", got)
	}
	if got := srv.Stats().PacketInDrops; got != 3 {
		t.Errorf("Stats.PacketInDrops = %d, want 3", got)
	}
}

func TestPacketOut(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f, sw := connectFake(t, srv, h, 9)
	frameData := []byte("an ARP reply, say")
	err := sw.PacketOut(context.Background(), uint32(ofp.PortController), ofp.Actions{&ofp.ActionOutput{Port: 3, MaxLen: 0}}, frameData)
	if err != nil {
		t.Fatal(err)
	}
	m := f.next(of.TypePacketOut)
	var po ofp.PacketOut
	if _, err := po.ReadFrom(bytes.NewReader(m.Body)); err != nil {
		t.Fatalf("decode our PACKET_OUT: %v", err)
	}
	if po.Buffer != ofp.NoBuffer || po.InPort != ofp.PortController || !bytes.Equal(po.Data, frameData) || len(po.Actions) != 1 {
		t.Fatalf("PACKET_OUT = %+v", po)
	}
	if out, ok := po.Actions[0].(*ofp.ActionOutput); !ok || out.Port != 3 {
		t.Errorf("action %+v, want output:3", po.Actions[0])
	}
}

func TestSeveralSwitches(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	var sws []*Switch
	for dpid := uint64(20); dpid < 23; dpid++ {
		_, sw := connectFake(t, srv, h, dpid)
		sws = append(sws, sw)
	}
	for _, sw := range sws {
		if _, err := sw.Apply(context.Background(), []Message{groupMod(ofp.GroupAdd, 1, 1)}); err != nil {
			t.Errorf("switch %v: %v", sw, err)
		}
	}
	if n := len(srv.Switches()); n != 3 {
		t.Errorf("Switches() = %d, want 3", n)
	}
}

func TestServeShutdownDisconnectsAll(t *testing.T) {
	h := newRecHandler()
	cfg := Config{Listen: "127.0.0.1:0"}
	srv, err := NewServer(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	connectFake(t, srv, h, 30)
	cancel()
	ev := h.wait(t, "disconnected")
	if !errors.Is(ev.err, ErrServerClosed) {
		t.Errorf("disconnected with %v, want ErrServerClosed", ev.err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve = %v, want nil after cancel", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"zero is valid after defaults", Config{}, nil},
		{"negative barrier", Config{BarrierTimeout: -1}, []string{"BarrierTimeout"}},
		{"timeout not above interval", Config{EchoInterval: 10 * time.Second, EchoTimeout: 10 * time.Second}, []string{"EchoTimeout"}},
		{"several", Config{WriteTimeout: -1, PacketInQueue: -2}, []string{"WriteTimeout", "PacketInQueue"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.withDefaults().Validate()
			if (err == nil) != (len(tt.want) == 0) {
				t.Fatalf("Validate = %v, want problems with %v", err, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
	if _, err := NewServer(Config{Listen: "127.0.0.1:0"}, nil); err == nil {
		t.Error("NewServer accepted a nil Handler")
	}
}

// TestUnixListen: "unix:PATH" listens on a Unix socket (Open vSwitch's unix: controller
// target) and a session on it works like one on TCP.
func TestUnixListen(t *testing.T) {
	h := newRecHandler()
	path := t.TempDir() + "/of.sock"
	srv, err := NewServer(Config{Listen: "unix:" + path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	if srv.Addr().Network() != "unix" || srv.Addr().String() != path {
		t.Fatalf("Addr = %s %s, want unix %s", srv.Addr().Network(), srv.Addr(), path)
	}
	_, sw := connectFake(t, srv, h, 40)
	if _, err := sw.Apply(context.Background(), []Message{groupMod(ofp.GroupAdd, 1, 1)}); err != nil {
		t.Fatalf("Apply over a Unix socket: %v", err)
	}
}
