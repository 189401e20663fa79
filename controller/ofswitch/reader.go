package ofswitch

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
)

// maxErrorData is how much of an OFPT_ERROR's data (the echoed start of the failed
// request) is kept; the spec asks switches for at least 64 bytes, and the rest of a long
// one is discarded unread.
const maxErrorData = 1024

// readLoop is the one reader of the session: it routes replies by xid and queues
// packet-ins, and returns when the connection fails or is closed. It reads a header first
// and decides from it whether the body is wanted: bodies of messages nobody waits for, and
// bodies over their bound, are skipped in the reader's buffer without being allocated, so
// the 64 KiB an OpenFlow length field allows costs an unwanted message nothing.
func (sw *Switch) readLoop() {
	for {
		// A real-time backstop: the keepalive closes silent sessions first.
		sw.conn.SetReadDeadline(time.Now().Add(sw.cfg.EchoTimeout + sw.cfg.EchoInterval))
		var hb [ofwire.HeaderLen]byte
		if _, err := io.ReadFull(sw.br, hb[:]); err != nil {
			sw.close(fmt.Errorf("read from switch %s at %s: %w", sw, sw.remote, err))
			return
		}
		h, err := ofwire.ParseHeader(hb[:])
		if err != nil {
			// Without a usable length the stream cannot be followed any further.
			sw.fault(FaultMalformedHeader, "unreadable message header, closing", "err", err)
			sw.close(fmt.Errorf("switch %s at %s: %w", sw, sw.remote, err))
			return
		}
		sw.noteRx()
		if h.Version != ofwire.Version13 {
			sw.fault(FaultBadVersion, "message in another OpenFlow version, closing", "version", h.Version, "type", h.Type.String())
			sw.close(fmt.Errorf("switch %s at %s: %w: version %d message (%v) after negotiating 1.3", sw, sw.remote, ErrMalformed, h.Version, h.Type))
			return
		}
		if err := sw.route(h, int(h.Length)-ofwire.HeaderLen); err != nil {
			sw.close(fmt.Errorf("read %v body (%d bytes) from switch %s at %s: %w", h.Type, int(h.Length)-ofwire.HeaderLen, sw, sw.remote, err))
			return
		}
	}
}

// skip discards n body bytes without allocating them.
func (sw *Switch) skip(n int) error {
	_, err := sw.br.Discard(n)
	return err
}

// body reads n body bytes into a new slice (the message's own buffer).
func (sw *Switch) body(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(sw.br, b)
	return b, err
}

// route handles one message whose header has been read and whose n body bytes follow. It
// returns only read errors: a message it refuses is counted and skipped.
func (sw *Switch) route(h ofwire.Header, n int) error {
	switch h.Type {
	case of.TypeEchoRequest:
		// The reply is built in one buffer and read straight into it; it goes through the
		// writer's reply budget, so a peer that sends echoes but never reads is closed.
		b := make([]byte, int(h.Length))
		if _, err := io.ReadFull(sw.br, b[ofwire.HeaderLen:]); err != nil {
			return err
		}
		ofwire.PutHeader(b, of.TypeEchoReply, h.Length, h.Xid)
		sw.sendReply(b)
		return nil
	case of.TypePacketIn:
		return sw.routePacketIn(h, n)
	case of.TypeEchoReply, of.TypeError, of.TypeBarrierReply, of.TypeMultipartReply, of.TypeRoleReply:
		return sw.routeReply(h, n)
	case of.TypeExperiment:
		return sw.routeExperimenter(h, n) // ONFT_ROLE_STATUS (role.go); others are ignored
	}
	sw.fault(FaultIgnoredMessage, "message not used by the session, discarded", "type", h.Type.String(), "xid", h.Xid, "bytes", int(h.Length))
	return sw.skip(n)
}

func (sw *Switch) routePacketIn(h ofwire.Header, n int) error {
	if n > sw.cfg.MaxPacketInBytes {
		sw.fault(FaultPacketInTooLarge, "packet-in too large, discarded", "bytes", n, "limit", sw.cfg.MaxPacketInBytes)
		return sw.skip(n)
	}
	b, err := sw.body(n)
	if err != nil {
		return err
	}
	pi, err := ofwire.ParsePacketIn(b)
	if err != nil {
		sw.fault(FaultMalformedPacketIn, "bad packet-in", "err", err)
		return nil
	}
	select {
	case sw.packetIns <- pi:
	default:
		sw.packetInDrops.Add(1)
		sw.srv.packetInDrops.Add(1)
		sw.fault(FaultPacketInQueueFull, "packet-in dropped: handler behind", "queue", cap(sw.packetIns))
	}
	return nil
}

// routeReply hands a reply to the request waiting for its xid, or counts it as
// unsolicited. OFPT_ERRORs are also logged (rate-limited) whoever waits for them.
func (sw *Switch) routeReply(h ofwire.Header, n int) error {
	w := sw.waiterFor(h.Xid)
	if h.Type == of.TypeError {
		keep := min(n, 4+maxErrorData)
		b, err := sw.body(keep)
		if err != nil {
			return err
		}
		if err := sw.skip(n - keep); err != nil {
			return err
		}
		sw.srv.errorsReceived.Add(1)
		em, perr := ofwire.ParseError(b)
		if perr != nil {
			sw.fault(FaultMalformedError, "bad error message", "xid", h.Xid, "err", perr)
		} else {
			tn, cn := ofwire.ErrorName(em.Type, em.Code)
			sw.fault(FaultSwitchError, "switch error", "type", tn, "code", cn, "xid", h.Xid, "solicited", w != nil, "data_len", n-4)
		}
		f := ofwire.Frame{Header: h, Body: b}
		switch {
		case w == nil || !w.expects(h.Type):
		case w.kind == waitApply:
			w.deliver(f)
		case w.kind == waitMultipart, w.kind == waitRole:
			w.finish(&f, nil)
		}
		return nil
	}
	if w == nil || !w.expects(h.Type) {
		if h.Type == of.TypeEchoReply && h.Xid == sw.echoXid.Load() {
			return sw.keepaliveReply(n)
		}
		sw.fault(FaultUnsolicitedReply, "reply nobody asked for, discarded", "type", h.Type.String(), "xid", h.Xid, "bytes", int(h.Length))
		return sw.skip(n)
	}
	switch w.kind {
	case waitEcho:
		w.finish(nil, nil)
		return sw.skip(n)
	case waitApply: // a BARRIER_REPLY, which has no body
		if !w.deliver(ofwire.Frame{Header: h}) {
			sw.fault(FaultUnsolicitedReply, "repeated reply, discarded", "type", h.Type.String(), "xid", h.Xid)
		}
		return sw.skip(n)
	case waitRole:
		return sw.routeRoleReply(w, h, n)
	}
	return sw.routeMultipart(w, h, n)
}

func (sw *Switch) keepaliveReply(n int) error {
	if n != 8 {
		return sw.skip(n)
	}
	b, err := sw.body(8)
	if err != nil {
		return err
	}
	if sent := sw.echoSent.Load(); int64(binary.BigEndian.Uint64(b)) == sent {
		sw.echoRTT.Store(sw.srv.now().UnixNano() - sent)
	}
	return nil
}

// routeMultipart checks one MULTIPART_REPLY part against its request before reading the
// payload: a part of another type, or one that would take the reply over its Limit, fails
// the request and is skipped unread, and later parts of it are unsolicited.
func (sw *Switch) routeMultipart(w *waiter, h ofwire.Header, n int) error {
	const mpHeader = ofwire.MultipartHeaderLen
	if n < mpHeader {
		err := fmt.Errorf("switch %s at %s: %w: %v reply body is %d bytes, need %d", sw, sw.remote, ErrMalformed, w.mptype, n, mpHeader)
		sw.fault(FaultMalformedReply, "short multipart reply", "xid", h.Xid, "bytes", n)
		w.finish(nil, err)
		return sw.skip(n)
	}
	var mh [mpHeader]byte
	if _, err := io.ReadFull(sw.br, mh[:]); err != nil {
		return err
	}
	typ, flags, _, _ := ofwire.ParseMultipartReply(mh[:]) // mpHeader bytes: cannot fail
	rest := n - mpHeader
	open, err := w.room(sw, rest)
	if !open {
		sw.fault(FaultUnsolicitedReply, "multipart part after the reply ended, discarded", "type", typ.String(), "xid", h.Xid)
		return sw.skip(rest)
	}
	if typ != w.mptype {
		err := fmt.Errorf("switch %s at %s: %w: asked for %v, reply is %v", sw, sw.remote, ErrMalformed, w.mptype, typ)
		sw.fault(FaultMultipartTypeMismatch, "multipart reply of another type, request failed", "asked", w.mptype.String(), "got", typ.String(), "xid", h.Xid)
		w.finish(nil, err)
		return sw.skip(rest)
	}
	if err != nil {
		sw.fault(FaultMultipartTooLarge, "multipart reply over its limit, request failed", "type", typ.String(), "xid", h.Xid,
			"max_bytes", w.lim.MaxBytes, "max_parts", w.lim.MaxParts)
		w.finish(nil, err)
		return sw.skip(rest)
	}
	payload, err := sw.body(rest)
	if err != nil {
		return err
	}
	w.addPart(payload, flags&ofwire.ReplyMore != 0)
	return nil
}
