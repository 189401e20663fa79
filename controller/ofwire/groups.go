package ofwire

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/netrack/openflow/ofp"
)

// Group entries on the wire: OFPT_GROUP_MOD and the OFPMP_GROUP_DESC reply.

const (
	// GroupModFixedLen is ofp_group_mod after the OpenFlow header, before its buckets, and
	// BucketFixedLen ofp_bucket before its actions: a GROUP_MOD is HeaderLen +
	// GroupModFixedLen + Σ (BucketFixedLen + actions) bytes, at most MaxMessageLen.
	GroupModFixedLen  = 8
	BucketFixedLen    = 16
	groupDescFixedLen = 8 // ofp_group_desc before buckets
)

// Bucket is one group bucket: its weight and raw action list.
type Bucket struct {
	Weight  uint16
	Actions string
}

// Group is one group entry. Buckets keep their order (it is part of the group's identity
// on the switch: Open vSwitch maps hash slots to buckets in order).
type Group struct {
	ID      uint32
	Type    ofp.GroupType
	Buckets []Bucket
}

// Equal reports whether two groups are the same on the switch.
func (g Group) Equal(o Group) bool {
	return g.ID == o.ID && g.Type == o.Type && slices.Equal(g.Buckets, o.Buckets)
}

// String renders the group for logs and test failures.
func (g Group) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "group=%d type=%d", g.ID, g.Type)
	for _, k := range g.Buckets {
		fmt.Fprintf(&b, " bucket(weight=%d actions=%x)", k.Weight, k.Actions)
	}
	return b.String()
}

// GroupMod is the body of an OFPT_GROUP_MOD.
type GroupMod struct {
	Command ofp.GroupCommand
	Group   Group
}

// MarshalBinary returns the ofp_group_mod body.
func (m *GroupMod) MarshalBinary() ([]byte, error) {
	b := binary.BigEndian.AppendUint16(nil, uint16(m.Command))
	b = append(b, byte(m.Group.Type), 0)
	b = binary.BigEndian.AppendUint32(b, m.Group.ID)
	if m.Command == ofp.GroupDelete {
		return b, nil
	}
	b, err := appendBuckets(b, m.Group.Buckets)
	if err != nil {
		return nil, fmt.Errorf("ofwire: group %d: %w", m.Group.ID, err)
	}
	if len(b)+HeaderLen > MaxMessageLen {
		return nil, fmt.Errorf("ofwire: group mod for group %d is %d bytes, too long", m.Group.ID, len(b))
	}
	return b, nil
}

// WriteTo implements io.WriterTo, for a message body.
func (m *GroupMod) WriteTo(w io.Writer) (int64, error) { return writeBinary(w, m.MarshalBinary) }

// DecodeGroupMod parses an ofp_group_mod body (after the OpenFlow header): what a fake
// switch reads. Every bucket's actions must parse.
func DecodeGroupMod(b []byte) (GroupMod, error) {
	if len(b) < GroupModFixedLen {
		return GroupMod{}, fmt.Errorf("%w: group mod is %d bytes, need %d", ErrMalformed, len(b), GroupModFixedLen)
	}
	m := GroupMod{
		Command: ofp.GroupCommand(binary.BigEndian.Uint16(b)),
		Group:   Group{Type: ofp.GroupType(b[2]), ID: binary.BigEndian.Uint32(b[4:])},
	}
	buckets, err := decodeBuckets(b[GroupModFixedLen:])
	if err != nil {
		return GroupMod{}, fmt.Errorf("group mod for group %d: %w", m.Group.ID, err)
	}
	m.Group.Buckets = buckets
	return m, nil
}

func appendBuckets(b []byte, buckets []Bucket) ([]byte, error) {
	for i, k := range buckets {
		n := BucketFixedLen + len(k.Actions)
		if n > 0xffff {
			return nil, fmt.Errorf("bucket %d is %d bytes, too long", i, n)
		}
		b = binary.BigEndian.AppendUint16(b, uint16(n))
		b = binary.BigEndian.AppendUint16(b, k.Weight)
		b = binary.BigEndian.AppendUint32(b, portAny)  // watch_port: unused by select groups
		b = binary.BigEndian.AppendUint32(b, groupAny) // watch_group
		b = append(b, 0, 0, 0, 0)
		b = append(b, k.Actions...)
	}
	return b, nil
}

func decodeBuckets(b []byte) ([]Bucket, error) {
	var out []Bucket
	for off := 0; off < len(b); {
		if len(b)-off < BucketFixedLen {
			return nil, fmt.Errorf("%w: bucket at offset %d: %d bytes left, need %d", ErrMalformed, off, len(b)-off, BucketFixedLen)
		}
		n := int(binary.BigEndian.Uint16(b[off:]))
		if n < BucketFixedLen || n%8 != 0 || off+n > len(b) {
			return nil, fmt.Errorf("%w: bucket at offset %d has length %d, %d bytes left", ErrMalformed, off, n, len(b)-off)
		}
		actions := b[off+BucketFixedLen : off+n]
		if _, err := ParseActions(actions); err != nil {
			return nil, fmt.Errorf("%w: bucket %d actions: %w", ErrMalformed, len(out), err)
		}
		out = append(out, Bucket{Weight: binary.BigEndian.Uint16(b[off+2:]), Actions: string(actions)})
		off += n
	}
	return out, nil
}

// DecodeGroupDesc decodes an OFPMP_GROUP_DESC reply: the concatenated bodies of all reply
// parts, without their ofp_multipart_reply headers, in reply order. Every action list must
// parse (ParseActions) for the reply to be accepted.
func DecodeGroupDesc(body []byte) ([]Group, error) {
	var out []Group
	for off := 0; off < len(body); {
		if len(body)-off < groupDescFixedLen {
			return nil, fmt.Errorf("%w: group desc entry at offset %d: %d bytes left, need %d", ErrMalformed, off, len(body)-off, groupDescFixedLen)
		}
		n := int(binary.BigEndian.Uint16(body[off:]))
		if n < groupDescFixedLen || off+n > len(body) {
			return nil, fmt.Errorf("%w: group desc entry at offset %d has length %d, %d bytes left", ErrMalformed, off, n, len(body)-off)
		}
		e := body[off : off+n]
		g := Group{Type: ofp.GroupType(e[2]), ID: binary.BigEndian.Uint32(e[4:])}
		buckets, err := decodeBuckets(e[groupDescFixedLen:])
		if err != nil {
			return nil, fmt.Errorf("group %d: %w", g.ID, err)
		}
		g.Buckets = buckets
		out = append(out, g)
		off += n
	}
	return out, nil
}

// EncodeGroupDesc encodes groups as an OFPMP_GROUP_DESC reply body, as a switch would; fake
// switches use it so DecodeGroupDesc is tested against an independent producer.
func EncodeGroupDesc(groups []Group) ([]byte, error) {
	var out []byte
	for _, g := range groups {
		bk, err := appendBuckets(nil, g.Buckets)
		if err != nil {
			return nil, fmt.Errorf("group %d: %w", g.ID, err)
		}
		n := groupDescFixedLen + len(bk)
		if n > 0xffff {
			return nil, fmt.Errorf("group %d desc is %d bytes, too long", g.ID, n)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(n))
		out = append(out, byte(g.Type), 0)
		out = binary.BigEndian.AppendUint32(out, g.ID)
		out = append(out, bk...)
	}
	return out, nil
}
