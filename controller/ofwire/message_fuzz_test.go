package ofwire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// seedMessages are encoded messages as a switch sends them.
func seedMessages(t testing.TB) [][]byte {
	enc := func(typ of.Type, xid uint32, body []byte) []byte {
		b, err := EncodeMessage(typ, xid, RawBody(body))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	feat := make([]byte, 24)
	feat[7] = 1
	return [][]byte{
		enc(of.TypeHello, 1, HelloBody()),
		enc(of.TypeHello, 1, nil),
		enc(of.TypeFeaturesReply, 2, feat),
		enc(of.TypeError, 3, ErrorBody(6, 8, []byte{4, 15, 0, 16})),
		enc(of.TypePacketIn, 0, PacketInBody(3, 9, []byte{1, 2, 3})),
		enc(of.TypeMultipartReply, 4, []byte{0, 7, 0, 1, 0, 0, 0, 0, 9, 9}),
		enc(of.TypeEchoRequest, 5, []byte("x")),
		enc(of.TypeRoleReply, 7, RoleBody(2, 5)),
		enc(of.TypeExperiment, 0, RoleStatusBody(3, 0, 6, nil)),
		enc(of.TypeExperiment, 0, RoleStatusBody(2, 1, 7, make([]byte, 8))),
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
			fr, err := ReadFrame(r)
			if err != nil {
				return
			}
			if len(fr.Body) != int(fr.Length)-HeaderLen {
				t.Fatalf("body %d bytes, header length %d", len(fr.Body), fr.Length)
			}
			Negotiate(fr)
			ParseError(fr.Body)
			ParseFeatures(fr.Body)
			ParseMultipartReply(fr.Body)
			ParseRoleReply(fr.Body)
			if IsONFRoleStatus(fr.Body) {
				ParseRoleStatus(fr.Body[ExperimenterHeaderLen:])
			}
			if pi, err := ParsePacketIn(fr.Body); err == nil {
				if len(pi.Data) > len(fr.Body) || len(pi.Match) > len(fr.Body) {
					t.Fatalf("packet-in slices exceed body: %+v", pi)
				}
			}
		}
	})
}

// FuzzPacketIn targets the OXM walk directly.
func FuzzPacketIn(f *testing.F) {
	f.Add(PacketInBody(1, 2, []byte("frame")))
	f.Add(PacketInBody(uint32(ofp.PortController), 0, nil))
	f.Fuzz(func(t *testing.T, body []byte) {
		pi, err := ParsePacketIn(body)
		if err != nil {
			return
		}
		again, err := ParsePacketIn(body)
		if err != nil || again.InPort != pi.InPort || !bytes.Equal(again.Data, pi.Data) {
			t.Fatal("decoding is not deterministic")
		}
	})
}

// FuzzRoleReply targets the ROLE_REPLY decoder: what it accepts is exactly 16 bytes with a
// role a switch can confirm, and decodes the same way again.
func FuzzRoleReply(f *testing.F) {
	f.Add(RoleBody(2, 5))
	f.Add(RoleBody(3, ^uint64(0)))
	f.Add(RoleBody(0, 1))
	f.Add(RoleBody(2, 5)[:15])
	f.Fuzz(func(t *testing.T, body []byte) {
		rr, err := ParseRoleReply(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if len(body) != RoleBodyLen || !ValidRole(rr.Role) {
			t.Fatalf("accepted %d bytes with role %s", len(body), RoleName(rr.Role))
		}
		if !bytes.Equal(RoleBody(rr.Role, rr.GenerationID)[8:], body[8:]) {
			t.Fatalf("generation %d does not round-trip % x", rr.GenerationID, body)
		}
	})
}

// FuzzRoleStatus targets the ONF role status decoders, from the experimenter header on.
func FuzzRoleStatus(f *testing.F) {
	f.Add(RoleStatusBody(3, 0, 6, nil))
	f.Add(RoleStatusBody(2, 1, 7, make([]byte, 8)))
	f.Add(RoleStatusBody(9, 0, 6, nil)[:20])
	f.Fuzz(func(t *testing.T, body []byte) {
		if !IsONFRoleStatus(body) {
			return
		}
		rs, err := ParseRoleStatus(body[ExperimenterHeaderLen:])
		if err != nil {
			return
		}
		if len(body) < ExperimenterHeaderLen+RoleStatusLen || !ValidRole(rs.Role) {
			t.Fatalf("accepted %d bytes with role %s", len(body), RoleName(rs.Role))
		}
	})
}

func TestPacketInDecode(t *testing.T) {
	good := PacketInBody(7, 42, []byte("eth"))
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
			pi, err := ParsePacketIn(tt.body)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && (pi.InPort != tt.inPort || string(pi.Data) != "eth" || pi.Cookie != 42) {
				t.Errorf("decoded %+v", pi)
			}
		})
	}
}
