package lab

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// An echo reply (type 0, id 0x1234, seq 1, data "abcd") whose checksum
// 0x2904 was computed independently of this package (Python, RFC 1071).
const recordedReply = "0000290412340001" + "61626364"

func TestParseEcho(t *testing.T) {
	rec, _ := hex.DecodeString(recordedReply)
	cases := []struct {
		name    string
		in      []byte
		want    Echo
		wantErr bool
	}{
		{"request round trip", EchoRequest(0xbeef, 7, []byte("xyz")), Echo{Type: ICMPEchoRequest, ID: 0xbeef, Seq: 7, Data: []byte("xyz")}, false},
		{"odd length data", EchoRequest(1, 2, []byte("x")), Echo{Type: ICMPEchoRequest, ID: 1, Seq: 2, Data: []byte("x")}, false},
		{"recorded reply", rec, Echo{Type: ICMPEchoReply, ID: 0x1234, Seq: 1, Data: []byte("abcd")}, false},
		{"short", []byte{0, 0, 0}, Echo{}, true},
		{"bad checksum", append([]byte{0, 0, 0, 1}, 0, 0, 0, 0), Echo{}, true},
		{"not echo", func() []byte {
			b := EchoRequest(1, 1, nil)
			b[0] = 3
			b[2], b[3] = 0, 0
			c := inetChecksum(b)
			b[2], b[3] = byte(c>>8), byte(c)
			return b
		}(), Echo{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseEcho(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, wantErr %v", err, c.wantErr)
			}
			if err == nil && (got.Type != c.want.Type || got.ID != c.want.ID || got.Seq != c.want.Seq || !bytes.Equal(got.Data, c.want.Data)) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func FuzzParseEcho(f *testing.F) {
	rec, _ := hex.DecodeString(recordedReply)
	f.Add(rec)
	f.Add(EchoRequest(3, 4, []byte("payload")))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEcho(b)
		if err != nil {
			return
		}
		// Anything accepted re-encodes (as a request) to a valid message.
		if _, err := ParseEcho(EchoRequest(e.ID, e.Seq, e.Data)); err != nil {
			t.Fatalf("re-encoded %+v: %v", e, err)
		}
	})
}
