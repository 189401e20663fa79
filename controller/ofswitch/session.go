package ofswitch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// Switch is one live OpenFlow 1.3 session with a datapath. All methods are safe for
// concurrent use. A Switch is never reused: after Disconnected, its methods fail with
// ErrSessionClosed and the controller waits for the next Connected.
type Switch struct {
	srv      *Server
	cfg      Config
	conn     net.Conn
	br       *bufio.Reader
	log      *slog.Logger
	features ofp.SwitchFeatures
	desc     Desc // set once before Connected (desc.go)

	xid atomic.Uint32
	wmu sync.Mutex // one writer at a time keeps messages whole on the stream

	mu      sync.Mutex
	pending map[uint32]*waiter
	err     error

	done      chan struct{} // closed by close()
	closeOnce sync.Once
	stopped   chan struct{} // closed after Disconnected returned

	lastRx        atomic.Int64 // srv.now() in Unix nanoseconds of the last message read
	packetIns     chan PacketIn
	packetInDrops atomic.Uint64
	echoRTT       atomic.Int64
}

// Result reports a successful Apply.
type Result struct {
	// BarrierRTT holds, per stage, the time from writing the stage to its BARRIER_REPLY.
	BarrierRTT []time.Duration
	// Messages is the number of Messages applied (barriers not counted).
	Messages int
}

// DatapathID is the switch's 64-bit datapath id from FEATURES_REPLY.
func (sw *Switch) DatapathID() uint64 { return sw.features.DatapathID }

// Features is the switch's FEATURES_REPLY (tables, buffers, capabilities).
func (sw *Switch) Features() ofp.SwitchFeatures { return sw.features }

// RemoteAddr is the switch's address on the control connection.
func (sw *Switch) RemoteAddr() net.Addr { return sw.conn.RemoteAddr() }

// PacketInDrops counts packet-ins dropped because the Handler fell behind.
func (sw *Switch) PacketInDrops() uint64 { return sw.packetInDrops.Load() }

// EchoRTT is the round trip of the last answered ECHO_REQUEST we sent (0 before any).
func (sw *Switch) EchoRTT() time.Duration { return time.Duration(sw.echoRTT.Load()) }

// Done is closed when the session has ended.
func (sw *Switch) Done() <-chan struct{} { return sw.done }

// Err is why the session ended, nil while it is live.
func (sw *Switch) Err() error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.err
}

func (sw *Switch) String() string { return fmt.Sprintf("%016x", sw.features.DatapathID) }

// nextXID hands out transaction ids; the library does not, and 0 is avoided because some
// switches use it for unsolicited messages.
func (sw *Switch) nextXID() uint32 {
	for {
		if x := sw.xid.Add(1); x != 0 {
			return x
		}
	}
}

// close ends the session once, keeping the first cause.
func (sw *Switch) close(cause error) {
	sw.closeOnce.Do(func() {
		sw.mu.Lock()
		sw.err = cause
		sw.mu.Unlock()
		close(sw.done)
		sw.conn.Close()
	})
}

// closedErr is what a waiting request returns when the session ends under it.
func (sw *Switch) closedErr() error {
	return fmt.Errorf("switch %s: %w: %w", sw, ErrSessionClosed, sw.Err())
}

// write sends b in one write with a deadline (the library sets its deadline only after
// writing, and buffers until Flush; we do neither). A failed or partial write leaves the
// stream out of step, so it ends the session.
func (sw *Switch) write(ctx context.Context, b []byte) error {
	select {
	case <-sw.done:
		return sw.closedErr()
	default:
	}
	sw.wmu.Lock()
	defer sw.wmu.Unlock()
	deadline := time.Now().Add(sw.cfg.WriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := sw.conn.SetWriteDeadline(deadline); err != nil {
		sw.close(fmt.Errorf("set write deadline: %w", err))
		return sw.closedErr()
	}
	if _, err := sw.conn.Write(b); err != nil {
		err = fmt.Errorf("write %d bytes to switch %s: %w", len(b), sw, err)
		sw.close(err)
		return err
	}
	return nil
}

// waiter collects the frames the reader routes to one request, without ever blocking
// the reader.
type waiter struct {
	mu     sync.Mutex
	frames []frame
	notify chan struct{}
}

func newWaiter() *waiter { return &waiter{notify: make(chan struct{}, 1)} }

func (w *waiter) deliver(f frame) {
	w.mu.Lock()
	w.frames = append(w.frames, f)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *waiter) take() []frame {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.frames
	w.frames = nil
	return f
}

func (sw *Switch) register(w *waiter, xids ...uint32) {
	sw.mu.Lock()
	for _, x := range xids {
		sw.pending[x] = w
	}
	sw.mu.Unlock()
}

func (sw *Switch) unregister(xids ...uint32) {
	sw.mu.Lock()
	for _, x := range xids {
		delete(sw.pending, x)
	}
	sw.mu.Unlock()
}

func (sw *Switch) waiterFor(xid uint32) *waiter {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.pending[xid]
}

// Apply writes the stages in order. Each stage's messages go out with fresh xids in one
// write, followed by a BARRIER_REQUEST; the next stage starts only after that barrier's
// reply. OFPT_ERRORs carrying a stage message's xid that arrive before the barrier reply
// are collected, and Apply then stops with them (an *OpError, or errors.Join of several):
// a stage counts as applied only when its barrier reply arrives with no error for it.
// A missing barrier reply ends Apply with ErrBarrierTimeout after Config.BarrierTimeout;
// the session stays open, and the caller should read back state before trusting it.
func (sw *Switch) Apply(ctx context.Context, stages ...[]Message) (Result, error) {
	var res Result
	for i, stage := range stages {
		rtt, err := sw.applyStage(ctx, i, stage)
		if err != nil {
			return res, err
		}
		res.BarrierRTT = append(res.BarrierRTT, rtt)
		res.Messages += len(stage)
	}
	return res, nil
}

func (sw *Switch) applyStage(ctx context.Context, stage int, msgs []Message) (time.Duration, error) {
	xids := make([]uint32, len(msgs)+1)
	byXid := make(map[uint32]Message, len(msgs)+1)
	var buf bytes.Buffer
	for j, m := range msgs {
		xids[j] = sw.nextXID()
		byXid[xids[j]] = m
		if err := appendMessage(&buf, m.Type, xids[j], m.Body); err != nil {
			return 0, fmt.Errorf("switch %s stage %d message %d %q: %w", sw, stage, j, m.Desc, err)
		}
	}
	bx := sw.nextXID()
	xids[len(msgs)] = bx
	byXid[bx] = Message{Type: of.TypeBarrierRequest, Desc: fmt.Sprintf("barrier after stage %d", stage)}
	if err := appendMessage(&buf, of.TypeBarrierRequest, bx, nil); err != nil {
		return 0, err
	}

	w := newWaiter()
	sw.register(w, xids...)
	defer sw.unregister(xids...)
	start := sw.srv.now()
	if err := sw.write(ctx, buf.Bytes()); err != nil {
		return 0, fmt.Errorf("stage %d: %w", stage, err)
	}
	timeout := sw.srv.after(sw.cfg.BarrierTimeout)
	var errs []error
	for {
		select {
		case <-w.notify:
			for _, f := range w.take() {
				switch f.h.Type {
				case of.TypeError:
					em, err := parseError(f.body)
					if err != nil {
						errs = append(errs, fmt.Errorf("switch %s stage %d: %w", sw, stage, err))
						continue
					}
					errs = append(errs, newOpError(sw.DatapathID(), f.h.Xid, byXid[f.h.Xid], em))
				case of.TypeBarrierReply:
					if f.h.Xid != bx {
						continue
					}
					rtt := sw.srv.now().Sub(start)
					switch len(errs) {
					case 0:
						return rtt, nil
					case 1:
						return rtt, errs[0]
					default:
						return rtt, errors.Join(errs...)
					}
				}
			}
		case <-timeout:
			return 0, errors.Join(append([]error{fmt.Errorf("switch %s stage %d (%d messages): %w after %v",
				sw, stage, len(msgs), ErrBarrierTimeout, sw.cfg.BarrierTimeout)}, errs...)...)
		case <-ctx.Done():
			return 0, fmt.Errorf("switch %s stage %d waiting for barrier: %w", sw, stage, ctx.Err())
		case <-sw.done:
			return 0, fmt.Errorf("stage %d: %w", stage, sw.closedErr())
		}
	}
}

// Multipart sends one MULTIPART_REQUEST and returns the bodies of all reply parts
// concatenated (following OFPMPF_REPLY_MORE), undecoded: decoding GROUP_DESC or
// FLOW_STATS is the planner's business. body may be nil for requests without one
// (GROUP_DESC, PORT_DESC). Each part must arrive within Config.BarrierTimeout.
func (sw *Switch) Multipart(ctx context.Context, typ ofp.MultipartType, body io.WriterTo) ([]byte, error) {
	req, err := multipartRequestBody(typ, body)
	if err != nil {
		return nil, fmt.Errorf("switch %s: %w", sw, err)
	}
	xid := sw.nextXID()
	b, err := encodeMessage(of.TypeMultipartRequest, xid, req)
	if err != nil {
		return nil, fmt.Errorf("switch %s: %w", sw, err)
	}
	w := newWaiter()
	sw.register(w, xid)
	defer sw.unregister(xid)
	if err := sw.write(ctx, b); err != nil {
		return nil, err
	}
	out := []byte{}
	parts := 0
	timeout := sw.srv.after(sw.cfg.BarrierTimeout)
	for {
		select {
		case <-w.notify:
			for _, f := range w.take() {
				switch f.h.Type {
				case of.TypeError:
					em, err := parseError(f.body)
					if err != nil {
						return nil, fmt.Errorf("switch %s %v request: %w", sw, typ, err)
					}
					m := Message{Type: of.TypeMultipartRequest, Body: body, Desc: fmt.Sprintf("multipart %v request", typ)}
					return nil, newOpError(sw.DatapathID(), xid, m, em)
				case of.TypeMultipartReply:
					rtyp, flags, payload, err := parseMultipartReply(f.body)
					if err != nil {
						return nil, fmt.Errorf("switch %s %v reply part %d: %w", sw, typ, parts, err)
					}
					if rtyp != typ {
						return nil, fmt.Errorf("switch %s: %w: asked for %v, reply part %d is %v", sw, ErrMalformed, typ, parts, rtyp)
					}
					out = append(out, payload...)
					parts++
					if flags&replyMore == 0 {
						return out, nil
					}
					timeout = sw.srv.after(sw.cfg.BarrierTimeout)
				}
			}
		case <-timeout:
			return nil, fmt.Errorf("switch %s %v after %d parts: %w after %v", sw, typ, parts, ErrReplyTimeout, sw.cfg.BarrierTimeout)
		case <-ctx.Done():
			return nil, fmt.Errorf("switch %s %v: %w", sw, typ, ctx.Err())
		case <-sw.done:
			return nil, fmt.Errorf("%v: %w", typ, sw.closedErr())
		}
	}
}

// PacketOut injects frame with buffer id NO_BUFFER (the frame travels in the message, so
// a reply built by the controller is sent whole). inPort is the port the switch treats the
// frame as having come from, ofp.PortController when the controller originates it; with
// the action output:IN_PORT and inPort set to the requester's port, the answer goes
// back where the request came from. An OFPT_ERROR for it arrives later and is only logged.
func (sw *Switch) PacketOut(ctx context.Context, inPort uint32, actions ofp.Actions, frame []byte) error {
	po := &ofp.PacketOut{Buffer: ofp.NoBuffer, InPort: ofp.PortNo(inPort), Actions: actions, Data: frame}
	b, err := encodeMessage(of.TypePacketOut, sw.nextXID(), po)
	if err != nil {
		return fmt.Errorf("switch %s packet-out: %w", sw, err)
	}
	return sw.write(ctx, b)
}

// readLoop is the one reader of the session: it routes replies by xid and queues
// packet-ins, and returns when the connection fails or is closed.
func (sw *Switch) readLoop() {
	for {
		// A real-time backstop: the keepalive closes silent sessions first.
		sw.conn.SetReadDeadline(time.Now().Add(sw.cfg.EchoTimeout + sw.cfg.EchoInterval))
		f, err := readFrame(sw.br)
		if err != nil {
			sw.close(fmt.Errorf("read from switch %s: %w", sw, err))
			return
		}
		sw.lastRx.Store(sw.srv.now().UnixNano())
		if f.h.Version != version13 {
			sw.close(fmt.Errorf("switch %s: %w: version %d message (%v) after negotiating 1.3", sw, ErrMalformed, f.h.Version, f.h.Type))
			return
		}
		sw.dispatch(f)
	}
}

func (sw *Switch) dispatch(f frame) {
	switch f.h.Type {
	case of.TypeEchoRequest:
		// Written off the reader so that a reader never waits on a writer.
		b, _ := encodeMessage(of.TypeEchoReply, f.h.Xid, rawBody(f.body))
		go sw.write(context.Background(), b)
		return
	case of.TypeEchoReply:
		if len(f.body) == 8 {
			sent := int64(binary.BigEndian.Uint64(f.body))
			sw.echoRTT.Store(sw.srv.now().UnixNano() - sent)
		}
		return
	case of.TypePacketIn:
		pi, err := parsePacketIn(f.body)
		if err != nil {
			sw.log.Warn("bad packet-in", "err", err)
			return
		}
		select {
		case sw.packetIns <- pi:
		default:
			sw.packetInDrops.Add(1)
			sw.srv.packetInDrops.Add(1)
		}
		return
	case of.TypeError:
		sw.logError(f)
	}
	if w := sw.waiterFor(f.h.Xid); w != nil {
		w.deliver(f)
		return
	}
	if f.h.Type != of.TypeError {
		sw.log.Debug("unsolicited message", "type", f.h.Type.String(), "xid", f.h.Xid)
	}
}

// logError logs every OFPT_ERROR with its names, solicited or not.
func (sw *Switch) logError(f frame) {
	sw.srv.errorsReceived.Add(1)
	em, err := parseError(f.body)
	if err != nil {
		sw.log.Warn("bad error message", "xid", f.h.Xid, "err", err)
		return
	}
	tn, cn := ErrorName(em.Type, em.Code)
	solicited := sw.waiterFor(f.h.Xid) != nil
	sw.log.Warn("switch error", "type", tn, "code", cn, "xid", f.h.Xid, "solicited", solicited, "data_len", len(em.Data))
}

// keepalive sends an ECHO_REQUEST every EchoInterval carrying the send time, and closes
// the session when nothing at all has been read for EchoTimeout.
func (sw *Switch) keepalive() {
	tick, stop := sw.srv.ticker(sw.cfg.EchoInterval)
	defer stop()
	for {
		select {
		case <-sw.done:
			return
		case <-tick:
			now := sw.srv.now()
			idle := now.Sub(time.Unix(0, sw.lastRx.Load()))
			if idle >= sw.cfg.EchoTimeout {
				sw.close(fmt.Errorf("switch %s: %w: nothing received for %v", sw, ErrEchoTimeout, idle))
				return
			}
			var ts [8]byte
			binary.BigEndian.PutUint64(ts[:], uint64(now.UnixNano()))
			b, _ := encodeMessage(of.TypeEchoRequest, sw.nextXID(), rawBody(ts[:]))
			if err := sw.write(context.Background(), b); err != nil {
				return
			}
		}
	}
}

// deliverPacketIns hands queued packet-ins to the Handler on their own goroutine, so a
// slow Handler costs dropped packet-ins, never a stalled reader (and so missed barriers).
func (sw *Switch) deliverPacketIns(h Handler, wg *sync.WaitGroup) {
	defer wg.Done()
	for pi := range sw.packetIns {
		h.PacketIn(sw, pi)
	}
}
