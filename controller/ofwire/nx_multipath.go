package ofwire

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/netrack/openflow/ofp"
)

// SubtypeMultipath is NXAST_MULTIPATH: hash chosen fields of the packet into a link number.
const SubtypeMultipath uint16 = 10

// multipathLen is sizeof(struct nx_action_multipath).
const multipathLen = 32

// HashFields are the NX_HASH_FIELDS_* values: which packet fields a hash covers.
type HashFields uint16

// HashSymmetricL3L4UDP hashes the addresses and, for TCP, SCTP and UDP, the ports, the same
// in both directions (Open vSwitch 2.5.0 and later). It is the one Nicira hash that takes a
// UDP flow's ports: the select group's own hash over OpenFlow 1.3 leaves them out.
const HashSymmetricL3L4UDP HashFields = 3

// hashFieldsMax is the largest NX_HASH_FIELDS_* Open vSwitch knows (SYMMETRIC_L3).
const hashFieldsMax HashFields = 6

// MultipathAlgorithm is an NX_MP_ALG_* value: how the hash becomes a link number.
type MultipathAlgorithm uint16

// MultipathModuloN takes the hash modulo the number of links.
const MultipathModuloN MultipathAlgorithm = 0

// multipathAlgorithmMax is the largest NX_MP_ALG_* (ITER_HASH).
const multipathAlgorithmMax MultipathAlgorithm = 3

// Multipath is NXAST_MULTIPATH, `multipath(fields, basis, algorithm, n_links, arg, dst)` in
// ovs-ofctl syntax: the link number, 0 to MaxLink, is written into bits Ofs..Ofs+NBits-1 of
// the NXM field Dst. controller/dataplane uses it to hash a new UDP flow by its 5-tuple into
// a slot (docs/dataplane.md, "UDP per flow").
type Multipath struct {
	Fields    HashFields
	Basis     uint16
	Algorithm MultipathAlgorithm
	// MaxLink is the number of links minus one (255 for a 256-slot table).
	MaxLink uint16
	Arg     uint32
	// Ofs and NBits place the result in Dst, an NXM header such as NXMReg(4); NBits must
	// hold MaxLink (Open vSwitch refuses fewer bits than the links need).
	Ofs   uint16
	NBits uint16
	Dst   uint32
}

// Type implements ofp.Action.
func (a *Multipath) Type() ofp.ActionType { return ofp.ActionTypeExperimenter }

// MarshalBinary returns the wire form of the action.
func (a *Multipath) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }

// AppendBinary appends the wire form of the action to dst (encoding.BinaryAppender). It
// refuses what Open vSwitch would refuse at the flow mod (a destination too narrow for the
// links, fields or an algorithm it does not know), so the error names the action rather than
// coming back as an OFPBAC_BAD_ARGUMENT for the whole message.
func (a *Multipath) AppendBinary(dst []byte) ([]byte, error) {
	if err := a.check(); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, make([]byte, multipathLen)...)
	b := dst[start:]
	putExperimenterHeader(b, multipathLen, SubtypeMultipath)
	binary.BigEndian.PutUint16(b[10:], uint16(a.Fields))
	binary.BigEndian.PutUint16(b[12:], a.Basis)
	binary.BigEndian.PutUint16(b[16:], uint16(a.Algorithm))
	binary.BigEndian.PutUint16(b[18:], a.MaxLink)
	binary.BigEndian.PutUint32(b[20:], a.Arg)
	binary.BigEndian.PutUint16(b[26:], a.Ofs<<6|(a.NBits-1))
	binary.BigEndian.PutUint32(b[28:], a.Dst)
	return dst, nil
}

func (a *Multipath) check() error {
	switch {
	case a.Fields > hashFieldsMax:
		return fmt.Errorf("nx: multipath hash fields %d unknown (at most %d)", a.Fields, hashFieldsMax)
	case a.Algorithm > multipathAlgorithmMax:
		return fmt.Errorf("nx: multipath algorithm %d unknown (at most %d)", a.Algorithm, multipathAlgorithmMax)
	case a.NBits < 1 || a.NBits > 64 || a.Ofs > 1023:
		return fmt.Errorf("nx: multipath destination of %d bits at offset %d out of range (1 to 64 bits, offset at most 1023)", a.NBits, a.Ofs)
	case a.NBits < 16 && uint32(a.MaxLink) >= 1<<a.NBits:
		return fmt.Errorf("nx: multipath needs more than %d bits for %d links", a.NBits, int(a.MaxLink)+1)
	}
	return nil
}

// WriteTo implements io.WriterTo (and so ofp.Action).
func (a *Multipath) WriteTo(w io.Writer) (int64, error) { return writeBinary(w, a.MarshalBinary) }

// ReadFrom implements io.ReaderFrom: it reads exactly one NXAST_MULTIPATH action.
func (a *Multipath) ReadFrom(r io.Reader) (int64, error) {
	b, n, err := readAction(r)
	if err != nil {
		return n, err
	}
	return n, a.UnmarshalBinary(b)
}

// UnmarshalBinary decodes one whole NXAST_MULTIPATH action, refusing what AppendBinary
// would not write (so a decoded action always re-encodes to the same bytes).
func (a *Multipath) UnmarshalBinary(b []byte) error {
	if err := checkExperimenter(b, SubtypeMultipath, multipathLen); err != nil {
		return err
	}
	if len(b) != multipathLen {
		return fmt.Errorf("nx: multipath action is %d bytes, want %d", len(b), multipathLen)
	}
	if !allZero(b[14:16]) || !allZero(b[24:26]) {
		return fmt.Errorf("nx: multipath pad %x %x is not zero", b[14:16], b[24:26])
	}
	ofsNBits := binary.BigEndian.Uint16(b[26:])
	m := Multipath{
		Fields:    HashFields(binary.BigEndian.Uint16(b[10:])),
		Basis:     binary.BigEndian.Uint16(b[12:]),
		Algorithm: MultipathAlgorithm(binary.BigEndian.Uint16(b[16:])),
		MaxLink:   binary.BigEndian.Uint16(b[18:]),
		Arg:       binary.BigEndian.Uint32(b[20:]),
		Ofs:       ofsNBits >> 6,
		NBits:     ofsNBits&0x3f + 1,
		Dst:       binary.BigEndian.Uint32(b[28:]),
	}
	if err := m.check(); err != nil {
		return err
	}
	*a = m
	return nil
}
