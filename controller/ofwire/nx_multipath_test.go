package ofwire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/netrack/openflow/ofp"
)

func udpSlotHash() *Multipath {
	return &Multipath{Fields: HashSymmetricL3L4UDP, Algorithm: MultipathModuloN, MaxLink: 255, NBits: 8, Dst: NXMReg(4)}
}

// TestMultipathRefused: what Open vSwitch would refuse is refused on both sides, naming the
// part at fault; the decoder also refuses bytes the encoder never writes.
func TestMultipathRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    Multipath
		want string
	}{
		{"too few bits", Multipath{Fields: HashSymmetricL3L4UDP, MaxLink: 256, NBits: 8, Dst: NXMReg(4)}, "more than 8 bits for 257 links"},
		{"no bits", Multipath{Fields: HashSymmetricL3L4UDP, MaxLink: 0, NBits: 0, Dst: NXMReg(4)}, "bits"},
		{"unknown fields", Multipath{Fields: 7, MaxLink: 1, NBits: 1, Dst: NXMReg(4)}, "hash fields 7"},
		{"unknown algorithm", Multipath{Fields: HashSymmetricL3L4UDP, Algorithm: 4, MaxLink: 1, NBits: 1, Dst: NXMReg(4)}, "algorithm 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.a.MarshalBinary(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("encoding %+v: error %v, want %q", tc.a, err, tc.want)
			}
		})
	}
	good := encodeActions(t, ofp.Actions{udpSlotHash()})
	mut := func(f func([]byte)) []byte { b := bytes.Clone(good); f(b); return b }
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"pad0", mut(func(b []byte) { b[15] = 1 }), "pad"},
		{"pad1", mut(func(b []byte) { b[24] = 1 }), "pad"},
		{"narrow destination", mut(func(b []byte) { b[27] = 6 }), "bits for 256 links"}, // 7 bits
		{"unknown fields", mut(func(b []byte) { b[11] = 9 }), "hash fields 9"},
		{"short", good[:24], "truncated"},
	} {
		t.Run("decode "+tc.name, func(t *testing.T) {
			if _, err := ParseActions(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseActions(%x): error %v, want %q", tc.in, err, tc.want)
			}
		})
	}
}
