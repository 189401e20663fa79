package ofwire

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/netrack/openflow/ofp"
)

// VendorID is the Nicira experimenter id carried by every NXAST action and NXM class 1 field.
const VendorID uint32 = 0x00002320

// Nicira action subtypes (nx_action_subtype in Open vSwitch).
const (
	SubtypeCT  uint16 = 35 // NXAST_CT: send the packet through the connection tracker
	SubtypeNAT uint16 = 36 // NXAST_NAT: only valid nested inside NXAST_CT
)

// CTFlags are the NX_CT_F_* flags of NXAST_CT.
type CTFlags uint16

const (
	// CTCommit commits the connection to the tracker, so later packets are +est.
	CTCommit CTFlags = 1 << 0
	// CTForce tears down an existing connection in the opposite direction before committing.
	CTForce CTFlags = 1 << 1
)

// RecircNone is the NXAST_CT recirc_table value meaning "do not recirculate".
const RecircNone uint8 = 0xff

// ctHeaderLen is sizeof(struct nx_action_conntrack) without nested actions.
const ctHeaderLen = 24

// natHeaderLen is sizeof(struct nx_action_nat) without the optional range fields.
const natHeaderLen = 16

// CT is the NXAST_CT action, `ct(...)` in ovs-ofctl syntax.
//
// Zone is an immediate zone when ZoneSrc is 0 (the only form we emit); otherwise ZoneSrc is an
// NXM header and Zone its ofs_nbits, kept only so that read-back round-trips.
type CT struct {
	Flags   CTFlags
	ZoneSrc uint32
	Zone    uint16
	// Table is the table the packet is recirculated to after tracking; RecircNone for none
	// (the zero value recirculates to table 0, as ovs-ofctl's table=0 does).
	Table uint8
	// Alg names an application-layer gateway (0 for none, 21 ftp, 69 tftp).
	Alg uint16
	// Actions are nested actions run on commit (typically one *NAT); each must be a whole
	// number of 8-byte units, which every action in this package and in netrack is.
	Actions ofp.Actions
}

// Type implements ofp.Action.
func (a *CT) Type() ofp.ActionType { return ofp.ActionTypeExperimenter }

// MarshalBinary returns the wire form of the action.
func (a *CT) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }

// AppendBinary appends the wire form of the action to dst (encoding.BinaryAppender): the
// controller encodes every bucket on every reweight, and appending to one buffer is what
// keeps that cheap. Nested actions that are BinaryAppenders are appended in place; others
// are written through their WriteTo.
func (a *CT) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, ctHeaderLen)...)
	for _, n := range a.Actions {
		var err error
		if ap, ok := n.(encoding.BinaryAppender); ok {
			dst, err = ap.AppendBinary(dst)
		} else {
			var buf bytes.Buffer
			if _, err = n.WriteTo(&buf); err == nil {
				dst = append(dst, buf.Bytes()...)
			}
		}
		if err != nil {
			return dst[:start], fmt.Errorf("nx: ct nested actions: %w", err)
		}
	}
	nested := len(dst) - start - ctHeaderLen
	if nested%8 != 0 {
		return dst[:start], fmt.Errorf("nx: ct nested actions are %d bytes, not a multiple of 8", nested)
	}
	total := ctHeaderLen + nested
	if total > 0xffff {
		return dst[:start], fmt.Errorf("nx: ct action of %d bytes is too long", total)
	}
	b := dst[start:]
	putExperimenterHeader(b, uint16(total), SubtypeCT)
	binary.BigEndian.PutUint16(b[10:], uint16(a.Flags))
	binary.BigEndian.PutUint32(b[12:], a.ZoneSrc)
	binary.BigEndian.PutUint16(b[16:], a.Zone)
	b[18] = a.Table
	// b[19:22] pad
	binary.BigEndian.PutUint16(b[22:], a.Alg)
	return dst, nil
}

// WriteTo implements io.WriterTo (and so ofp.Action).
func (a *CT) WriteTo(w io.Writer) (int64, error) { return writeBinary(w, a.MarshalBinary) }

// ReadFrom implements io.ReaderFrom: it reads exactly one NXAST_CT action, header included.
func (a *CT) ReadFrom(r io.Reader) (int64, error) {
	b, n, err := readAction(r)
	if err != nil {
		return n, err
	}
	return n, a.UnmarshalBinary(b)
}

// UnmarshalBinary decodes one whole NXAST_CT action.
func (a *CT) UnmarshalBinary(b []byte) error {
	if err := checkExperimenter(b, SubtypeCT, ctHeaderLen); err != nil {
		return err
	}
	nested, err := ParseActions(b[ctHeaderLen:])
	if err != nil {
		return fmt.Errorf("nx: ct nested actions: %w", err)
	}
	*a = CT{
		Flags:   CTFlags(binary.BigEndian.Uint16(b[10:])),
		ZoneSrc: binary.BigEndian.Uint32(b[12:]),
		Zone:    binary.BigEndian.Uint16(b[16:]),
		Table:   b[18],
		Alg:     binary.BigEndian.Uint16(b[22:]),
		Actions: nested,
	}
	return nil
}

// NATFlags are the NX_NAT_F_* flags of NXAST_NAT.
type NATFlags uint16

const (
	NATSrc         NATFlags = 1 << 0 // source NAT
	NATDst         NATFlags = 1 << 1 // destination NAT
	NATPersistent  NATFlags = 1 << 2
	NATProtoHash   NATFlags = 1 << 3
	NATProtoRandom NATFlags = 1 << 4
)

// NX_NAT_RANGE_* bits saying which optional fields follow the NXAST_NAT header, in this order.
const (
	rangeIPv4Min  uint16 = 1 << 0
	rangeIPv4Max  uint16 = 1 << 1
	rangeIPv6Min  uint16 = 1 << 2
	rangeIPv6Max  uint16 = 1 << 3
	rangeProtoMin uint16 = 1 << 4
	rangeProtoMax uint16 = 1 << 5
)

// NAT is the NXAST_NAT action, `nat(...)` inside ct(). With no flags and no range it is the
// bare `nat` that applies an existing connection's translation (both directions).
//
// An unset (zero) address or port is absent from the wire; IPMin and IPMax must be the same
// family.
type NAT struct {
	Flags   NATFlags
	IPMin   netip.Addr
	IPMax   netip.Addr
	PortMin uint16
	PortMax uint16
}

// Type implements ofp.Action.
func (a *NAT) Type() ofp.ActionType { return ofp.ActionTypeExperimenter }

// MarshalBinary returns the wire form of the action, padded to 8 bytes.
func (a *NAT) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }

// AppendBinary appends the wire form of the action to dst (encoding.BinaryAppender).
func (a *NAT) AppendBinary(dst []byte) ([]byte, error) {
	if a.IPMin.IsValid() && a.IPMax.IsValid() && a.IPMin.Is4() != a.IPMax.Is4() {
		return nil, fmt.Errorf("nx: nat range %v-%v mixes address families", a.IPMin, a.IPMax)
	}
	var present uint16
	var tail []byte
	v4 := func(x netip.Addr) bool { return x.IsValid() && x.Is4() }
	v6 := func(x netip.Addr) bool { return x.IsValid() && !x.Is4() }
	// Wire order is fixed: ipv4 min, ipv4 max, ipv6 min, ipv6 max, proto min, proto max.
	if v4(a.IPMin) {
		present |= rangeIPv4Min
		tail = append(tail, a.IPMin.AsSlice()...)
	}
	if v4(a.IPMax) {
		present |= rangeIPv4Max
		tail = append(tail, a.IPMax.AsSlice()...)
	}
	if v6(a.IPMin) {
		present |= rangeIPv6Min
		tail = append(tail, a.IPMin.AsSlice()...)
	}
	if v6(a.IPMax) {
		present |= rangeIPv6Max
		tail = append(tail, a.IPMax.AsSlice()...)
	}
	if a.PortMin != 0 {
		present |= rangeProtoMin
		tail = binary.BigEndian.AppendUint16(tail, a.PortMin)
	}
	if a.PortMax != 0 {
		present |= rangeProtoMax
		tail = binary.BigEndian.AppendUint16(tail, a.PortMax)
	}
	total := natHeaderLen + len(tail)
	total = pad8(total)
	start := len(dst)
	dst = append(dst, make([]byte, total)...)
	b := dst[start:]
	putExperimenterHeader(b, uint16(total), SubtypeNAT)
	// b[10:12] pad
	binary.BigEndian.PutUint16(b[12:], uint16(a.Flags))
	binary.BigEndian.PutUint16(b[14:], present)
	copy(b[natHeaderLen:], tail)
	return dst, nil
}

// WriteTo implements io.WriterTo (and so ofp.Action).
func (a *NAT) WriteTo(w io.Writer) (int64, error) { return writeBinary(w, a.MarshalBinary) }

// ReadFrom implements io.ReaderFrom: it reads exactly one NXAST_NAT action, header included.
func (a *NAT) ReadFrom(r io.Reader) (int64, error) {
	b, n, err := readAction(r)
	if err != nil {
		return n, err
	}
	return n, a.UnmarshalBinary(b)
}

// UnmarshalBinary decodes one whole NXAST_NAT action.
func (a *NAT) UnmarshalBinary(b []byte) error {
	if err := checkExperimenter(b, SubtypeNAT, natHeaderLen); err != nil {
		return err
	}
	present := binary.BigEndian.Uint16(b[14:])
	if present&^(rangeIPv4Min|rangeIPv4Max|rangeIPv6Min|rangeIPv6Max|rangeProtoMin|rangeProtoMax) != 0 {
		return fmt.Errorf("nx: nat range_present %#04x has unknown bits", present)
	}
	if present&(rangeIPv4Min|rangeIPv4Max) != 0 && present&(rangeIPv6Min|rangeIPv6Max) != 0 {
		return fmt.Errorf("nx: nat range_present %#04x mixes IPv4 and IPv6", present)
	}
	out := NAT{Flags: NATFlags(binary.BigEndian.Uint16(b[12:]))}
	rest := b[natHeaderLen:]
	take := func(n int) ([]byte, error) {
		if len(rest) < n {
			return nil, fmt.Errorf("nx: nat range_present %#04x needs more than %d bytes", present, len(b))
		}
		v := rest[:n]
		rest = rest[n:]
		return v, nil
	}
	fields := []struct {
		bit  uint16
		size int
		set  func([]byte)
	}{
		{rangeIPv4Min, 4, func(v []byte) { out.IPMin = netip.AddrFrom4([4]byte(v)) }},
		{rangeIPv4Max, 4, func(v []byte) { out.IPMax = netip.AddrFrom4([4]byte(v)) }},
		{rangeIPv6Min, 16, func(v []byte) { out.IPMin = netip.AddrFrom16([16]byte(v)) }},
		{rangeIPv6Max, 16, func(v []byte) { out.IPMax = netip.AddrFrom16([16]byte(v)) }},
		{rangeProtoMin, 2, func(v []byte) { out.PortMin = binary.BigEndian.Uint16(v) }},
		{rangeProtoMax, 2, func(v []byte) { out.PortMax = binary.BigEndian.Uint16(v) }},
	}
	for _, f := range fields {
		if present&f.bit == 0 {
			continue
		}
		v, err := take(f.size)
		if err != nil {
			return err
		}
		f.set(v)
	}
	if len(rest) >= 8 {
		return fmt.Errorf("nx: nat action has %d bytes beyond its ranges", len(rest))
	}
	*a = out
	return nil
}

// RawAction is an action this package does not model, kept as its exact bytes (header
// included) so that read-back can still be compared byte for byte.
type RawAction []byte

// Type implements ofp.Action.
func (a *RawAction) Type() ofp.ActionType {
	if len(*a) < 2 {
		return ofp.ActionTypeExperimenter
	}
	return ofp.ActionType(binary.BigEndian.Uint16(*a))
}

// WriteTo implements io.WriterTo.
func (a *RawAction) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(*a)
	return int64(n), err
}

// ReadFrom implements io.ReaderFrom: it reads exactly one action.
func (a *RawAction) ReadFrom(r io.Reader) (int64, error) {
	b, n, err := readAction(r)
	if err != nil {
		return n, err
	}
	*a = b
	return n, nil
}

// ErrShort reports an action list that ends inside an action.
var ErrShort = errors.New("nx: action list truncated")

// ParseActions decodes a whole OpenFlow 1.3 action list. NXAST_CT, NXAST_NAT, NXAST_LEARN
// and NXAST_RESUBMIT_TABLE become *CT, *NAT, *Learn and *Resubmit; output, group and set_field become the netrack types; anything else is kept as a
// *RawAction. Every action must be at least 8 bytes and a multiple of 8, as OpenFlow requires.
func ParseActions(b []byte) (ofp.Actions, error) {
	var out ofp.Actions
	for off := 0; off < len(b); {
		if len(b)-off < 8 {
			return nil, fmt.Errorf("%w: %d bytes left at offset %d", ErrShort, len(b)-off, off)
		}
		typ := ofp.ActionType(binary.BigEndian.Uint16(b[off:]))
		n := int(binary.BigEndian.Uint16(b[off+2:]))
		if n < 8 || n%8 != 0 {
			return nil, fmt.Errorf("nx: action %v at offset %d has bad length %d", typ, off, n)
		}
		if off+n > len(b) {
			return nil, fmt.Errorf("%w: action %v at offset %d claims %d bytes, %d left", ErrShort, typ, off, n, len(b)-off)
		}
		a, err := parseAction(typ, b[off:off+n])
		if err != nil {
			return nil, fmt.Errorf("nx: action %v at offset %d: %w", typ, off, err)
		}
		out = append(out, a)
		off += n
	}
	return out, nil
}

func parseAction(typ ofp.ActionType, b []byte) (ofp.Action, error) {
	switch typ {
	case ofp.ActionTypeExperimenter:
		if len(b) >= 10 && binary.BigEndian.Uint32(b[4:]) == VendorID {
			switch binary.BigEndian.Uint16(b[8:]) {
			case SubtypeCT:
				a := new(CT)
				return a, a.UnmarshalBinary(b)
			case SubtypeNAT:
				a := new(NAT)
				return a, a.UnmarshalBinary(b)
			case SubtypeLearn:
				a := new(Learn)
				return a, a.UnmarshalBinary(b)
			case SubtypeResubmitTable:
				a := new(Resubmit)
				return a, a.UnmarshalBinary(b)
			case SubtypeMultipath:
				a := new(Multipath)
				return a, a.UnmarshalBinary(b)
			}
		}
	case ofp.ActionTypeOutput:
		if len(b) != 16 {
			return nil, fmt.Errorf("output action is %d bytes, want 16", len(b))
		}
		return &ofp.ActionOutput{Port: ofp.PortNo(binary.BigEndian.Uint32(b[4:])), MaxLen: binary.BigEndian.Uint16(b[8:])}, nil
	case ofp.ActionTypeGroup:
		if len(b) != 8 {
			return nil, fmt.Errorf("group action is %d bytes, want 8", len(b))
		}
		return &ofp.ActionGroup{Group: ofp.Group(binary.BigEndian.Uint32(b[4:]))}, nil
	case ofp.ActionTypeSetField:
		xm, err := ParseOXM(b[4:])
		if err != nil {
			return nil, err
		}
		if len(xm) != 1 || len(xm[0].Mask) != 0 {
			return nil, fmt.Errorf("set_field must carry one unmasked field, got %d", len(xm))
		}
		return &ofp.ActionSetField{Field: xm[0]}, nil
	}
	raw := RawAction(bytes.Clone(b))
	return &raw, nil
}

// putExperimenterHeader fills the 10-byte ofp_action_experimenter + Nicira subtype header.
func putExperimenterHeader(b []byte, length, subtype uint16) {
	binary.BigEndian.PutUint16(b[0:], uint16(ofp.ActionTypeExperimenter))
	binary.BigEndian.PutUint16(b[2:], length)
	binary.BigEndian.PutUint32(b[4:], VendorID)
	binary.BigEndian.PutUint16(b[8:], subtype)
}

// checkExperimenter validates the header of one whole Nicira action of the given subtype.
func checkExperimenter(b []byte, subtype uint16, minLen int) error {
	if len(b) < minLen {
		return fmt.Errorf("%w: nicira subtype %d needs %d bytes, have %d", ErrShort, subtype, minLen, len(b))
	}
	if t := binary.BigEndian.Uint16(b); t != uint16(ofp.ActionTypeExperimenter) {
		return fmt.Errorf("nx: action type %#04x is not experimenter", t)
	}
	if n := int(binary.BigEndian.Uint16(b[2:])); n != len(b) || n%8 != 0 {
		return fmt.Errorf("nx: nicira subtype %d length field %d, have %d bytes", subtype, n, len(b))
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != VendorID {
		return fmt.Errorf("nx: experimenter %#08x is not Nicira", v)
	}
	if s := binary.BigEndian.Uint16(b[8:]); s != subtype {
		return fmt.Errorf("nx: nicira subtype %d, want %d", s, subtype)
	}
	return nil
}

// readAction reads one action (header and body) from r.
func readAction(r io.Reader) ([]byte, int64, error) {
	hdr := make([]byte, 4)
	n, err := io.ReadFull(r, hdr)
	if err != nil {
		return nil, int64(n), fmt.Errorf("nx: reading action header: %w", err)
	}
	size := int(binary.BigEndian.Uint16(hdr[2:]))
	if size < 8 {
		return nil, int64(n), fmt.Errorf("nx: action length %d below 8", size)
	}
	b := make([]byte, size)
	copy(b, hdr)
	m, err := io.ReadFull(r, b[4:])
	if err != nil {
		return nil, int64(n + m), fmt.Errorf("nx: reading %d-byte action: %w", size, err)
	}
	return b, int64(n + m), nil
}
