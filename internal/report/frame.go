package report

import (
	"errors"
	"fmt"
)

// The framing of a datagram: its sizes, the offsets of its fields, and the one rule that
// says where its parts lie. Both directions use it: AppendSeal lays a report out by frameOf
// and writes the framing bytes with appendFraming; Frame and Open check a datagram by
// parseFrame, which reads those bytes back and applies the same frameOf. So the encoder
// cannot write a layout the decoder refuses, and the checks exist once.

// Sizes of the push protocol's datagrams (docs/push-protocol.md).
const (
	MaxDatagram = 512 // longer datagrams are ReasonOversized
	TagSize     = 32  // full HMAC-SHA256, never truncated

	// HeaderSize is the fixed header both versions start with; in version 1 the backend id
	// follows it.
	HeaderSize = 80
	// ExtensionSize is the version-2 extension between the header and the backend id.
	ExtensionSize = 16
	// HeaderSizeV2 is the fixed part before the backend id in version 2.
	HeaderSizeV2 = HeaderSize + ExtensionSize
	// MinDatagram is the smallest datagram of any version: a version-1 header, a one-byte id
	// and the tag.
	MinDatagram = HeaderSize + 1 + TagSize

	magic0, magic1 = 'F', 'W'
)

// Byte offsets of the header fields (all big-endian).
const (
	offMagic     = 0  // 2 bytes "FW"
	offVersion   = 2  // 1
	offIDLen     = 3  // 1
	offErrLen    = 4  // 1
	offReserved  = 5  // 1, must be 0
	offFlags     = 6  // 2
	offNonce     = 8  // 8
	offSeq       = 16 // 8
	offTime      = 24 // 8, int64 unix ns
	offInterval  = 32 // 8, int64 ns
	offCPUUtil   = 40 // 4, ppb
	offCPUCount  = 44 // 4, millicores
	offMemUtil   = 48 // 4, ppb
	offNetUtil   = 52 // 4, ppb
	offMemBytes  = 56 // 8
	offLatency   = 64 // 8, int64 ns
	offConns     = 72 // 4
	offStatus    = 76 // 2
	offReserved2 = 78 // 2, must be 0

	// The version-2 extension.
	offSignals     = 80 // 2
	offReserved3   = 82 // 2, must be 0
	offCPUPressure = 84 // 4, ppb
	offThrottled   = 88 // 4, ppb
	offServiceCPU  = 92 // 4, ppb
)

// frame is where the parts of one datagram lie: the fixed fields (with the version-2
// extension or without), the backend id, the health error, the tag. A frame from frameOf
// is one the protocol allows.
type frame struct {
	version       byte
	idLen, errLen int
}

// frameOf is the framing rule: versions 1 and 2, an id of 1..MaxIDLen bytes, a health error
// of at most MaxHealthErrorLen bytes, checked in that order (docs/push-protocol.md, checks 4
// and 5; a frame's size is check 6). The largest frame, 320 bytes, is well under MaxDatagram.
func frameOf(version byte, idLen, errLen int) (frame, fault) {
	switch {
	case version != Version1 && version != Version2:
		return frame{}, fault{reason: ReasonVersion, check: checkVersion, got: int(version)}
	case idLen == 0 || idLen > MaxIDLen:
		return frame{}, fault{reason: ReasonMalformed, check: checkIDLen, got: idLen}
	case errLen > MaxHealthErrorLen:
		return frame{}, fault{reason: ReasonMalformed, check: checkErrLen, got: errLen}
	}
	return frame{version: version, idLen: idLen, errLen: errLen}, fault{}
}

// extended reports whether the datagram carries the version-2 extension.
func (f frame) extended() bool { return f.version != Version1 }

// idStart is the end of the fixed fields, where the backend id starts.
func (f frame) idStart() int {
	if f.extended() {
		return HeaderSizeV2
	}
	return HeaderSize
}

func (f frame) errStart() int { return f.idStart() + f.idLen }

// body is the end of the health error: the bytes the tag covers.
func (f frame) body() int { return f.errStart() + f.errLen }

// size is the whole datagram, tag included.
func (f frame) size() int { return f.body() + TagSize }

// appendFraming appends the bytes parseFrame reads: magic, version, the two lengths and the
// reserved byte.
func (f frame) appendFraming(dst []byte) []byte {
	return append(dst, magic0, magic1, f.version, byte(f.idLen), byte(f.errLen), 0)
}

// parseFrame runs the checks that need no key (docs/push-protocol.md, checks 1 to 7: size,
// magic, version, lengths, the size the lengths announce, the id's charset) and returns the
// datagram's frame. A refusal is a fault value: nothing is allocated or formatted until a
// caller asks for the details.
func parseFrame(d []byte) (frame, fault) {
	n := len(d)
	switch {
	case n > MaxDatagram:
		return frame{}, fault{reason: ReasonOversized, check: checkOversized, got: n}
	case n < HeaderSize:
		return frame{}, fault{reason: ReasonTruncated, check: checkHeader, got: n}
	case d[offMagic] != magic0 || d[offMagic+1] != magic1:
		return frame{}, fault{reason: ReasonMalformed, check: checkMagic, got: int(d[offMagic])<<8 | int(d[offMagic+1])}
	}
	f, ft := frameOf(d[offVersion], int(d[offIDLen]), int(d[offErrLen]))
	if ft.check != checkNone {
		return frame{}, ft
	}
	if want := f.size(); n != want {
		ft = fault{reason: ReasonMalformed, check: checkSize, version: f.version, got: n, want: want}
		if n < want {
			ft.reason = ReasonTruncated
		}
		return frame{}, ft
	}
	if !validID(d[f.idStart():f.errStart()]) {
		return frame{}, fault{reason: ReasonMalformed, check: checkID, got: f.idStart(), want: f.errStart()}
	}
	return f, fault{}
}

// Frame runs the checks that need no key (size, magic, version, lengths,
// id charset: checks 1 to 7 of docs/push-protocol.md) and returns the
// claimed, unauthenticated backend id, a slice of datagram. It allocates
// nothing, so a server can shed junk before it costs a key lookup, an HMAC
// or an error value; reason is "" when the framing is sound, and Open
// gives the same reason with the details.
func Frame(datagram []byte) (id []byte, reason Reason) {
	f, ft := parseFrame(datagram)
	if ft.check != checkNone {
		return nil, ft.reason
	}
	return datagram[f.idStart():f.errStart()], ""
}

// check names the framing check a datagram failed, for the text of its error.
type check uint8

const (
	checkNone      check = iota
	checkOversized       // got: the datagram's size
	checkHeader          // got: the datagram's size
	checkMagic           // got: the two magic bytes
	checkVersion         // got: the version byte
	checkIDLen           // got: the id length byte
	checkErrLen          // got: the health error length byte
	checkSize            // got: the datagram's size, want: the size its lengths announce
	checkID              // got, want: where the id starts and ends
)

// fault is a refused framing: the Reason, the check and the numbers its message needs.
type fault struct {
	reason    Reason
	check     check
	version   byte
	got, want int
}

// err is the fault with its details, for a caller about to log it. d is the refused
// datagram (only a checkID fault reads it, for the id).
func (ft fault) err(d []byte) *Error {
	var msg string
	switch ft.check {
	case checkOversized:
		msg = fmt.Sprintf("datagram is %d bytes, max %d", ft.got, MaxDatagram)
	case checkHeader:
		msg = fmt.Sprintf("datagram is %d bytes, shorter than the %d-byte header", ft.got, HeaderSize)
	case checkMagic:
		msg = fmt.Sprintf("bad magic %#02x%02x, want %#02x%02x", byte(ft.got>>8), byte(ft.got), magic0, magic1)
	case checkVersion:
		msg = fmt.Sprintf("version %d, this collector speaks %d and %d", ft.got, Version1, Version2)
	case checkIDLen:
		msg = fmt.Sprintf("id length %d, want 1..%d", ft.got, MaxIDLen)
	case checkErrLen:
		msg = fmt.Sprintf("health error length %d, want <= %d", ft.got, MaxHealthErrorLen)
	case checkSize:
		msg = fmt.Sprintf("version-%d datagram is %d bytes, its lengths say %d", ft.version, ft.got, ft.want)
	case checkID:
		msg = fmt.Sprintf("backend id %q: want [A-Za-z0-9._-]", d[ft.got:ft.want])
	default:
		msg = "framing"
	}
	return &Error{Reason: ft.reason, Err: errors.New(msg)}
}
