package ofwire

import (
	"encoding/binary"
	"fmt"
)

// ofp_match framing, shared by flow mods, flow stats and packet-ins: a 4-byte header (type
// OXM, length of header and fields) and the OXM TLVs, zero-padded to 8 bytes.

const (
	matchHeaderLen = 4 // ofp_match type + length
	matchTypeOXM   = 1 // OFPMT_OXM
)

// AppendMatch appends an ofp_match (OXM type) holding the raw TLVs in fields, padded to 8
// bytes.
func AppendMatch(b []byte, fields string) []byte {
	n := matchHeaderLen + len(fields)
	b = binary.BigEndian.AppendUint16(b, matchTypeOXM)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = append(b, fields...)
	return append(b, make([]byte, pad8(n)-n)...)
}

// cutMatch reads an ofp_match (OXM type) at the start of b and returns its TLVs as they are
// (aliasing b) and the bytes after its padding.
func cutMatch(b []byte) (fields, rest []byte, err error) {
	if len(b) < matchHeaderLen {
		return nil, nil, fmt.Errorf("%w: match header: %d bytes", ErrMalformed, len(b))
	}
	if t := binary.BigEndian.Uint16(b); t != matchTypeOXM {
		return nil, nil, fmt.Errorf("%w: match type %d, want OXM (1)", ErrMalformed, t)
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	if n < matchHeaderLen || pad8(n) > len(b) {
		return nil, nil, fmt.Errorf("%w: match length %d, %d bytes available", ErrMalformed, n, len(b))
	}
	return b[matchHeaderLen:n], b[pad8(n):], nil
}

// splitMatch reads an ofp_match at the start of b and returns its canonical TLVs
// (CanonicalMatch) and the bytes after its padding.
func splitMatch(b []byte) (string, []byte, error) {
	fields, rest, err := cutMatch(b)
	if err != nil {
		return "", nil, err
	}
	m, err := CanonicalMatch(fields)
	if err != nil {
		return "", nil, fmt.Errorf("%w: match: %w", ErrMalformed, err)
	}
	return m, rest, nil
}

// CanonicalMatch parses OXM TLVs and re-encodes them sorted by their bytes (EncodeFields),
// so a switch's read-back compares equal to what was planned whatever order it emits.
func CanonicalMatch(b []byte) (string, error) {
	fields, err := ParseOXM(b)
	if err != nil {
		return "", err
	}
	return EncodeFields(fields)
}
