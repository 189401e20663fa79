package ofwire

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/netrack/openflow/ofp"
)

// Flow entries on the wire: OFPT_FLOW_MOD, the OFPMP_FLOW request, and the OFPMP_FLOW reply
// read back from a switch. netrack encodes every value through reflection and cannot decode
// experimenter actions, so these are encoded and decoded here.

const (
	flowModFixedLen   = 40 // ofp_flow_mod after the OpenFlow header, before ofp_match
	flowStatsFixedLen = 48 // ofp_flow_stats before ofp_match
	noBuffer          = 0xffffffff
	portAny           = 0xffffffff
	groupAny          = 0xffffffff
	tableAll          = 0xff
)

// Flow is one flow entry in wire form. It is comparable with ==: Match and Instructions hold
// raw bytes in strings.
//
// A flow's identity on the switch is (Table, Priority, Match); Cookie, IdleTimeout,
// HardTimeout and Instructions are what an OFPFC_ADD with the same identity overwrites.
type Flow struct {
	Table       uint8
	Priority    uint16
	Cookie      uint64
	IdleTimeout uint16 // seconds
	HardTimeout uint16 // seconds
	// Match is the canonical run of OXM/NXM TLVs (CanonicalMatch): sorted by their bytes,
	// without the ofp_match header and padding, so a switch's read-back compares equal
	// whatever order it emits.
	Match string
	// Instructions is the raw ofp_instruction list.
	Instructions string
}

// String renders the flow for logs and test failures (fields as OXM hex; ovs-ofctl prints
// the real meaning).
func (f Flow) String() string {
	return fmt.Sprintf("table=%d priority=%d cookie=%#x idle=%d hard=%d match=%x instructions=%x",
		f.Table, f.Priority, f.Cookie, f.IdleTimeout, f.HardTimeout, f.Match, f.Instructions)
}

// FlowMod is the body of an OFPT_FLOW_MOD. It encodes the flow's bytes as they are, so
// what a fake switch and a real one receive is exactly the flow that was planned.
type FlowMod struct {
	Command    ofp.FlowModCommand
	Flow       Flow
	CookieMask uint64 // for deletes: all ones, so a strict delete removes only that entry
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
	b = AppendMatch(b, f.Match)
	if m.Command != ofp.FlowDelete && m.Command != ofp.FlowDeleteStrict {
		b = append(b, f.Instructions...)
	}
	if len(b)+HeaderLen > MaxMessageLen {
		return nil, fmt.Errorf("ofwire: flow mod for %v is %d bytes, too long", f, len(b))
	}
	return b, nil
}

// WriteTo implements io.WriterTo, for a message body.
func (m *FlowMod) WriteTo(w io.Writer) (int64, error) { return writeBinary(w, m.MarshalBinary) }

// DecodeFlowMod parses an ofp_flow_mod body (after the OpenFlow header): what a fake switch
// reads. The match comes back canonical and the instructions must parse.
func DecodeFlowMod(b []byte) (FlowMod, error) {
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
	if _, err := ParseInstructions(instr); err != nil {
		return FlowMod{}, fmt.Errorf("flow mod: %w", err)
	}
	m.Flow.Match, m.Flow.Instructions = match, string(instr)
	return m, nil
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
	b = AppendMatch(b, "")
	n, err := w.Write(b)
	return int64(n), err
}

// FlowStatsRequest returns the body of an OFPMP_FLOW multipart request for every table and
// every flow whose cookie matches cookie under mask, for a session's
// Multipart(ctx, ofp.MultipartTypeFlow, body). The OFPMP_GROUP_DESC request has no body
// (pass nil).
func FlowStatsRequest(cookie, mask uint64) io.WriterTo { return flowStatsRequest{cookie, mask} }

// FlowCounter is the traffic a flow has matched, from an OFPMP_FLOW reply.
type FlowCounter struct {
	Cookie       uint64
	Table        uint8
	Packets      uint64
	Bytes        uint64
	DurationSec  uint32 // how long the flow has existed; a reset means it was replaced
	DurationNsec uint32 // and the nanoseconds beyond DurationSec
}

// Age is how long the flow has existed, DurationSec and DurationNsec together.
func (c FlowCounter) Age() time.Duration {
	return time.Duration(c.DurationSec)*time.Second + time.Duration(c.DurationNsec)
}

// DecodeFlowStats decodes an OFPMP_FLOW reply: the concatenated bodies of all reply parts,
// without their ofp_multipart_reply headers, in reply order. Matches are canonical
// (CanonicalMatch) and every instruction list must parse. Counters and durations are
// DecodeFlowCounters'.
func DecodeFlowStats(body []byte) ([]Flow, error) {
	var out []Flow
	err := scanFlowStats(body, func(f Flow, _ FlowCounter) { out = append(out, f) })
	if err != nil {
		return nil, err
	}
	return out, nil
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
			// A switch may send any 32-bit value: nanoseconds beyond a second are kept as
			// they are, and Age folds them in.
			DurationNsec: binary.BigEndian.Uint32(e[8:]),
			Packets:      binary.BigEndian.Uint64(e[32:]),
			Bytes:        binary.BigEndian.Uint64(e[40:]),
		}
		m, instr, err := splitMatch(e[flowStatsFixedLen:])
		if err != nil {
			return fmt.Errorf("flow stats entry at offset %d: %w", off, err)
		}
		f.Match = m
		if _, err := ParseInstructions(instr); err != nil {
			return fmt.Errorf("flow stats entry at offset %d (cookie %#x): %w", off, f.Cookie, err)
		}
		f.Instructions = string(instr)
		each(f, c)
		off += n
	}
	return nil
}

// EncodeFlowStats encodes flows as an OFPMP_FLOW reply body with zero counters, as a switch
// would; fake switches use it so DecodeFlowStats is tested against an independent producer.
func EncodeFlowStats(flows []Flow) ([]byte, error) {
	var out []byte
	for _, f := range flows {
		e := make([]byte, flowStatsFixedLen, flowStatsFixedLen+8+len(f.Match)+len(f.Instructions))
		e[2] = f.Table
		binary.BigEndian.PutUint16(e[12:], f.Priority)
		binary.BigEndian.PutUint16(e[14:], f.IdleTimeout)
		binary.BigEndian.PutUint16(e[16:], f.HardTimeout)
		binary.BigEndian.PutUint64(e[24:], f.Cookie)
		e = AppendMatch(e, f.Match)
		e = append(e, f.Instructions...)
		if len(e) > 0xffff {
			return nil, fmt.Errorf("flow %v stats entry is %d bytes, too long", f, len(e))
		}
		binary.BigEndian.PutUint16(e, uint16(len(e)))
		out = append(out, e...)
	}
	return out, nil
}

func writeBinary(w io.Writer, marshal func() ([]byte, error)) (int64, error) {
	b, err := marshal()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}
