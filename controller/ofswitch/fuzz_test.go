package ofswitch

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// The codec's own decoders are fuzzed in controller/ofwire; this fuzzes the session's reader
// over them.

// seedMessages are encoded messages as a switch sends them.
func seedMessages(t testing.TB) [][]byte {
	enc := func(typ of.Type, xid uint32, body []byte) []byte {
		b, err := ofwire.EncodeMessage(typ, xid, ofwire.RawBody(body))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	feat := make([]byte, 24)
	feat[7] = 1
	return [][]byte{
		enc(of.TypeHello, 1, ofwire.HelloBody()),
		enc(of.TypeHello, 1, nil),
		enc(of.TypeFeaturesReply, 2, feat),
		enc(of.TypeError, 3, ofwire.ErrorBody(6, 8, []byte{4, 15, 0, 16})),
		enc(of.TypePacketIn, 0, ofwire.PacketInBody(3, 9, []byte{1, 2, 3})),
		enc(of.TypeMultipartReply, 4, []byte{0, 7, 0, 1, 0, 0, 0, 0, 9, 9}),
		enc(of.TypeEchoRequest, 5, []byte("x")),
		enc(of.TypeRoleReply, 7, ofwire.RoleBody(2, 5)),
		enc(of.TypeExperiment, 0, ofwire.RoleStatusBody(3, 0, 6, nil)),
		enc(of.TypeExperiment, 0, ofwire.RoleStatusBody(2, 1, 7, make([]byte, 8))),
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
			var hb [ofwire.HeaderLen]byte
			if _, err := io.ReadFull(sw.br, hb[:]); err != nil {
				break
			}
			h, err := ofwire.ParseHeader(hb[:])
			if err != nil {
				break
			}
			if sw.route(h, int(h.Length)-ofwire.HeaderLen) != nil {
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
		if r := sw.Role(); !ofwire.ValidRole(r.Role) {
			t.Fatalf("Role %s after the stream", RoleName(r.Role))
		}
		hr := bufio.NewReader(bytes.NewReader(data))
		for {
			fr, err := readHandshakeFrame(hr)
			if err != nil {
				break
			}
			if len(fr.Body) > int(fr.Length)-ofwire.HeaderLen {
				t.Fatalf("handshake frame body %d bytes, header length %d", len(fr.Body), fr.Length)
			}
		}
	})
}
