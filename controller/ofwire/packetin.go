package ofswitch

import (
	"encoding/binary"
	"fmt"

	"github.com/netrack/openflow/ofp"
)

// PacketIn is a decoded OFPT_PACKET_IN: what the controller needs to answer it (the frame
// and the port it came in on) without parsing OXM itself. Data and Match alias the
// message buffer, which belongs to the PacketIn; the Handler may keep them.
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

// parsePacketIn decodes an OpenFlow 1.3 ofp_packet_in body. in_port is required: the
// 1.3 spec says switches always include it, and without it no answer can be addressed.
func parsePacketIn(body []byte) (PacketIn, error) {
	const fixed = 16 // buffer_id, total_len, reason, table_id, cookie
	if len(body) < fixed+4 {
		return PacketIn{}, fmt.Errorf("%w: PACKET_IN body is %d bytes, need %d", ErrMalformed, len(body), fixed+4)
	}
	pi := PacketIn{
		BufferID: binary.BigEndian.Uint32(body[0:4]),
		TotalLen: binary.BigEndian.Uint16(body[4:6]),
		Reason:   ofp.PacketInReason(body[6]),
		TableID:  body[7],
		Cookie:   binary.BigEndian.Uint64(body[8:16]),
	}
	m := body[fixed:]
	mtype := binary.BigEndian.Uint16(m[0:2])
	mlen := int(binary.BigEndian.Uint16(m[2:4]))
	if mtype != 1 { // OFPMT_OXM
		return PacketIn{}, fmt.Errorf("%w: PACKET_IN match type %d, want OXM (1)", ErrMalformed, mtype)
	}
	padded := (mlen + 7) / 8 * 8
	if mlen < 4 || padded+2 > len(m) {
		return PacketIn{}, fmt.Errorf("%w: PACKET_IN match length %d does not fit %d bytes", ErrMalformed, mlen, len(m))
	}
	pi.Match = m[4:mlen]
	pi.Data = m[padded+2:]
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
