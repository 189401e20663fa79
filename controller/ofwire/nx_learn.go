package ofwire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/netrack/openflow/ofp"
)

// Nicira action subtypes for client affinity (nx_action_subtype in Open vSwitch).
const (
	SubtypeResubmitTable uint16 = 14 // NXAST_RESUBMIT_TABLE: look the packet up in another table and come back
	SubtypeLearn         uint16 = 16 // NXAST_LEARN: add or refresh a flow from the packet's fields
)

// NXM headers (class, field, has-mask, length) the affinity flows use. Open vSwitch writes
// the fields of a learn spec with their OpenFlow 1.0 NXM names whatever the protocol
// version, so these are the headers ovs-ofctl puts on the wire.
const (
	NXMEthType uint32 = 0x00000602 // NXM_OF_ETH_TYPE
	NXMIPProto uint32 = 0x00000c01 // NXM_OF_IP_PROTO
	NXMIPSrc   uint32 = 0x00000e04 // NXM_OF_IP_SRC
	NXMIPDst   uint32 = 0x00001004 // NXM_OF_IP_DST
	NXMTCPDst  uint32 = 0x00001402 // NXM_OF_TCP_DST
	NXMUDPDst  uint32 = 0x00001802 // NXM_OF_UDP_DST
)

// NXMReg is the NXM header of register i (NXM_NX_REGi, 32 bits), 0 <= i < 16.
func NXMReg(i uint8) uint32 { return 0x00010000 | uint32(i&0x7f)<<9 | 4 }

// RegMatch matches register i (NXM_NX_REGi) exactly, e.g. `reg0=0xa4d000b`.
func RegMatch(i uint8, v uint32) ofp.XM {
	return ofp.XM{Class: ofp.XMClassNicira1, Type: ofp.XMType(i), Value: binary.BigEndian.AppendUint32(nil, v)}
}

// resubmitLen is sizeof(struct nx_action_resubmit).
const resubmitLen = 16

// InPortUnchanged is the in_port of a resubmit that keeps the packet's own (OFPP_IN_PORT in
// OpenFlow 1.0 numbering, what ovs-ofctl writes for `resubmit(,T)`).
const InPortUnchanged uint16 = 0xfff8

// Resubmit is NXAST_RESUBMIT_TABLE, `resubmit(,T)`: the packet is looked up in table T, that
// flow's actions run, and the action list continues after the resubmit. Unlike goto_table it
// may come back, which is how a flow can consult a table of learned flows (which can only
// set fields) and then act on what they set.
type Resubmit struct {
	InPort uint16 // InPortUnchanged for the packet's own
	Table  uint8
}

// Type implements ofp.Action.
func (a *Resubmit) Type() ofp.ActionType { return ofp.ActionTypeExperimenter }

// MarshalBinary returns the wire form of the action.
func (a *Resubmit) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }

// AppendBinary appends the wire form of the action to dst (encoding.BinaryAppender).
func (a *Resubmit) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, resubmitLen)...)
	b := dst[start:]
	putExperimenterHeader(b, resubmitLen, SubtypeResubmitTable)
	binary.BigEndian.PutUint16(b[10:], a.InPort)
	b[12] = a.Table
	return dst, nil
}

// WriteTo implements io.WriterTo (and so ofp.Action).
func (a *Resubmit) WriteTo(w io.Writer) (int64, error) { return writeBinary(w, a.MarshalBinary) }

// ReadFrom implements io.ReaderFrom: it reads exactly one NXAST_RESUBMIT_TABLE action.
func (a *Resubmit) ReadFrom(r io.Reader) (int64, error) {
	b, n, err := readAction(r)
	if err != nil {
		return n, err
	}
	return n, a.UnmarshalBinary(b)
}

// UnmarshalBinary decodes one whole NXAST_RESUBMIT_TABLE action.
func (a *Resubmit) UnmarshalBinary(b []byte) error {
	if err := checkExperimenter(b, SubtypeResubmitTable, resubmitLen); err != nil {
		return err
	}
	if len(b) != resubmitLen {
		return fmt.Errorf("nx: resubmit action is %d bytes, want %d", len(b), resubmitLen)
	}
	if !allZero(b[13:16]) {
		return fmt.Errorf("nx: resubmit pad %x is not zero", b[13:16])
	}
	*a = Resubmit{InPort: binary.BigEndian.Uint16(b[10:]), Table: b[12]}
	return nil
}

// LearnFlags are the NX_LEARN_F_* flags of NXAST_LEARN.
type LearnFlags uint16

const (
	LearnSendFlowRem   LearnFlags = 1 << 0 // the learned flow sends flow-removed messages
	LearnDeleteLearned LearnFlags = 1 << 1 // deleting the learning flow deletes what it learned
)

// learnHeaderLen is sizeof(struct nx_action_learn) without specs.
const learnHeaderLen = 32

// Learn spec source and destination kinds (NX_LEARN_SRC_* and NX_LEARN_DST_*) and the bit
// count mask of a spec header.
const (
	LearnSrcField     uint16 = 0 << 13
	LearnSrcImmediate uint16 = 1 << 13
	LearnDstMatch     uint16 = 0 << 11
	LearnDstLoad      uint16 = 1 << 11
	LearnDstOutput    uint16 = 2 << 11

	learnSrcMask   uint16 = 1 << 13
	learnDstMask   uint16 = 3 << 11
	learnNBitsMask uint16 = 0x3ff
)

// LearnSpec is one flow_mod_spec of a learn action: a match field of the learned flow, or a
// load (or output) in its actions, from a field of the packet or an immediate value.
type LearnSpec struct {
	Src   uint16 // LearnSrcField or LearnSrcImmediate
	Dst   uint16 // LearnDstMatch, LearnDstLoad or LearnDstOutput
	NBits uint16 // bits copied, 1..1023
	// SrcField and SrcOfs name the packet's bits (Src = LearnSrcField).
	SrcField uint32
	SrcOfs   uint16
	// Imm is the immediate value as on the wire (Src = LearnSrcImmediate): right-aligned in
	// 2·ceil(NBits/16) bytes.
	Imm []byte
	// DstField and DstOfs name the learned flow's field (Dst = LearnDstMatch or LearnDstLoad).
	DstField uint32
	DstOfs   uint16
}

// LearnMatchField makes the learned flow match the packet's whole field f (nbits wide):
// ovs-ofctl's `NXM_OF_IP_SRC[]`.
func LearnMatchField(f uint32, nbits uint16) LearnSpec {
	return LearnSpec{Src: LearnSrcField, Dst: LearnDstMatch, NBits: nbits, SrcField: f, DstField: f}
}

// LearnMatchValue makes the learned flow match field f (nbits wide) against v: ovs-ofctl's
// `eth_type=0x800`.
func LearnMatchValue(f uint32, nbits uint16, v uint64) LearnSpec {
	return LearnSpec{Src: LearnSrcImmediate, Dst: LearnDstMatch, NBits: nbits, Imm: immediate(nbits, v), DstField: f}
}

// LearnLoadValue puts a load of v into bits [ofs, ofs+nbits) of field f into the learned
// flow's actions: ovs-ofctl's `load:0x1f90->NXM_NX_REG1[]`.
func LearnLoadValue(v uint64, nbits uint16, f uint32, ofs uint16) LearnSpec {
	return LearnSpec{Src: LearnSrcImmediate, Dst: LearnDstLoad, NBits: nbits, Imm: immediate(nbits, v), DstField: f, DstOfs: ofs}
}

// immediate is v right-aligned in the wire size of an nbits immediate (at most 64 bits here).
func immediate(nbits uint16, v uint64) []byte {
	n := 2 * ((int(nbits) + 15) / 16)
	b := make([]byte, max(n, 8))
	binary.BigEndian.PutUint64(b[len(b)-8:], v)
	return b[len(b)-n:]
}

// wireLen is the spec's length on the wire, its 2-byte header included.
func (s LearnSpec) wireLen() int {
	n := 2
	if s.Src == LearnSrcField {
		n += 6
	} else {
		n += 2 * ((int(s.NBits) + 15) / 16)
	}
	if s.Dst == LearnDstMatch || s.Dst == LearnDstLoad {
		n += 6
	}
	return n
}

// check reports what makes the spec unencodable, in Open vSwitch's terms.
func (s LearnSpec) check() error {
	switch {
	case s.Src&^learnSrcMask != 0 || s.Dst&^learnDstMask != 0:
		return fmt.Errorf("nx: learn spec src %#x dst %#x are not NX_LEARN_SRC/DST values", s.Src, s.Dst)
	case s.NBits == 0 || s.NBits > learnNBitsMask:
		return fmt.Errorf("nx: learn spec of %d bits, want 1..%d", s.NBits, learnNBitsMask)
	case s.Dst == LearnDstOutput && s.Src != LearnSrcField:
		return fmt.Errorf("nx: learn spec outputs to an immediate port (only output:FIELD[] exists)")
	case s.Dst != LearnDstMatch && s.Dst != LearnDstLoad && s.Dst != LearnDstOutput:
		return fmt.Errorf("nx: learn spec destination %#x is reserved", s.Dst)
	case s.Src == LearnSrcImmediate && len(s.Imm) != 2*((int(s.NBits)+15)/16):
		return fmt.Errorf("nx: learn spec immediate is %d bytes, %d bits need %d", len(s.Imm), s.NBits, 2*((int(s.NBits)+15)/16))
	}
	return nil
}

// Learn is NXAST_LEARN, `learn(...)` in ovs-ofctl syntax: executing it adds to Table the flow
// its Specs describe, built from the packet being processed (or, when that flow exists,
// replaces it, which restarts its timeouts), with the given cookie, priority and timeouts.
// A learned flow's actions can only load fields and output, so a table of learned flows is
// consulted through Resubmit and acted on by the flows after it.
type Learn struct {
	IdleTimeout, HardTimeout uint16 // seconds; 0 is none
	Priority                 uint16
	Cookie                   uint64
	Flags                    LearnFlags
	Table                    uint8 // never 0xff
	FinIdleTimeout           uint16
	FinHardTimeout           uint16
	Specs                    []LearnSpec
}

// Type implements ofp.Action.
func (a *Learn) Type() ofp.ActionType { return ofp.ActionTypeExperimenter }

// MarshalBinary returns the wire form of the action, zero-padded to 8 bytes.
func (a *Learn) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }

// AppendBinary appends the wire form of the action to dst (encoding.BinaryAppender).
func (a *Learn) AppendBinary(dst []byte) ([]byte, error) {
	if a.Table == 0xff {
		return dst, fmt.Errorf("nx: learn into table 255 (all tables)")
	}
	if a.Flags&^(LearnSendFlowRem|LearnDeleteLearned) != 0 {
		return dst, fmt.Errorf("nx: learn flags %#x have unknown bits (write_result needs NXAST_LEARN2)", uint16(a.Flags))
	}
	total := learnHeaderLen
	for i, s := range a.Specs {
		if err := s.check(); err != nil {
			return dst, fmt.Errorf("nx: learn spec %d: %w", i, err)
		}
		total += s.wireLen()
	}
	total = pad8(total)
	if total > 0xfff8 {
		return dst, fmt.Errorf("nx: learn action of %d bytes is too long", total)
	}
	start := len(dst)
	dst = append(dst, make([]byte, total)...)
	b := dst[start:]
	putExperimenterHeader(b, uint16(total), SubtypeLearn)
	binary.BigEndian.PutUint16(b[10:], a.IdleTimeout)
	binary.BigEndian.PutUint16(b[12:], a.HardTimeout)
	binary.BigEndian.PutUint16(b[14:], a.Priority)
	binary.BigEndian.PutUint64(b[16:], a.Cookie)
	binary.BigEndian.PutUint16(b[24:], uint16(a.Flags))
	b[26] = a.Table
	binary.BigEndian.PutUint16(b[28:], a.FinIdleTimeout)
	binary.BigEndian.PutUint16(b[30:], a.FinHardTimeout)
	p := b[learnHeaderLen:]
	put16 := func(v uint16) { binary.BigEndian.PutUint16(p, v); p = p[2:] }
	put32 := func(v uint32) { binary.BigEndian.PutUint32(p, v); p = p[4:] }
	for _, s := range a.Specs {
		put16(s.NBits | s.Src | s.Dst)
		if s.Src == LearnSrcField {
			put32(s.SrcField)
			put16(s.SrcOfs)
		} else {
			p = p[copy(p, s.Imm):]
		}
		if s.Dst == LearnDstMatch || s.Dst == LearnDstLoad {
			put32(s.DstField)
			put16(s.DstOfs)
		}
	}
	return dst, nil
}

// WriteTo implements io.WriterTo (and so ofp.Action).
func (a *Learn) WriteTo(w io.Writer) (int64, error) { return writeBinary(w, a.MarshalBinary) }

// ReadFrom implements io.ReaderFrom: it reads exactly one NXAST_LEARN action.
func (a *Learn) ReadFrom(r io.Reader) (int64, error) {
	b, n, err := readAction(r)
	if err != nil {
		return n, err
	}
	return n, a.UnmarshalBinary(b)
}

// UnmarshalBinary decodes one whole NXAST_LEARN action with Open vSwitch's checks
// (decode_LEARN_common, decode_LEARN_specs): zero pad, a real table, known flags, valid
// source/destination pairs, specs inside the action, and only zeros after the last one.
func (a *Learn) UnmarshalBinary(b []byte) error {
	if err := checkExperimenter(b, SubtypeLearn, learnHeaderLen); err != nil {
		return err
	}
	out := Learn{
		IdleTimeout:    binary.BigEndian.Uint16(b[10:]),
		HardTimeout:    binary.BigEndian.Uint16(b[12:]),
		Priority:       binary.BigEndian.Uint16(b[14:]),
		Cookie:         binary.BigEndian.Uint64(b[16:]),
		Flags:          LearnFlags(binary.BigEndian.Uint16(b[24:])),
		Table:          b[26],
		FinIdleTimeout: binary.BigEndian.Uint16(b[28:]),
		FinHardTimeout: binary.BigEndian.Uint16(b[30:]),
	}
	switch {
	case b[27] != 0:
		return fmt.Errorf("nx: learn pad %#02x is not zero", b[27])
	case out.Table == 0xff:
		return fmt.Errorf("nx: learn into table 255 (all tables)")
	case out.Flags&^(LearnSendFlowRem|LearnDeleteLearned) != 0:
		return fmt.Errorf("nx: learn flags %#x have unknown bits", uint16(out.Flags))
	}
	p := b[learnHeaderLen:]
	for len(p) >= 2 {
		h := binary.BigEndian.Uint16(p)
		if h == 0 {
			break
		}
		s := LearnSpec{Src: h & learnSrcMask, Dst: h & learnDstMask, NBits: h & learnNBitsMask}
		if s.Dst != LearnDstMatch && s.Dst != LearnDstLoad && !(s.Dst == LearnDstOutput && s.Src == LearnSrcField) {
			return fmt.Errorf("nx: learn spec %d header %#04x: bad source/destination pair", len(out.Specs), h)
		}
		if s.NBits == 0 {
			return fmt.Errorf("nx: learn spec %d header %#04x copies 0 bits", len(out.Specs), h)
		}
		n := s.wireLen()
		if n > len(p) {
			return fmt.Errorf("%w: learn spec %d needs %d bytes, %d left", ErrShort, len(out.Specs), n, len(p))
		}
		q := p[2:n]
		if s.Src == LearnSrcField {
			s.SrcField, s.SrcOfs = binary.BigEndian.Uint32(q), binary.BigEndian.Uint16(q[4:])
			q = q[6:]
		} else {
			k := 2 * ((int(s.NBits) + 15) / 16)
			s.Imm = bytes.Clone(q[:k])
			q = q[k:]
		}
		if s.Dst == LearnDstMatch || s.Dst == LearnDstLoad {
			s.DstField, s.DstOfs = binary.BigEndian.Uint32(q), binary.BigEndian.Uint16(q[4:])
		}
		out.Specs = append(out.Specs, s)
		p = p[n:]
	}
	if !allZero(p) {
		return fmt.Errorf("nx: learn action has %d non-zero bytes after its specs", len(p))
	}
	*a = out
	return nil
}
