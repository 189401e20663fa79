package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestFrameDetails pins the framing rejections, both ways a server meets them: Frame's bare
// reason (no allocation, no details) and Open's *Error, whose text names the thing at fault.
// Each row breaks one check of docs/push-protocol.md, in the protocol's order.
func TestFrameDetails(t *testing.T) {
	good := seal(t, sample())
	goodV1 := seal(t, sampleV1())
	with := func(b []byte, f func(b []byte)) func() []byte {
		return func() []byte { c := bytes.Clone(b); f(c); return c }
	}
	tests := []struct {
		name string
		make func() []byte
		want Reason
		text string // must appear in Open's error
	}{
		{"oversized", func() []byte { return make([]byte, MaxDatagram+1) }, ReasonOversized, "513 bytes, max 512"},
		{"shorter than the header", func() []byte { return good[:HeaderSize-1] }, ReasonTruncated, "shorter than the 80-byte header"},
		{"bad magic", with(good, func(b []byte) { b[1] = 'X' }), ReasonMalformed, "bad magic 0x4658"},
		{"version 0", with(good, func(b []byte) { b[offVersion] = 0 }), ReasonVersion, "version 0, this collector speaks 1 and 2"},
		{"version 9", with(good, func(b []byte) { b[offVersion] = 9 }), ReasonVersion, "version 9"},
		{"id length 0", with(good, func(b []byte) { b[offIDLen] = 0 }), ReasonMalformed, "id length 0, want 1..64"},
		{"id length 65", with(good, func(b []byte) { b[offIDLen] = 65 }), ReasonMalformed, "id length 65, want 1..64"},
		{"error length 129", with(good, func(b []byte) { b[offErrLen] = 129 }), ReasonMalformed, "health error length 129, want <= 128"},
		{"v2 shorter than its lengths", func() []byte { return good[:len(good)-1] }, ReasonTruncated, "version-2 datagram is 132 bytes, its lengths say 133"},
		{"v2 longer than its lengths", func() []byte { return append(bytes.Clone(good), 0) }, ReasonMalformed, "version-2 datagram is 134 bytes, its lengths say 133"},
		{"v1 shorter than its lengths", func() []byte { return goodV1[:len(goodV1)-1] }, ReasonTruncated, "version-1 datagram is 116 bytes, its lengths say 117"},
		{"v2 header with v1 length", with(goodV1, func(b []byte) { b[offVersion] = Version2 }), ReasonTruncated, "version-2 datagram is 117 bytes, its lengths say 133"},
		{"id charset", with(good, func(b []byte) { b[HeaderSizeV2+1] = '/' }), ReasonMalformed, `backend id "w/b-1": want [A-Za-z0-9._-]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.make()
			if id, reason := Frame(d); reason != tt.want || id != nil {
				t.Errorf("Frame = %q, %q; want nil, %q", id, reason, tt.want)
			}
			var r Report
			err := Open(d, keys, &r)
			if ReasonOf(err) != tt.want || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("Open: %v; want reason %s and %q in the text", err, tt.want, tt.text)
			}
			if err := (&Opener{Brief: true}).Open(d, keys, &r); ReasonOf(err) != tt.want {
				t.Errorf("brief Open: %v; want reason %s", err, tt.want)
			}
			if n := testing.AllocsPerRun(50, func() { Frame(d) }); n != 0 {
				t.Errorf("Frame allocates %v times on a refused datagram, want 0", n)
			}
		})
	}
}

// TestFrameBothDirections: the encoder lays out what the decoder's framing expects, at the
// limits of each length and in both versions: the sealed size is the one the header's
// lengths announce, and Frame returns the id from where AppendSeal wrote it.
func TestFrameBothDirections(t *testing.T) {
	for _, v := range []uint8{Version1, Version2} {
		for _, idLen := range []int{1, MaxIDLen} {
			for _, errLen := range []int{0, 1, MaxHealthErrorLen} {
				r := sample()
				if v == Version1 {
					r = sampleV1()
				}
				r.BackendID = strings.Repeat("x", idLen)
				r.HealthError = strings.Repeat("e", errLen)
				b := seal(t, r)
				hdr := HeaderSizeV2
				if v == Version1 {
					hdr = HeaderSize
				}
				if want := hdr + idLen + errLen + TagSize; len(b) != want || len(b) > MaxDatagram {
					t.Errorf("v%d id %d err %d: sealed %d bytes, want %d (<= %d)", v, idLen, errLen, len(b), want, MaxDatagram)
				}
				id, reason := Frame(b)
				if reason != "" || string(id) != r.BackendID {
					t.Errorf("v%d id %d err %d: Frame = %q, %q", v, idLen, errLen, id, reason)
				}
				if n := testing.AllocsPerRun(50, func() { Frame(b) }); n != 0 {
					t.Errorf("Frame allocates %v times on a sound datagram, want 0", n)
				}
			}
		}
	}
}
