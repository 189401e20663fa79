package ofswitch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// The wire layer: framing and the few decoders the session itself needs. It holds no
// state and does no I/O beyond the io.Reader it is given, so every decoder here is fuzzed.
// Bodies we send are encoded by github.com/netrack/openflow's ofp types; the header is
// written here because the library's Request fixes neither the xid nor flushing.

const (
	// version13 is the only OpenFlow version flowweight speaks (wire version 0x04).
	version13  = 0x04
	headerLen  = 8
	maxMsgLen  = 0xffff
	oxmClassOF = 0x8000 // OFPXMC_OPENFLOW_BASIC
	oxmInPort  = 0      // OFPXMT_OFB_IN_PORT
	replyMore  = 0x0001 // OFPMPF_REPLY_MORE
	// noBufferMissLen is OFPCML_NO_BUFFER: send whole frames to the controller.
	noBufferMissLen = 0xffff
)

// ErrMalformed marks a message from the switch that cannot be decoded.
var ErrMalformed = errors.New("malformed OpenFlow message")

// header is ofp_header.
type header struct {
	Version uint8
	Type    of.Type
	Length  uint16
	Xid     uint32
}

// frame is one message read from a switch: its header and body (Length-8 bytes).
type frame struct {
	h    header
	body []byte
}

// parseHeader decodes an ofp_header and checks that its length can hold it.
func parseHeader(b []byte) (header, error) {
	if len(b) < headerLen {
		return header{}, fmt.Errorf("%w: header is %d bytes, need %d", ErrMalformed, len(b), headerLen)
	}
	h := header{
		Version: b[0],
		Type:    of.Type(b[1]),
		Length:  binary.BigEndian.Uint16(b[2:4]),
		Xid:     binary.BigEndian.Uint32(b[4:8]),
	}
	if h.Length < headerLen {
		return h, fmt.Errorf("%w: header length %d below %d (type %d, xid %d)", ErrMalformed, h.Length, headerLen, h.Type, h.Xid)
	}
	return h, nil
}

// readFrame reads exactly one message. A short read is an error: the stream is then out of
// step and the session must be closed.
func readFrame(r io.Reader) (frame, error) {
	var hb [headerLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return frame{}, err
	}
	h, err := parseHeader(hb[:])
	if err != nil {
		return frame{}, err
	}
	body := make([]byte, int(h.Length)-headerLen)
	if _, err := io.ReadFull(r, body); err != nil {
		return frame{}, fmt.Errorf("read body of %v (xid %d, %d bytes): %w", h.Type, h.Xid, len(body), err)
	}
	return frame{h: h, body: body}, nil
}

// maxHandshakeBody bounds the HELLO and FEATURES_REPLY bodies we read during the handshake:
// OpenFlow 1.3's are 8 and 24 bytes, and a HELLO's version bitmaps cannot use more.
const maxHandshakeBody = 1024

// readHandshakeFrame reads one message during HELLO/FEATURES, allocating only what the
// handshake uses: an ECHO_REQUEST whole (it is echoed back), an OFPT_ERROR's first
// 4+maxErrorData bytes, a HELLO or FEATURES_REPLY up to maxHandshakeBody (longer is an
// error), and no other body at all (skipped; body is nil).
func readHandshakeFrame(br *bufio.Reader) (frame, error) {
	var hb [headerLen]byte
	if _, err := io.ReadFull(br, hb[:]); err != nil {
		return frame{}, err
	}
	h, err := parseHeader(hb[:])
	if err != nil {
		return frame{}, err
	}
	n := int(h.Length) - headerLen
	keep := 0
	switch h.Type {
	case of.TypeEchoRequest:
		keep = n
	case of.TypeError:
		keep = min(n, 4+maxErrorData)
	case of.TypeHello, of.TypeFeaturesReply:
		if n > maxHandshakeBody {
			return frame{}, fmt.Errorf("%w: %v body is %d bytes, more than the %d a handshake needs", ErrMalformed, h.Type, n, maxHandshakeBody)
		}
		keep = n
	}
	var body []byte
	if keep > 0 || h.Type == of.TypeHello || h.Type == of.TypeFeaturesReply || h.Type == of.TypeEchoRequest {
		body = make([]byte, keep)
		if _, err := io.ReadFull(br, body); err != nil {
			return frame{}, fmt.Errorf("read body of %v (xid %d, %d bytes): %w", h.Type, h.Xid, n, err)
		}
	}
	if _, err := br.Discard(n - keep); err != nil {
		return frame{}, fmt.Errorf("skip body of %v (xid %d, %d bytes): %w", h.Type, h.Xid, n, err)
	}
	return frame{h: h, body: body}, nil
}

// appendMessage appends one OpenFlow 1.3 message (header + encoded body) to buf.
func appendMessage(buf *bytes.Buffer, t of.Type, xid uint32, body io.WriterTo) error {
	var bb bytes.Buffer
	if body != nil {
		if _, err := body.WriteTo(&bb); err != nil {
			return fmt.Errorf("encode %v body: %w", t, err)
		}
	}
	n := headerLen + bb.Len()
	if n > maxMsgLen {
		return fmt.Errorf("encode %v: message is %d bytes, OpenFlow allows %d", t, n, maxMsgLen)
	}
	var hb [headerLen]byte
	hb[0] = version13
	hb[1] = byte(t)
	binary.BigEndian.PutUint16(hb[2:4], uint16(n))
	binary.BigEndian.PutUint32(hb[4:8], xid)
	buf.Write(hb[:])
	buf.Write(bb.Bytes())
	return nil
}

// encodeMessage returns one encoded message.
func encodeMessage(t of.Type, xid uint32, body io.WriterTo) ([]byte, error) {
	var buf bytes.Buffer
	if err := appendMessage(&buf, t, xid, body); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// rawBody is a body that is already encoded.
type rawBody []byte

func (r rawBody) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r)
	return int64(n), err
}

// helloBody is our HELLO: one OFPHET_VERSIONBITMAP element announcing 1.3 only.
func helloBody() rawBody {
	b := make([]byte, 8)
	binary.BigEndian.PutUint16(b[0:2], uint16(ofp.HelloElemTypeVersionBitmap))
	binary.BigEndian.PutUint16(b[2:4], 8)
	binary.BigEndian.PutUint32(b[4:8], 1<<version13)
	return b
}

// helloVersions decodes a peer HELLO's version bitmap (bit n = wire version n). ok is
// false when the HELLO carries no bitmap element, as OpenFlow 1.0–1.3.0 peers may send.
func helloVersions(body []byte) (bitmap []uint32, ok bool, err error) {
	for off := 0; off < len(body); {
		if len(body)-off < 4 {
			return nil, false, fmt.Errorf("%w: HELLO element header truncated at byte %d", ErrMalformed, off)
		}
		typ := binary.BigEndian.Uint16(body[off:])
		l := int(binary.BigEndian.Uint16(body[off+2:]))
		if l < 4 || off+l > len(body) {
			return nil, false, fmt.Errorf("%w: HELLO element length %d at byte %d of %d", ErrMalformed, l, off, len(body))
		}
		if typ == uint16(ofp.HelloElemTypeVersionBitmap) {
			for p := off + 4; p+4 <= off+l; p += 4 {
				bitmap = append(bitmap, binary.BigEndian.Uint32(body[p:]))
			}
			ok = true
		}
		off += (l + 7) / 8 * 8 // elements are padded to 8 bytes
	}
	return bitmap, ok, nil
}

// negotiate applies OpenFlow's version negotiation to the peer's HELLO from our side,
// which offers 1.3 only: with bitmaps on both sides the highest common version wins,
// otherwise the lower of the two header versions. It reports whether that is 1.3.
func negotiate(f frame) (bool, error) {
	bitmap, ok, err := helloVersions(f.body)
	if err != nil {
		return false, err
	}
	if ok {
		return len(bitmap) > 0 && bitmap[0]&(1<<version13) != 0, nil
	}
	return f.h.Version >= version13, nil
}

// errorMsg is a decoded ofp_error_msg.
type errorMsg struct {
	Type, Code uint16
	Data       []byte // for most errors, at least 64 bytes of the failed request
}

func parseError(body []byte) (errorMsg, error) {
	if len(body) < 4 {
		return errorMsg{}, fmt.Errorf("%w: ERROR body is %d bytes, need 4", ErrMalformed, len(body))
	}
	return errorMsg{
		Type: binary.BigEndian.Uint16(body[0:2]),
		Code: binary.BigEndian.Uint16(body[2:4]),
		Data: body[4:],
	}, nil
}

// errorBody encodes an ofp_error_msg body.
func errorBody(typ, code uint16, data []byte) rawBody {
	b := make([]byte, 4, 4+len(data))
	binary.BigEndian.PutUint16(b[0:2], typ)
	binary.BigEndian.PutUint16(b[2:4], code)
	return append(b, data...)
}

// parseFeatures decodes ofp_switch_features (24 bytes; 1.3 has no port list).
func parseFeatures(body []byte) (ofp.SwitchFeatures, error) {
	if len(body) < 24 {
		return ofp.SwitchFeatures{}, fmt.Errorf("%w: FEATURES_REPLY body is %d bytes, need 24", ErrMalformed, len(body))
	}
	return ofp.SwitchFeatures{
		DatapathID:   binary.BigEndian.Uint64(body[0:8]),
		NumBuffers:   binary.BigEndian.Uint32(body[8:12]),
		NumTables:    body[12],
		AuxiliaryID:  body[13],
		Capabilities: ofp.Capability(binary.BigEndian.Uint32(body[16:20])),
		Reserved:     binary.BigEndian.Uint32(body[20:24]),
	}, nil
}

// multipartRequestBody encodes ofp_multipart_request around an already encoded body.
func multipartRequestBody(typ ofp.MultipartType, body io.WriterTo) (rawBody, error) {
	b := make([]byte, 8)
	binary.BigEndian.PutUint16(b[0:2], uint16(typ))
	if body == nil {
		return b, nil
	}
	buf := bytes.NewBuffer(b)
	if _, err := body.WriteTo(buf); err != nil {
		return nil, fmt.Errorf("encode %v request body: %w", typ, err)
	}
	return buf.Bytes(), nil
}

// parseMultipartReply splits ofp_multipart_reply into its type, flags and body.
func parseMultipartReply(body []byte) (typ ofp.MultipartType, flags uint16, payload []byte, err error) {
	if len(body) < 8 {
		return 0, 0, nil, fmt.Errorf("%w: MULTIPART_REPLY body is %d bytes, need 8", ErrMalformed, len(body))
	}
	return ofp.MultipartType(binary.BigEndian.Uint16(body[0:2])), binary.BigEndian.Uint16(body[2:4]), body[8:], nil
}

// switchConfigBody is SET_CONFIG with normal fragment handling and whole frames to the
// controller, so a table-miss packet-in carries the complete ARP request.
func switchConfigBody() rawBody {
	b := make([]byte, 4)
	binary.BigEndian.PutUint16(b[2:4], noBufferMissLen)
	return b
}
