package ofwire

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/netrack/openflow/ofp"
)

// Byte-for-byte the encodings of github.com/netrack/openflow's WriteTo methods, for the
// actions, instructions and match fields the planner builds, appended to one buffer.
//
// Why: the planner (controller/dataplane) encodes every flow and bucket of every service on
// every reweight (its State compares bytes), and the library writes each value through
// encoding/binary's reflection:
// for a 64-backend service that was about 10,000 allocations and 0.9 ms per reweight, most of
// the "rewrite + barrier under 1 ms" budget (docs/benchmarks.md). Anything else goes through
// the library's own WriteTo, and TestEncodersMatchTheLibrary and FuzzEncodeXM hold the two
// equal.

var be = binary.BigEndian

// appendXM appends one OXM TLV: class, field<<1|hasmask, length, value, mask.
func appendXM(dst []byte, f *ofp.XM) []byte {
	var hasmask ofp.XMType
	if len(f.Mask) > 0 {
		hasmask = 1
	}
	dst = be.AppendUint16(dst, uint16(f.Class))
	dst = append(dst, byte(f.Type<<1|hasmask), byte(len(f.Value)+len(f.Mask)))
	dst = append(dst, f.Value...)
	return append(dst, f.Mask...)
}

// appendAction appends one action as its WriteTo would.
func appendAction(dst []byte, a ofp.Action) ([]byte, error) {
	switch a := a.(type) {
	case *ofp.ActionOutput:
		dst = be.AppendUint16(dst, uint16(a.Type()))
		dst = be.AppendUint16(dst, 16)
		dst = be.AppendUint32(dst, uint32(a.Port))
		dst = be.AppendUint16(dst, a.MaxLen)
		return append(dst, 0, 0, 0, 0, 0, 0), nil
	case *ofp.ActionGroup:
		dst = be.AppendUint16(dst, uint16(a.Type()))
		dst = be.AppendUint16(dst, 8)
		return be.AppendUint32(dst, uint32(a.Group)), nil
	case *ofp.ActionSetField:
		start := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = appendXM(dst, &a.Field)
		dst = append(dst, make([]byte, pad8(len(dst)-start)-(len(dst)-start))...) // padded to 64 bits
		be.PutUint16(dst[start:], uint16(a.Type()))
		be.PutUint16(dst[start+2:], uint16(len(dst)-start))
		return dst, nil
	}
	if ap, ok := a.(encoding.BinaryAppender); ok { // the Nicira actions of nx_*.go
		return ap.AppendBinary(dst)
	}
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		return dst, err
	}
	return append(dst, buf.Bytes()...), nil
}

// AppendActions appends an action list as the library's WriteTo would (the Nicira actions
// of this package through their AppendBinary).
func AppendActions(dst []byte, as ofp.Actions) ([]byte, error) {
	var err error
	for _, a := range as {
		if dst, err = appendAction(dst, a); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// appendInstruction appends one instruction as its WriteTo would.
func appendInstruction(dst []byte, in ofp.Instruction) ([]byte, error) {
	switch in := in.(type) {
	case *ofp.InstructionApplyActions:
		start := len(dst)
		dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // type, length, 4 bytes of padding
		dst, err := AppendActions(dst, in.Actions)
		if err != nil {
			return dst, err
		}
		be.PutUint16(dst[start:], uint16(in.Type()))
		be.PutUint16(dst[start+2:], uint16(len(dst)-start))
		return dst, nil
	case *ofp.InstructionGotoTable:
		dst = be.AppendUint16(dst, uint16(in.Type()))
		dst = be.AppendUint16(dst, 8)
		return append(dst, byte(in.Table), 0, 0, 0), nil
	}
	var buf bytes.Buffer
	if _, err := in.WriteTo(&buf); err != nil {
		return dst, err
	}
	return append(dst, buf.Bytes()...), nil
}

// AppendInstructions appends an instruction list as the library's WriteTo would.
func AppendInstructions(dst []byte, in ofp.Instructions) ([]byte, error) {
	var err error
	for _, i := range in {
		if dst, err = appendInstruction(dst, i); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// EncodeFields encodes match fields in canonical order: the TLVs sorted by their bytes, the
// form Flow.Match holds.
func EncodeFields(fields []ofp.XM) (string, error) {
	var buf []byte
	var cuts [16][2]int // a match has a handful of fields; more spill to the heap
	spans := cuts[:0]
	for i := range fields {
		if len(fields[i].Value)+len(fields[i].Mask) > 255 {
			return "", fmt.Errorf("encoding match field %v: %d bytes of value and mask, at most 255", fields[i].Type,
				len(fields[i].Value)+len(fields[i].Mask))
		}
		start := len(buf)
		buf = appendXM(buf, &fields[i])
		spans = append(spans, [2]int{start, len(buf)})
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return bytes.Compare(buf[a[0]:a[1]], buf[b[0]:b[1]]) })
	out := make([]byte, 0, len(buf))
	for _, s := range spans {
		out = append(out, buf[s[0]:s[1]]...)
	}
	return string(out), nil
}
