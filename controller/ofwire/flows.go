package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"flowweight/controller/nx"

	"github.com/netrack/openflow/ofp"
)

// ErrMalformed wraps every decoding error of this package.
var ErrMalformed = errors.New("dataplane: malformed")

const (
	flowModFixedLen   = 40 // ofp_flow_mod after the OpenFlow header, before ofp_match
	flowStatsFixedLen = 48 // ofp_flow_stats before ofp_match
	groupModFixedLen  = 8  // ofp_group_mod after the OpenFlow header, before buckets
	groupDescFixedLen = 8  // ofp_group_desc before buckets
	bucketFixedLen    = 16 // ofp_bucket before actions
	matchHeaderLen    = 4  // ofp_match type + length
	matchTypeOXM      = 1  // OFPMT_OXM
	noBuffer          = 0xffffffff
	portAny           = 0xffffffff
	groupAny          = 0xffffffff
	tableAll          = 0xff
)

// FlowMod is the body of an OFPT_FLOW_MOD built from a planned Flow. It encodes the
// flow's bytes as they are, so what the fake switch and the real one receive is exactly the
// State that Desired computed.
type FlowMod struct {
	Command    ofp.FlowModCommand
	Flow       Flow
	CookieMask uint64 // for deletes: all ones, so a strict delete removes only our own entry
}

// appendMatch appends an ofp_match (OXM type) holding the TLVs in m, padded to 8 bytes.
func appendMatch(b []byte, m string) []byte {
	n := matchHeaderLen + len(m)
	b = binary.BigEndian.AppendUint16(b, matchTypeOXM)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = append(b, m...)
	return append(b, make([]byte, (8-n%8)%8)...)
}

// MarshalBinary returns the ofp_flow_mod body.
func (m *FlowMod) MarshalBinary() ([]byte, error) {
	f := m.Flow
	b := make([]byte, 0, flowModFixedLen+8+len(f.Match)+len(f.Instructions))
	b = binary.BigEndian.AppendUint64(b, f.Cookie)
	b = binary.BigEndian.AppendUint64(b, m.CookieMask)
	b = append(b, f.Table, byte(m.Command))
	b = binary.BigEndian.AppendUint16(b, f.IdleTimeout)
	b = binary.BigEndian.AppendUint16(b, f.HardTimeout)
	b = binary.BigEndian.AppendUint16(b, f.Priority)
	b = binary.BigEndian.AppendUint32(b, noBuffer)
	b = binary.BigEndian.AppendUint32(b, portAny)
	b = binary.BigEndian.AppendUint32(b, groupAny)
	b = append(b, 0, 0, 0, 0) // flags, pad
	b = appendMatch(b, f.Match)
	if m.Command != ofp.FlowDelete && m.Command != ofp.FlowDeleteStrict {
		b = append(b, f.Instructions...)
	}
	if len(b)+8 > 0xffff {
		return nil, fmt.Errorf("dataplane: flow mod for %v is %d bytes, too long", f, len(b))
	}
	return b, nil
}

// WriteTo implements io.WriterTo for ofswitch.Message.Body.
func (m *FlowMod) WriteTo(w io.Writer) (int64, error) { return writeBinary(w, m.MarshalBinary) }

// GroupMod is the body of an OFPT_GROUP_MOD built from a planned Group.
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
		return nil, fmt.Errorf("dataplane: group %d: %w", m.Group.ID, err)
	}
	if len(b)+8 > 0xffff {
		return nil, fmt.Errorf("dataplane: group mod for group %d is %d bytes, too long", m.Group.ID, len(b))
	}
	return b, nil
}

// WriteTo implements io.WriterTo for ofswitch.Message.Body.
func (m *GroupMod) WriteTo(w io.Writer) (int64, error) { return writeBinary(w, m.MarshalBinary) }

func appendBuckets(b []byte, buckets []Bucket) ([]byte, error) {
	for i, k := range buckets {
		n := bucketFixedLen + len(k.Actions)
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

// flowStatsRequest is the body of an OFPMP_FLOW request.
type flowStatsRequest struct{ cookie, mask uint64 }

func (r flowStatsRequest) WriteTo(w io.Writer) (int64, error) {
	b := []byte{tableAll, 0, 0, 0}
	b = binary.BigEndian.AppendUint32(b, portAny)
	b = binary.BigEndian.AppendUint32(b, groupAny)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, r.cookie)
	b = binary.BigEndian.AppendUint64(b, r.mask)
	b = appendMatch(b, "")
	n, err := w.Write(b)
	return int64(n), err
}

// FlowStatsRequest returns the body of an OFPMP_FLOW multipart request for every table and
// every flow whose cookie matches cookie under mask, for ofswitch's
// Multipart(ctx, ofp.MultipartTypeFlow, body). The OFPMP_GROUP_DESC request has no body
// (pass nil).
func FlowStatsRequest(cookie, mask uint64) io.WriterTo { return flowStatsRequest{cookie, mask} }

// OwnFlowsRequest asks for exactly the flows this package plans (cookie magic under
// CookieMask), so read-back never sees, and Plan never deletes, anyone else's flows.
func OwnFlowsRequest() io.WriterTo { return FlowStatsRequest(CookieMagic, CookieMask) }

func writeBinary(w io.Writer, f func() ([]byte, error)) (int64, error) {
	b, err := f()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

// DecodeGroupDesc decodes an OFPMP_GROUP_DESC reply: the concatenated bodies of all reply
// parts, without their ofp_multipart_reply headers (what ofswitch's Multipart returns). The
// result is in canonical order. netrack cannot decode experimenter actions, so this parses the
// bytes itself; every action list must parse (nx.ParseActions) for the reply to be accepted.
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
	return State{Groups: out}.Canonical().Groups, nil
}

func decodeBuckets(b []byte) ([]Bucket, error) {
	var out []Bucket
	for off := 0; off < len(b); {
		if len(b)-off < bucketFixedLen {
			return nil, fmt.Errorf("%w: bucket at offset %d: %d bytes left, need %d", ErrMalformed, off, len(b)-off, bucketFixedLen)
		}
		n := int(binary.BigEndian.Uint16(b[off:]))
		if n < bucketFixedLen || n%8 != 0 || off+n > len(b) {
			return nil, fmt.Errorf("%w: bucket at offset %d has length %d, %d bytes left", ErrMalformed, off, n, len(b)-off)
		}
		actions := b[off+bucketFixedLen : off+n]
		if _, err := nx.ParseActions(actions); err != nil {
			return nil, fmt.Errorf("%w: bucket %d actions: %w", ErrMalformed, len(out), err)
		}
		out = append(out, Bucket{Weight: binary.BigEndian.Uint16(b[off+2:]), Actions: string(actions)})
		off += n
	}
	return out, nil
}

// DecodeFlowStats decodes an OFPMP_FLOW reply: the concatenated bodies of all reply parts,
// without their ofp_multipart_reply headers. Matches are canonicalised (TLVs sorted), so the
// flows compare equal to Desired's whatever order the switch emits fields in. Counters and
// durations are not state we plan; DecodeFlowCounters returns them.
func DecodeFlowStats(body []byte) ([]Flow, error) {
	var out []Flow
	err := scanFlowStats(body, func(f Flow, _ FlowCounter) { out = append(out, f) })
	if err != nil {
		return nil, err
	}
	return State{Flows: out}.Canonical().Flows, nil
}

// FlowCounter is the traffic a flow has matched. The per-backend flows (KindForward in
// conntrack mode, KindReturn in both) count each backend's packets; select-group bucket
// counters read zero on the userspace datapath (docs/design.md), so these are the ones to use.
type FlowCounter struct {
	Cookie      uint64
	Table       uint8
	Packets     uint64
	Bytes       uint64
	DurationSec uint32 // how long the flow has existed; a reset means it was replaced
}

// DecodeFlowCounters decodes the same OFPMP_FLOW reply as DecodeFlowStats into counters,
// in reply order.
func DecodeFlowCounters(body []byte) ([]FlowCounter, error) {
	var out []FlowCounter
	err := scanFlowStats(body, func(_ Flow, c FlowCounter) { out = append(out, c) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

func scanFlowStats(body []byte, each func(Flow, FlowCounter)) error {
	for off := 0; off < len(body); {
		if len(body)-off < flowStatsFixedLen+matchHeaderLen {
			return fmt.Errorf("%w: flow stats entry at offset %d: %d bytes left", ErrMalformed, off, len(body)-off)
		}
		n := int(binary.BigEndian.Uint16(body[off:]))
		if n < flowStatsFixedLen+matchHeaderLen || off+n > len(body) {
			return fmt.Errorf("%w: flow stats entry at offset %d has length %d, %d bytes left", ErrMalformed, off, n, len(body)-off)
		}
		e := body[off : off+n]
		f := Flow{
			Table:       e[2],
			Priority:    binary.BigEndian.Uint16(e[12:]),
			IdleTimeout: binary.BigEndian.Uint16(e[14:]),
			HardTimeout: binary.BigEndian.Uint16(e[16:]),
			Cookie:      binary.BigEndian.Uint64(e[24:]),
		}
		c := FlowCounter{
			Cookie:      f.Cookie,
			Table:       f.Table,
			DurationSec: binary.BigEndian.Uint32(e[4:]),
			Packets:     binary.BigEndian.Uint64(e[32:]),
			Bytes:       binary.BigEndian.Uint64(e[40:]),
		}
		m, instr, err := splitMatch(e[flowStatsFixedLen:])
		if err != nil {
			return fmt.Errorf("flow stats entry at offset %d: %w", off, err)
		}
		f.Match = m
		if err := checkInstructions(instr); err != nil {
			return fmt.Errorf("flow stats entry at offset %d (%s): %w", off, describeCookie(f.Cookie), err)
		}
		f.Instructions = string(instr)
		each(f, c)
		off += n
	}
	return nil
}

// splitMatch reads an ofp_match (OXM type) at the start of b and returns its canonical TLVs
// and the bytes after its padding.
func splitMatch(b []byte) (string, []byte, error) {
	if len(b) < matchHeaderLen {
		return "", nil, fmt.Errorf("%w: match header: %d bytes", ErrMalformed, len(b))
	}
	if t := binary.BigEndian.Uint16(b); t != matchTypeOXM {
		return "", nil, fmt.Errorf("%w: match type %d, want OXM (1)", ErrMalformed, t)
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	padded := (n + 7) / 8 * 8
	if n < matchHeaderLen || padded > len(b) {
		return "", nil, fmt.Errorf("%w: match length %d, %d bytes available", ErrMalformed, n, len(b))
	}
	m, err := canonicalMatch(b[matchHeaderLen:n])
	if err != nil {
		return "", nil, fmt.Errorf("%w: match: %w", ErrMalformed, err)
	}
	return m, b[padded:], nil
}

// Instruction types we read (OFPIT_*).
const (
	instrGotoTable    = 1
	instrWriteActions = 3
	instrApplyActions = 4
	instrClearActions = 5
)

// instruction is one decoded ofp_instruction: its type, goto table, and actions.
type instruction struct {
	typ     uint16
	table   uint8
	actions ofp.Actions
}

// parseInstructions decodes an instruction list; unknown instruction types are an error, as
// we never plan them and a switch would only return them if someone else wrote the flow.
func parseInstructions(b []byte) ([]instruction, error) {
	var out []instruction
	for off := 0; off < len(b); {
		if len(b)-off < 8 {
			return nil, fmt.Errorf("%w: instruction at offset %d: %d bytes left", ErrMalformed, off, len(b)-off)
		}
		typ := binary.BigEndian.Uint16(b[off:])
		n := int(binary.BigEndian.Uint16(b[off+2:]))
		if n < 8 || n%8 != 0 || off+n > len(b) {
			return nil, fmt.Errorf("%w: instruction type %d at offset %d has length %d, %d bytes left", ErrMalformed, typ, off, n, len(b)-off)
		}
		in := instruction{typ: typ}
		switch typ {
		case instrGotoTable:
			if n != 8 {
				return nil, fmt.Errorf("%w: goto_table instruction is %d bytes", ErrMalformed, n)
			}
			in.table = b[off+4]
		case instrApplyActions, instrWriteActions:
			a, err := nx.ParseActions(b[off+8 : off+n])
			if err != nil {
				return nil, fmt.Errorf("%w: instruction type %d: %w", ErrMalformed, typ, err)
			}
			in.actions = a
		case instrClearActions:
		default:
			return nil, fmt.Errorf("%w: unsupported instruction type %d at offset %d", ErrMalformed, typ, off)
		}
		out = append(out, in)
		off += n
	}
	return out, nil
}

func checkInstructions(b []byte) error {
	_, err := parseInstructions(b)
	return err
}

// decodeFlowMod parses an ofp_flow_mod body (after the OpenFlow header).
func decodeFlowMod(b []byte) (FlowMod, error) {
	if len(b) < flowModFixedLen {
		return FlowMod{}, fmt.Errorf("%w: flow mod is %d bytes, need %d", ErrMalformed, len(b), flowModFixedLen)
	}
	m := FlowMod{
		CookieMask: binary.BigEndian.Uint64(b[8:]),
		Command:    ofp.FlowModCommand(b[17]),
		Flow: Flow{
			Cookie:      binary.BigEndian.Uint64(b[0:]),
			Table:       b[16],
			IdleTimeout: binary.BigEndian.Uint16(b[18:]),
			HardTimeout: binary.BigEndian.Uint16(b[20:]),
			Priority:    binary.BigEndian.Uint16(b[22:]),
		},
	}
	match, instr, err := splitMatch(b[flowModFixedLen:])
	if err != nil {
		return FlowMod{}, fmt.Errorf("flow mod: %w", err)
	}
	if err := checkInstructions(instr); err != nil {
		return FlowMod{}, fmt.Errorf("flow mod: %w", err)
	}
	m.Flow.Match, m.Flow.Instructions = match, string(instr)
	return m, nil
}

// decodeGroupMod parses an ofp_group_mod body (after the OpenFlow header).
func decodeGroupMod(b []byte) (GroupMod, error) {
	if len(b) < groupModFixedLen {
		return GroupMod{}, fmt.Errorf("%w: group mod is %d bytes, need %d", ErrMalformed, len(b), groupModFixedLen)
	}
	m := GroupMod{
		Command: ofp.GroupCommand(binary.BigEndian.Uint16(b)),
		Group:   Group{Type: ofp.GroupType(b[2]), ID: binary.BigEndian.Uint32(b[4:])},
	}
	buckets, err := decodeBuckets(b[groupModFixedLen:])
	if err != nil {
		return GroupMod{}, fmt.Errorf("group mod for group %d: %w", m.Group.ID, err)
	}
	m.Group.Buckets = buckets
	return m, nil
}

// EncodeGroupDesc encodes groups as an OFPMP_GROUP_DESC reply body, as a switch would; the
// fake switch uses it so DecodeGroupDesc is tested against an independent producer.
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

// EncodeFlowStats encodes flows as an OFPMP_FLOW reply body with zero counters.
func EncodeFlowStats(flows []Flow) ([]byte, error) {
	var out []byte
	for _, f := range flows {
		e := make([]byte, flowStatsFixedLen, flowStatsFixedLen+8+len(f.Match)+len(f.Instructions))
		e[2] = f.Table
		binary.BigEndian.PutUint16(e[12:], f.Priority)
		binary.BigEndian.PutUint16(e[14:], f.IdleTimeout)
		binary.BigEndian.PutUint16(e[16:], f.HardTimeout)
		binary.BigEndian.PutUint64(e[24:], f.Cookie)
		e = appendMatch(e, f.Match)
		e = append(e, f.Instructions...)
		if len(e) > 0xffff {
			return nil, fmt.Errorf("flow %v stats entry is %d bytes, too long", f, len(e))
		}
		binary.BigEndian.PutUint16(e, uint16(len(e)))
		out = append(out, e...)
	}
	return out, nil
}
