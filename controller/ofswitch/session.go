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

	"flowweight/controller/ofwire"

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
	remote   string
	src      string // sourceKey of remote: the scope of its per-source log limits
	br       *bufio.Reader
	log      *slog.Logger
	features ofp.SwitchFeatures
	identity string // TLS peer identity the datapath id is bound to ("" without a certificate)
	desc     Desc   // set once before Connected (desc.go)

	xid atomic.Uint32
	out *outQueue // the only way to the connection once the handshake is over

	mu      sync.Mutex
	pending map[uint32]*waiter
	err     error

	done      chan struct{} // closed by close()
	closeOnce sync.Once
	stopped   chan struct{} // closed after Disconnected returned

	lastRx        atomic.Int64  // srv.now() in Unix nanoseconds of the last message read
	rxCount       atomic.Uint64 // messages read: a probe that sees it move knows the switch lives
	rxWake        chan struct{} // capacity 1: a token after each message read, for the probe
	packetIns     chan PacketIn
	packetInDrops atomic.Uint64
	echoRTT       atomic.Int64
	echoXid       atomic.Uint32 // xid of our last keepalive ECHO_REQUEST
	echoSent      atomic.Int64  // when it was queued, srv.now() in Unix nanoseconds

	role        atomic.Pointer[RoleReply] // last role the switch confirmed; nil: EQUAL (role.go)
	roleChanged chan struct{}             // capacity 1: a token when role changes
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

// fault counts f on the server and logs msg for it, at most once per ratelog.Every per fault
// and source address and per fault and datapath id, across sessions (peerLog).
func (sw *Switch) fault(f Fault, msg string, args ...any) {
	sw.srv.faults[f].Add(1)
	sw.logf(f.level(), f.String(), msg, append(args, "reason", f.String())...)
}

// logf writes one line of kind about this session to its logger, rate-limited like faults: a
// switch reconnecting in a loop gets one line of each kind per window, not one per session.
func (sw *Switch) logf(level slog.Level, kind, msg string, args ...any) bool {
	return sw.srv.plog.Log(sw.log, level, kind, sw.src, sw.String(), msg, args...)
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
		if err := ofwire.AppendMessage(&buf, m.Type, xids[j], m.Body); err != nil {
			return 0, fmt.Errorf("switch %s stage %d message %d %q: %w", sw, stage, j, m.Desc, err)
		}
	}
	bx := sw.nextXID()
	xids[len(msgs)] = bx
	byXid[bx] = Message{Type: of.TypeBarrierRequest, Desc: fmt.Sprintf("barrier after stage %d", stage)}
	if err := ofwire.AppendMessage(&buf, of.TypeBarrierRequest, bx, nil); err != nil {
		return 0, err
	}

	w := newWaiter(waitApply)
	sw.register(w, xids...)
	defer sw.unregister(xids...)
	start := sw.srv.now()
	if err := sw.send(ctx, buf.Bytes()); err != nil {
		return 0, fmt.Errorf("stage %d: %w", stage, err)
	}
	timeout := sw.srv.after(sw.cfg.BarrierTimeout)
	var errs []error
	for {
		select {
		case <-w.notify:
			for _, f := range w.take() {
				switch f.Type {
				case of.TypeError:
					em, err := ofwire.ParseError(f.Body)
					if err != nil {
						errs = append(errs, fmt.Errorf("switch %s stage %d: %w", sw, stage, err))
						continue
					}
					errs = append(errs, newOpError(sw.DatapathID(), f.Xid, byXid[f.Xid], em))
				case of.TypeBarrierReply:
					if f.Xid != bx {
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

// Limit bounds one multipart reply: what a request can legitimately produce, so a switch
// cannot make the controller hold an unbounded reply in memory. Zero fields take
// Config.MaxMultipartBytes and Config.MaxMultipartParts.
type Limit struct {
	MaxBytes int // sum of the reply parts' bodies
	MaxParts int // number of MULTIPART_REPLY messages
}

// Multipart sends one MULTIPART_REQUEST and returns the bodies of all reply parts
// concatenated (following OFPMPF_REPLY_MORE), undecoded: decoding GROUP_DESC or
// FLOW_STATS is the planner's business. body may be nil for requests without one
// (GROUP_DESC, PORT_DESC). Each part must arrive within Config.BarrierTimeout. The reply is
// bounded by Config.MaxMultipartBytes and Config.MaxMultipartParts; MultipartLimit sets
// other bounds for one request.
func (sw *Switch) Multipart(ctx context.Context, typ ofp.MultipartType, body io.WriterTo) ([]byte, error) {
	return sw.MultipartLimit(ctx, typ, body, Limit{})
}

// MultipartLimit is Multipart with the reply bounded by lim. A reply over the bound fails
// with ErrReplyTooLarge naming the switch and the type; its remaining parts are read and
// discarded (the stream stays in step), so the session and other requests carry on.
func (sw *Switch) MultipartLimit(ctx context.Context, typ ofp.MultipartType, body io.WriterTo, lim Limit) ([]byte, error) {
	return sw.multipart(ctx, typ, body, lim, true)
}

// multipart is MultipartLimit; with serverClock false only ctx bounds the wait (fetchDesc).
func (sw *Switch) multipart(ctx context.Context, typ ofp.MultipartType, body io.WriterTo, lim Limit, serverClock bool) ([]byte, error) {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = sw.cfg.MaxMultipartBytes
	}
	if lim.MaxParts <= 0 {
		lim.MaxParts = sw.cfg.MaxMultipartParts
	}
	req, err := ofwire.MultipartRequest(typ, body)
	if err != nil {
		return nil, fmt.Errorf("switch %s: %w", sw, err)
	}
	xid := sw.nextXID()
	b, err := ofwire.EncodeMessage(of.TypeMultipartRequest, xid, req)
	if err != nil {
		return nil, fmt.Errorf("switch %s: %w", sw, err)
	}
	w := newWaiter(waitMultipart)
	w.mptype, w.lim = typ, lim
	sw.register(w, xid)
	defer sw.unregister(xid)
	if err := sw.send(ctx, b); err != nil {
		return nil, err
	}
	var timeout <-chan time.Time // nil: never
	rearm := func() {
		if serverClock {
			timeout = sw.srv.after(sw.cfg.BarrierTimeout)
		}
	}
	rearm()
	seen := 0
	for {
		select {
		case <-w.notify:
			out, parts, last, ferr, errFrame := w.multipartState()
			switch {
			case errFrame != nil:
				em, err := ofwire.ParseError(errFrame.Body)
				if err != nil {
					return nil, fmt.Errorf("switch %s %v request: %w", sw, typ, err)
				}
				m := Message{Type: of.TypeMultipartRequest, Body: body, Desc: fmt.Sprintf("multipart %v request", typ)}
				return nil, newOpError(sw.DatapathID(), xid, m, em)
			case ferr != nil:
				return nil, ferr
			case last:
				return out, nil
			case parts > seen:
				seen = parts
				rearm()
			}
		case <-timeout:
			_, parts, _, _, _ := w.multipartState()
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
	b, err := ofwire.EncodeMessage(of.TypePacketOut, sw.nextXID(), po)
	if err != nil {
		return fmt.Errorf("switch %s packet-out: %w", sw, err)
	}
	return sw.send(ctx, b)
}

// keepalive sends an ECHO_REQUEST every EchoInterval carrying the send time, and closes
// the session when nothing at all has been read for EchoTimeout. The echo goes ahead of our
// queued requests (sendControl), so a busy queue delays neither it nor the switch's answer.
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
				sw.close(fmt.Errorf("switch %s at %s: %w: nothing received for %v", sw, sw.remote, ErrEchoTimeout, idle))
				return
			}
			var ts [8]byte
			binary.BigEndian.PutUint64(ts[:], uint64(now.UnixNano()))
			xid := sw.nextXID()
			b, _ := ofwire.EncodeMessage(of.TypeEchoRequest, xid, ofwire.RawBody(ts[:]))
			sw.echoXid.Store(xid)
			sw.echoSent.Store(now.UnixNano())
			sw.sendControl(b)
		}
	}
}

// noteRx records that a message was read: for the idle check, and for a running probe.
func (sw *Switch) noteRx() {
	sw.lastRx.Store(sw.srv.now().UnixNano())
	sw.rxCount.Add(1)
	select {
	case sw.rxWake <- struct{}{}:
	default:
	}
}

// probe asks whether the session is alive, when another connection claims its datapath id.
// Dead means silent: nothing read for EchoTimeout (no probe needed), or, within
// Config.ProbeTimeout of the probe's ECHO_REQUEST, neither its reply nor any other message.
// How full our write queue is says nothing about that: the echo goes ahead of our queued
// requests (sendControl), and one that could not be queued at all only leaves the switch's
// own traffic to prove it alive.
func (sw *Switch) probe() bool {
	if sw.srv.now().Sub(time.Unix(0, sw.lastRx.Load())) >= sw.cfg.EchoTimeout {
		return false
	}
	select { // a token from before the probe proves nothing
	case <-sw.rxWake:
	default:
	}
	seen := sw.rxCount.Load()
	xid := sw.nextXID()
	w := newWaiter(waitEcho)
	sw.register(w, xid)
	defer sw.unregister(xid)
	b, _ := ofwire.EncodeMessage(of.TypeEchoRequest, xid, nil)
	sw.sendControl(b)
	timeout := sw.srv.after(sw.cfg.ProbeTimeout)
	for {
		select {
		case <-w.notify:
			return true
		case <-sw.rxWake:
			if sw.rxCount.Load() != seen {
				return true
			}
		case <-timeout:
			return sw.rxCount.Load() != seen
		case <-sw.done:
			return false
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
