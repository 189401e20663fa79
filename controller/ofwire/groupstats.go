package ofwire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// OFPMP_GROUP (OpenFlow 1.3.5 §7.3.5.9): the counters of a group and of each of its buckets.
// The controller reads them to measure how a select group really divides new connections
// (docs/dataplane.md, "Measured shares"), beside the split its slot table plans.

const (
	// GroupStatsRequestLen is ofp_group_stats_request: group_id and 4 bytes of padding.
	GroupStatsRequestLen = 8
	// GroupStatsFixedLen is ofp_group_stats before its bucket counters, and
	// BucketCounterLen one ofp_bucket_counter (packet_count, byte_count).
	GroupStatsFixedLen = 40
	BucketCounterLen   = 16
	// GroupAll is OFPG_ALL: in a group stats request, every group of the switch.
	GroupAll uint32 = 0xfffffffc
)

// GroupStatsRequest is the body of an OFPMP_GROUP request (after ofp_multipart_request's
// header): one group by id, or every group with GroupAll.
type GroupStatsRequest struct {
	GroupID uint32
}

// MarshalBinary returns the ofp_group_stats_request.
func (r GroupStatsRequest) MarshalBinary() ([]byte, error) {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, GroupStatsRequestLen), r.GroupID)
	return append(b, 0, 0, 0, 0), nil
}

// WriteTo implements io.WriterTo, for MultipartRequest.
func (r GroupStatsRequest) WriteTo(w io.Writer) (int64, error) {
	return writeBinary(w, r.MarshalBinary)
}

// BucketCounter is one bucket's counters: what the switch sent through that bucket.
type BucketCounter struct {
	Packets, Bytes uint64
}

// GroupStats is one ofp_group_stats entry. Buckets are in the group's bucket order.
type GroupStats struct {
	GroupID  uint32
	RefCount uint32
	Packets  uint64
	Bytes    uint64
	// DurationSec and DurationNsec are how long the group has existed: a reading whose
	// duration went backwards belongs to a group deleted and added again since.
	DurationSec  uint32
	DurationNsec uint32
	Buckets      []BucketCounter
}

// DecodeGroupStats decodes an OFPMP_GROUP reply: the concatenated bodies of all reply parts,
// without their ofp_multipart_reply headers, in reply order. Every entry's length must cover
// its fixed part and a whole number of bucket counters, inside the body; a bad entry fails
// the whole reply, with an error naming the entry's offset and the field at fault.
func DecodeGroupStats(body []byte) ([]GroupStats, error) {
	var out []GroupStats
	for off := 0; off < len(body); {
		left := len(body) - off
		if left < GroupStatsFixedLen {
			return nil, fmt.Errorf("%w: group stats entry at offset %d: %d bytes left, ofp_group_stats needs %d",
				ErrMalformed, off, left, GroupStatsFixedLen)
		}
		n := int(binary.BigEndian.Uint16(body[off:]))
		e := body[off:]
		id := binary.BigEndian.Uint32(e[4:])
		switch {
		case n < GroupStatsFixedLen:
			return nil, fmt.Errorf("%w: group stats entry at offset %d (group %d): length %d below the fixed %d",
				ErrMalformed, off, id, n, GroupStatsFixedLen)
		case (n-GroupStatsFixedLen)%BucketCounterLen != 0:
			return nil, fmt.Errorf("%w: group stats entry at offset %d (group %d): length %d leaves %d bytes of bucket_stats, not a multiple of %d",
				ErrMalformed, off, id, n, n-GroupStatsFixedLen, BucketCounterLen)
		case n > left:
			return nil, fmt.Errorf("%w: group stats entry at offset %d (group %d): length %d, %d bytes left",
				ErrMalformed, off, id, n, left)
		}
		e = e[:n]
		g := GroupStats{
			GroupID:      id,
			RefCount:     binary.BigEndian.Uint32(e[8:]),
			Packets:      binary.BigEndian.Uint64(e[16:]),
			Bytes:        binary.BigEndian.Uint64(e[24:]),
			DurationSec:  binary.BigEndian.Uint32(e[32:]),
			DurationNsec: binary.BigEndian.Uint32(e[36:]),
			Buckets:      make([]BucketCounter, 0, (n-GroupStatsFixedLen)/BucketCounterLen),
		}
		for p := GroupStatsFixedLen; p < n; p += BucketCounterLen {
			g.Buckets = append(g.Buckets, BucketCounter{
				Packets: binary.BigEndian.Uint64(e[p:]),
				Bytes:   binary.BigEndian.Uint64(e[p+8:]),
			})
		}
		out = append(out, g)
		off += n
	}
	return out, nil
}

// EncodeGroupStats encodes entries as an OFPMP_GROUP reply body, as a switch would; fake
// switches and the fuzz seeds use it, so DecodeGroupStats is tested against an independent
// producer.
func EncodeGroupStats(groups []GroupStats) ([]byte, error) {
	var out []byte
	for _, g := range groups {
		n := GroupStatsFixedLen + BucketCounterLen*len(g.Buckets)
		if n > 0xffff {
			return nil, fmt.Errorf("group %d stats are %d bytes, too long", g.GroupID, n)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(n))
		out = append(out, 0, 0)
		out = binary.BigEndian.AppendUint32(out, g.GroupID)
		out = binary.BigEndian.AppendUint32(out, g.RefCount)
		out = append(out, 0, 0, 0, 0)
		out = binary.BigEndian.AppendUint64(out, g.Packets)
		out = binary.BigEndian.AppendUint64(out, g.Bytes)
		out = binary.BigEndian.AppendUint32(out, g.DurationSec)
		out = binary.BigEndian.AppendUint32(out, g.DurationNsec)
		for _, b := range g.Buckets {
			out = binary.BigEndian.AppendUint64(out, b.Packets)
			out = binary.BigEndian.AppendUint64(out, b.Bytes)
		}
	}
	return out, nil
}
