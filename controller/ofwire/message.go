package ofwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// Framing: the OpenFlow header, whole messages, and the few message bodies a session
// itself sends or reads (HELLO, ERROR, FEATURES, MULTIPART, SET_CONFIG). Nothing here holds
// state or does I/O beyond the io.Reader it is given, so every decoder is fuzzed. Bodies of
// the standard messages a session sends are netrack's ofp types; the header is written here
// because the library's Request fixes neither the xid nor flushing.

const (
	// Version13 is the only OpenFlow version flowweight speaks (wire version 0x04).
	Version13 = 0x04
	// HeaderLen is sizeof(ofp_header).
	HeaderLen = 8
	// MaxMessageLen is the most an ofp_header's 16-bit length can say.
	MaxMessageLen = 0xffff
	// MultipartHeaderLen is ofp_multipart_request/reply after ofp_header: type, flags, pad.
	MultipartHeaderLen = 8
	// ReplyMore is OFPMPF_REPLY_MORE: more parts of this multipart reply follow.
	ReplyMore = 0x0001
	// noBufferMissLen is OFPCML_NO_BUFFER: send whole frames to the controller.
	noBufferMissLen = 0xffff
)

// ErrMalformed wraps every decoding error of this package: bytes from a switch (or from a
// planner's encoder, when a fake switch decodes them) that are not what OpenFlow 1.3 allows.
var ErrMalformed = errors.New("malformed OpenFlow message")

// pad8 is n rounded up to OpenFlow's 8-byte alignment (matches, actions, HELLO elements).
func pad8(n int) int { return (n + 7) &^ 7 }

// Header is ofp_header.
type Header struct {
	Version uint8
	Type    of.Type
	Length  uint16
	Xid     uint32
}

// Frame is one message read from a switch: its header and body (Length-8 bytes).
type Frame struct {
	Header
	Body []byte
}

// PutHeader writes an OpenFlow 1.3 header for a message of length bytes into b[:HeaderLen]:
// the one place a header is encoded.
func PutHeader(b []byte, t of.Type, length uint16, xid uint32) {
	b[0], b[1] = Version13, byte(t)
	binary.BigEndian.PutUint16(b[2:4], length)
	binary.BigEndian.PutUint32(b[4:8], xid)
}

// ParseHeader decodes an ofp_header and checks that its length can hold it.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("%w: header is %d bytes, need %d", ErrMalformed, len(b), HeaderLen)
	}
	h := Header{
		Version: b[0],
		Type:    of.Type(b[1]),
		Length:  binary.BigEndian.Uint16(b[2:4]),
		Xid:     binary.BigEndian.Uint32(b[4:8]),
	}
	if h.Length < HeaderLen {
		return h, fmt.Errorf("%w: header length %d below %d (type %d, xid %d)", ErrMalformed, h.Length, HeaderLen, h.Type, h.Xid)
	}
	return h, nil
}

// ReadFrame reads exactly one message. A short read is an error: the stream is then out of
// step and the session must be closed.
func ReadFrame(r io.Reader) (Frame, error) {
	var hb [HeaderLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return Frame{}, err
	}
	h, err := ParseHeader(hb[:])
	if err != nil {
		return Frame{}, err
	}
	body := make([]byte, int(h.Length)-HeaderLen)
	if _, err := io.ReadFull(r, body); err != nil {
		return Frame{}, fmt.Errorf("read body of %v (xid %d, %d bytes): %w", h.Type, h.Xid, len(body), err)
	}
	return Frame{Header: h, Body: body}, nil
}

// AppendMessage appends one OpenFlow 1.3 message (header + encoded body) to buf.
func AppendMessage(buf *bytes.Buffer, t of.Type, xid uint32, body io.WriterTo) error {
	var bb bytes.Buffer
	if body != nil {
		if _, err := body.WriteTo(&bb); err != nil {
			return fmt.Errorf("encode %v body: %w", t, err)
		}
	}
	n := HeaderLen + bb.Len()
	if n > MaxMessageLen {
		return fmt.Errorf("encode %v: message is %d bytes, OpenFlow allows %d", t, n, MaxMessageLen)
	}
	var hb [HeaderLen]byte
	PutHeader(hb[:], t, uint16(n), xid)
	buf.Write(hb[:])
	buf.Write(bb.Bytes())
	return nil
}

// EncodeMessage returns one encoded message.
func EncodeMessage(t of.Type, xid uint32, body io.WriterTo) ([]byte, error) {
	var buf bytes.Buffer
	if err := AppendMessage(&buf, t, xid, body); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// RawBody is a body that is already encoded.
type RawBody []byte

// WriteTo implements io.WriterTo.
func (r RawBody) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r)
	return int64(n), err
}

// HelloBody is our HELLO: one OFPHET_VERSIONBITMAP element announcing 1.3 only.
func HelloBody() RawBody {
	b := make([]byte, 8)
	binary.BigEndian.PutUint16(b[0:2], uint16(ofp.HelloElemTypeVersionBitmap))
	binary.BigEndian.PutUint16(b[2:4], 8)
	binary.BigEndian.PutUint32(b[4:8], 1<<Version13)
	return b
}

// HelloVersions decodes a peer HELLO's version bitmap (bit n = wire version n). ok is
// false when the HELLO carries no bitmap element, as OpenFlow 1.0–1.3.0 peers may send.
func HelloVersions(body []byte) (bitmap []uint32, ok bool, err error) {
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
		off += pad8(l) // elements are padded to 8 bytes
	}
	return bitmap, ok, nil
}

// Negotiate applies OpenFlow's version negotiation to the peer's HELLO from our side,
// which offers 1.3 only: with bitmaps on both sides the highest common version wins,
// otherwise the lower of the two header versions. It reports whether that is 1.3.
func Negotiate(f Frame) (bool, error) {
	bitmap, ok, err := HelloVersions(f.Body)
	if err != nil {
		return false, err
	}
	if ok {
		return len(bitmap) > 0 && bitmap[0]&(1<<Version13) != 0, nil
	}
	return f.Version >= Version13, nil
}

// ErrorMsg is a decoded ofp_error_msg.
type ErrorMsg struct {
	Type, Code uint16
	Data       []byte // for most errors, at least 64 bytes of the failed request
}

// ParseError decodes an ofp_error_msg body; Data aliases body.
func ParseError(body []byte) (ErrorMsg, error) {
	if len(body) < 4 {
		return ErrorMsg{}, fmt.Errorf("%w: ERROR body is %d bytes, need 4", ErrMalformed, len(body))
	}
	return ErrorMsg{
		Type: binary.BigEndian.Uint16(body[0:2]),
		Code: binary.BigEndian.Uint16(body[2:4]),
		Data: body[4:],
	}, nil
}

// ErrorBody encodes an ofp_error_msg body.
func ErrorBody(typ, code uint16, data []byte) RawBody {
	b := make([]byte, 4, 4+len(data))
	binary.BigEndian.PutUint16(b[0:2], typ)
	binary.BigEndian.PutUint16(b[2:4], code)
	return append(b, data...)
}

// ParseFeatures decodes ofp_switch_features (24 bytes; 1.3 has no port list).
func ParseFeatures(body []byte) (ofp.SwitchFeatures, error) {
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

// MultipartRequest encodes ofp_multipart_request around an already encoded body.
func MultipartRequest(typ ofp.MultipartType, body io.WriterTo) (RawBody, error) {
	b := make([]byte, MultipartHeaderLen)
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

// ParseMultipartReply splits ofp_multipart_reply into its type, flags and body; given just
// the MultipartHeaderLen bytes of the header it returns an empty payload.
func ParseMultipartReply(body []byte) (typ ofp.MultipartType, flags uint16, payload []byte, err error) {
	if len(body) < MultipartHeaderLen {
		return 0, 0, nil, fmt.Errorf("%w: MULTIPART_REPLY body is %d bytes, need %d", ErrMalformed, len(body), MultipartHeaderLen)
	}
	return ofp.MultipartType(binary.BigEndian.Uint16(body[0:2])), binary.BigEndian.Uint16(body[2:4]), body[MultipartHeaderLen:], nil
}

// SwitchConfigBody is SET_CONFIG with normal fragment handling and whole frames to the
// controller, so a table-miss packet-in carries the complete ARP request.
func SwitchConfigBody() RawBody {
	b := make([]byte, 4)
	binary.BigEndian.PutUint16(b[2:4], noBufferMissLen)
	return b
}
