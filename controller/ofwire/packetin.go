package ofwire

import (
	"encoding/binary"
	"fmt"

	"github.com/netrack/openflow/ofp"
)

const (
	oxmClassOF = 0x8000 // OFPXMC_OPENFLOW_BASIC
	oxmInPort  = 0      // OFPXMT_OFB_IN_PORT
	// packetInFixedLen is buffer_id, total_len, reason, table_id and cookie.
	packetInFixedLen = 16
)

// PacketIn is a decoded OFPT_PACKET_IN: what the controller needs to answer it (the frame
// and the port it came in on) without parsing OXM itself. Data and Match alias the
// message buffer, which belongs to the PacketIn; whoever receives it may keep them.
type PacketIn struct {
	BufferID uint32 // ofp.NoBuffer when the switch sent the whole frame (we ask for that)
	TotalLen uint16 // length of the frame on the wire; len(Data) may be shorter
	Reason   ofp.PacketInReason
	TableID  uint8
	Cookie   uint64 // cookie of the flow that sent it, which tells the controller why
	InPort   uint32 // OXM in_port: where to send the answer (output:IN_PORT) or learn a MAC
	Match    []byte // the raw OXM fields (without ofp_match header and padding)
	Data     []byte // the Ethernet frame
}

// ParsePacketIn decodes an OpenFlow 1.3 ofp_packet_in body. in_port is required: the
// 1.3 spec says switches always include it, and without it no answer can be addressed.
func ParsePacketIn(body []byte) (PacketIn, error) {
	if len(body) < packetInFixedLen+matchHeaderLen {
		return PacketIn{}, fmt.Errorf("%w: PACKET_IN body is %d bytes, need %d", ErrMalformed, len(body), packetInFixedLen+matchHeaderLen)
	}
	pi := PacketIn{
		BufferID: binary.BigEndian.Uint32(body[0:4]),
		TotalLen: binary.BigEndian.Uint16(body[4:6]),
		Reason:   ofp.PacketInReason(body[6]),
		TableID:  body[7],
		Cookie:   binary.BigEndian.Uint64(body[8:16]),
	}
	match, rest, err := cutMatch(body[packetInFixedLen:])
	if err != nil {
		return PacketIn{}, fmt.Errorf("PACKET_IN: %w", err)
	}
	if len(rest) < 2 { // two bytes of padding before the frame
		return PacketIn{}, fmt.Errorf("%w: PACKET_IN ends %d bytes after its match, need 2 of padding", ErrMalformed, len(rest))
	}
	pi.Match, pi.Data = match, rest[2:]
	inPort, found, err := oxmInPortOf(pi.Match)
	if err != nil {
		return PacketIn{}, err
	}
	if !found {
		return PacketIn{}, fmt.Errorf("%w: PACKET_IN without OXM in_port", ErrMalformed)
	}
	pi.InPort = inPort
	return pi, nil
}

// PacketInBody encodes an ofp_packet_in body as a switch sends it for a table-miss or
// CONTROLLER action (no buffer, reason action, the whole frame), its match only in_port: what
// fake switches and fuzz seeds send.
func PacketInBody(inPort uint32, cookie uint64, data []byte) []byte {
	b := make([]byte, packetInFixedLen, packetInFixedLen+16+2+len(data))
	binary.BigEndian.PutUint32(b[0:], ofp.NoBuffer)
	binary.BigEndian.PutUint16(b[4:], uint16(len(data)))
	b[6] = byte(ofp.PacketInReasonAction)
	binary.BigEndian.PutUint64(b[8:], cookie)
	var inPortTLV [8]byte
	binary.BigEndian.PutUint16(inPortTLV[0:], oxmClassOF)
	inPortTLV[2], inPortTLV[3] = oxmInPort<<1, 4
	binary.BigEndian.PutUint32(inPortTLV[4:], inPort)
	b = AppendMatch(b, string(inPortTLV[:]))
	return append(append(b, 0, 0), data...)
}

// oxmInPortOf walks OXM TLVs and returns OFPXMT_OFB_IN_PORT's value.
func oxmInPortOf(fields []byte) (port uint32, found bool, err error) {
	for off := 0; off < len(fields); {
		if len(fields)-off < 4 {
			return 0, false, fmt.Errorf("%w: OXM header truncated at byte %d", ErrMalformed, off)
		}
		class := binary.BigEndian.Uint16(fields[off:])
		field := fields[off+2] >> 1
		l := int(fields[off+3])
		if off+4+l > len(fields) {
			return 0, false, fmt.Errorf("%w: OXM field %#04x:%d length %d overruns match at byte %d", ErrMalformed, class, field, l, off)
		}
		if class == oxmClassOF && field == oxmInPort {
			if l != 4 {
				return 0, false, fmt.Errorf("%w: OXM in_port length %d, want 4", ErrMalformed, l)
			}
			port, found = binary.BigEndian.Uint32(fields[off+4:]), true
		}
		off += 4 + l
	}
	return port, found, nil
}
