package ofwire

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/netrack/openflow/ofp"
)

// NXM class 1 (NXM_NX) fields used by the conntrack data plane. netrack's ofp.XM can carry
// them (Class XMClassNicira1, Type the field number), it only lacks the names and semantics.
const (
	FieldCTState uint8 = 105 // NXM_NX_CT_STATE, 32 bits, maskable
	FieldCTZone  uint8 = 106 // NXM_NX_CT_ZONE, 16 bits
)

// CTState is the bit set matched by NXM_NX_CT_STATE (`ct_state=+new+trk`).
type CTState uint32

// Connection tracking state bits (CS_* in Open vSwitch).
const (
	CTNew  CTState = 1 << 0
	CTEst  CTState = 1 << 1
	CTRel  CTState = 1 << 2
	CTRpl  CTState = 1 << 3
	CTInv  CTState = 1 << 4
	CTTrk  CTState = 1 << 5
	CTSNAT CTState = 1 << 6
	CTDNAT CTState = 1 << 7
)

var ctStateNames = []struct {
	bit  CTState
	name string
}{{CTNew, "new"}, {CTEst, "est"}, {CTRel, "rel"}, {CTRpl, "rpl"}, {CTInv, "inv"}, {CTTrk, "trk"}, {CTSNAT, "snat"}, {CTDNAT, "dnat"}}

// CTStateMatch matches packets whose tracked state has every bit of set and none of clear,
// e.g. CTStateMatch(CTNew|CTTrk, 0) is ovs-ofctl's `ct_state=+new+trk`.
func CTStateMatch(set, clear CTState) ofp.XM {
	mask := set | clear
	v := make([]byte, 4)
	m := make([]byte, 4)
	binary.BigEndian.PutUint32(v, uint32(set))
	binary.BigEndian.PutUint32(m, uint32(mask))
	return ofp.XM{Class: ofp.XMClassNicira1, Type: ofp.XMType(FieldCTState), Value: v, Mask: m}
}

// CTZoneMatch matches the conntrack zone a packet was last tracked in.
func CTZoneMatch(zone uint16) ofp.XM {
	return ofp.XM{Class: ofp.XMClassNicira1, Type: ofp.XMType(FieldCTZone), Value: binary.BigEndian.AppendUint16(nil, zone)}
}

// CTStateOf returns the set and clear bits of an NXM_NX_CT_STATE field, the inverse of
// CTStateMatch.
func CTStateOf(xm ofp.XM) (set, clear CTState, err error) {
	if xm.Class != ofp.XMClassNicira1 || uint8(xm.Type) != FieldCTState {
		return 0, 0, fmt.Errorf("nx: field class %#04x type %d is not ct_state", uint16(xm.Class), xm.Type)
	}
	if len(xm.Value) != 4 || (len(xm.Mask) != 0 && len(xm.Mask) != 4) {
		return 0, 0, fmt.Errorf("nx: ct_state value %d bytes, mask %d bytes, want 4", len(xm.Value), len(xm.Mask))
	}
	v := CTState(binary.BigEndian.Uint32(xm.Value))
	mask := CTState(0xffffffff)
	if len(xm.Mask) == 4 {
		mask = CTState(binary.BigEndian.Uint32(xm.Mask))
	}
	return v & mask, mask &^ v, nil
}

// CTStateString renders set/clear bits the way ovs-ofctl prints them: `+new+trk-est`.
func CTStateString(set, clear CTState) string {
	var b strings.Builder
	for _, n := range ctStateNames {
		if set&n.bit != 0 {
			b.WriteString("+" + n.name)
		}
	}
	for _, n := range ctStateNames {
		if clear&n.bit != 0 {
			b.WriteString("-" + n.name)
		}
	}
	return b.String()
}

// ParseOXM decodes a run of OXM/NXM TLVs (the oxm_fields of an ofp_match, or the field of a
// set_field action, whose trailing zero padding is ignored). Unlike netrack's decoder it
// rejects a TLV that runs past the end instead of reading garbage.
func ParseOXM(b []byte) ([]ofp.XM, error) {
	var out []ofp.XM
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			if allZero(b[off:]) {
				break
			}
			return nil, fmt.Errorf("nx: %d stray bytes at offset %d of match", len(b)-off, off)
		}
		hdr := binary.BigEndian.Uint32(b[off:])
		if hdr == 0 && allZero(b[off:]) {
			break // padding
		}
		class := ofp.XMClass(hdr >> 16)
		field := uint8(hdr>>9) & 0x7f
		hasMask := hdr&0x100 != 0
		n := int(hdr & 0xff)
		if class == ofp.XMClassExperimenter {
			return nil, fmt.Errorf("nx: experimenter OXM class at offset %d is not supported", off)
		}
		if n == 0 || (hasMask && n%2 != 0) {
			return nil, fmt.Errorf("nx: OXM %#04x:%d at offset %d has bad length %d", uint16(class), field, off, n)
		}
		if off+4+n > len(b) {
			return nil, fmt.Errorf("%w: OXM %#04x:%d at offset %d claims %d bytes, %d left", ErrShort, uint16(class), field, off, n, len(b)-off-4)
		}
		body := b[off+4 : off+4+n]
		xm := ofp.XM{Class: class, Type: ofp.XMType(field)}
		if hasMask {
			xm.Value = append(ofp.XMValue(nil), body[:n/2]...)
			xm.Mask = append(ofp.XMValue(nil), body[n/2:]...)
		} else {
			xm.Value = append(ofp.XMValue(nil), body...)
		}
		out = append(out, xm)
		off += 4 + n
	}
	return out, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
