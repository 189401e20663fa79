package ofswitch

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// seedMessages are encoded messages as a switch sends them.
func seedMessages(t testing.TB) [][]byte {
	enc := func(typ of.Type, xid uint32, body []byte) []byte {
		b, err := encodeMessage(typ, xid, rawBody(body))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	feat := make([]byte, 24)
	feat[7] = 1
	return [][]byte{
		enc(of.TypeHello, 1, helloBody()),
		enc(of.TypeHello, 1, nil),
		enc(of.TypeFeaturesReply, 2, feat),
		enc(of.TypeError, 3, errorBody(6, 8, []byte{4, 15, 0, 16})),
		enc(of.TypePacketIn, 0, packetInBody(3, 9, []byte{1, 2, 3})),
		enc(of.TypeMultipartReply, 4, []byte{0, 7, 0, 1, 0, 0, 0, 0, 9, 9}),
		enc(of.TypeEchoRequest, 5, []byte("x")),
		enc(of.TypeRoleReply, 7, roleBody(2, 5)),
		enc(of.TypeExperiment, 0, roleStatusBody(3, 0, 6, nil)),
		enc(of.TypeExperiment, 0, roleStatusBody(2, 1, 7, make([]byte, 8))),
	}
}

// FuzzIncoming feeds arbitrary bytes through everything that decodes what a switch
// sends: framing, HELLO, ERROR, FEATURES, MULTIPART_REPLY, PACKET_IN, ROLE_REPLY and the ONF
// role status. None may panic,
// and a decoded frame must have exactly the length its header claims.
func FuzzIncoming(f *testing.F) {
	for _, s := range seedMessages(f) {
		f.Add(s)
	}
	f.Add(bytes.Join(seedMessages(f), nil))
	if text, err := os.ReadFile(goldenPacketIn); err != nil {
		f.Fatal(err)
	} else if raw, err := hex.DecodeString(strings.TrimSpace(string(text))); err != nil {
		f.Fatal(err)
	} else {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			if len(fr.body) != int(fr.h.Length)-headerLen {
				t.Fatalf("body %d bytes, header length %d", len(fr.body), fr.h.Length)
			}
			negotiate(fr)
			parseError(fr.body)
			parseFeatures(fr.body)
			parseMultipartReply(fr.body)
			parseRoleReply(fr.body)
			if isONFRoleStatus(fr.body) {
				parseRoleStatus(fr.body[experimenterHeaderLen:])
			}
			if pi, err := parsePacketIn(fr.body); err == nil {
				if len(pi.Data) > len(fr.body) || len(pi.Match) > len(fr.body) {
					t.Fatalf("packet-in slices exceed body: %+v", pi)
				}
			}
		}
	})
}

// FuzzPacketIn targets the OXM walk directly.
func FuzzPacketIn(f *testing.F) {
	f.Add(packetInBody(1, 2, []byte("frame")))
	f.Add(packetInBody(uint32(ofp.PortController), 0, nil))
	f.Fuzz(func(t *testing.T, body []byte) {
		pi, err := parsePacketIn(body)
		if err != nil {
			return
		}
		again, err := parsePacketIn(body)
		if err != nil || again.InPort != pi.InPort || !bytes.Equal(again.Data, pi.Data) {
			t.Fatal("decoding is not deterministic")
		}
	})
}

// FuzzRoleReply targets the ROLE_REPLY decoder: what it accepts is exactly 16 bytes with a
// role a switch can confirm, and decodes the same way again.
func FuzzRoleReply(f *testing.F) {
	f.Add(roleBody(2, 5))
	f.Add(roleBody(3, ^uint64(0)))
	f.Add(roleBody(0, 1))
	f.Add(roleBody(2, 5)[:15])
	f.Fuzz(func(t *testing.T, body []byte) {
		rr, err := parseRoleReply(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if len(body) != roleBodyLen || !validRole(rr.Role) {
			t.Fatalf("accepted %d bytes with role %s", len(body), RoleName(rr.Role))
		}
		if !bytes.Equal(roleBody(uint32(rr.Role), rr.GenerationID)[8:], body[8:]) {
			t.Fatalf("generation %d does not round-trip % x", rr.GenerationID, body)
		}
	})
}

// FuzzRoleStatus targets the ONF role status decoders, from the experimenter header on.
func FuzzRoleStatus(f *testing.F) {
	f.Add(roleStatusBody(3, 0, 6, nil))
	f.Add(roleStatusBody(2, 1, 7, make([]byte, 8)))
	f.Add(roleStatusBody(9, 0, 6, nil)[:20])
	f.Fuzz(func(t *testing.T, body []byte) {
		if !isONFRoleStatus(body) {
			return
		}
		rs, err := parseRoleStatus(body[experimenterHeaderLen:])
		if err != nil {
			return
		}
		if len(body) < experimenterHeaderLen+roleStatusLen || !validRole(rs.Role) {
			t.Fatalf("accepted %d bytes with role %s", len(body), RoleName(rs.Role))
		}
	})
}

func TestPacketInDecode(t *testing.T) {
	good := packetInBody(7, 42, []byte("eth"))
	tests := []struct {
		name    string
		body    []byte
		wantErr bool
		inPort  uint32
	}{
		{"good", good, false, 7},
		{"truncated fixed part", good[:10], true, 0},
		{"match length overruns", func() []byte { b := bytes.Clone(good); b[19] = 200; return b }(), true, 0},
		{"not OXM", func() []byte { b := bytes.Clone(good); b[17] = 0; return b }(), true, 0},
		{"no in_port", func() []byte { b := bytes.Clone(good); b[22] = 2 << 1; return b }(), true, 0}, // field 2 = metadata... any other field
		{"in_port wrong length", func() []byte { b := bytes.Clone(good); b[23] = 3; return b }(), true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pi, err := parsePacketIn(tt.body)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && (pi.InPort != tt.inPort || string(pi.Data) != "eth" || pi.Cookie != 42) {
				t.Errorf("decoded %+v", pi)
			}
		})
	}
}

// FuzzSessionReader feeds arbitrary bytes through the session's header-first reader with an
// Apply stage, a multipart request, a probe and a role request waiting, and through the
// handshake reader. Neither may panic; what a waiter holds stays within its bounds, and Role
// only ever holds a role a switch can confirm.
func FuzzSessionReader(f *testing.F) {
	for _, s := range seedMessages(f) {
		f.Add(s)
	}
	f.Add(bytes.Join(seedMessages(f), nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		sw := bareSwitch(bytes.NewReader(data), Config{MaxMultipartBytes: 64, MaxMultipartParts: 3})
		apply, mp, echo, role := newWaiter(waitApply), newWaiter(waitMultipart), newWaiter(waitEcho), newWaiter(waitRole)
		mp.mptype, mp.lim = ofp.MultipartTypeGroupDescription, Limit{MaxBytes: 64, MaxParts: 3}
		sw.register(apply, 3, 4)
		sw.register(mp, 5)
		sw.register(echo, 6)
		sw.register(role, 7)
		for {
			var hb [headerLen]byte
			if _, err := io.ReadFull(sw.br, hb[:]); err != nil {
				break
			}
			h, err := parseHeader(hb[:])
			if err != nil {
				break
			}
			if sw.route(h, int(h.Length)-headerLen) != nil {
				break
			}
			select {
			case <-sw.packetIns:
			default:
			}
		}
		if n := len(apply.take()); n > 2 {
			t.Fatalf("apply waiter took %d frames for 2 xids", n)
		}
		if out, parts, _, _, _ := mp.multipartState(); len(out) > 64 || parts > 3 {
			t.Fatalf("multipart waiter holds %d bytes in %d parts, limit 64 in 3", len(out), parts)
		}
		if r := sw.Role(); !validRole(r.Role) {
			t.Fatalf("Role %s after the stream", RoleName(r.Role))
		}
		hr := bufio.NewReader(bytes.NewReader(data))
		for {
			fr, err := readHandshakeFrame(hr)
			if err != nil {
				break
			}
			if len(fr.body) > int(fr.h.Length)-headerLen {
				t.Fatalf("handshake frame body %d bytes, header length %d", len(fr.body), fr.h.Length)
			}
		}
	})
}
