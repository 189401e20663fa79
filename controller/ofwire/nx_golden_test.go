package ofwire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/netrack/openflow/ofp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.hex from the encoder")

// actionCase is one encoded action list with its golden file and the text Open vSwitch
// prints for it inside a select group's bucket (checked by the integration test).
type actionCase struct {
	name    string
	actions ofp.Actions
	ovs     string
}

var actionCases = []actionCase{
	{
		// The bucket docs/design.md captured from ovs-ofctl's own encoder.
		name: "ct_commit_nat_dst",
		actions: ofp.Actions{&CT{Flags: CTCommit, Zone: 7, Table: 2, Actions: ofp.Actions{
			&NAT{Flags: NATDst, IPMin: netip.MustParseAddr("10.0.0.1"), PortMin: 9000}}}},
		ovs: "actions=ct(commit,table=2,zone=7,nat(dst=10.0.0.1:9000))",
	},
	{
		name:    "ct_nat_recirc",
		actions: ofp.Actions{&CT{Zone: 7, Table: 1, Actions: ofp.Actions{&NAT{}}}},
		ovs:     "actions=ct(table=1,zone=7,nat)",
	},
	{
		name:    "ct_zone_only",
		actions: ofp.Actions{&CT{Zone: 3, Table: RecircNone}},
		ovs:     "actions=ct(zone=3)",
	},
	{
		name: "ct_snat_range",
		actions: ofp.Actions{&CT{Flags: CTCommit, Zone: 1, Table: RecircNone, Actions: ofp.Actions{
			&NAT{Flags: NATSrc, IPMin: netip.MustParseAddr("10.0.0.1"), IPMax: netip.MustParseAddr("10.0.0.9"), PortMin: 1000, PortMax: 2000}}}},
		ovs: "actions=ct(commit,zone=1,nat(src=10.0.0.1-10.0.0.9:1000-2000))",
	},
	{
		name: "ct_dnat_ipv6",
		actions: ofp.Actions{&CT{Flags: CTCommit, Zone: 2, Table: 4, Actions: ofp.Actions{
			&NAT{Flags: NATDst, IPMin: netip.MustParseAddr("fd00::1"), PortMin: 80}}}},
		ovs: "actions=ct(commit,table=4,zone=2,nat(dst=[fd00::1]:80))",
	},
	{
		// Two 16-byte addresses (NX_NAT_RANGE_IPV6_MIN and _MAX) before the ports, as
		// lib/ofp-actions.c's encode_NAT writes them: 16 + 16 + 16 + 2 + 2 = 52, padded to 56.
		name: "ct_snat_ipv6_range",
		actions: ofp.Actions{&CT{Flags: CTCommit, Zone: 3, Table: RecircNone, Actions: ofp.Actions{
			&NAT{Flags: NATSrc, IPMin: netip.MustParseAddr("fd00::1"), IPMax: netip.MustParseAddr("fd00::9"), PortMin: 1000, PortMax: 2000}}}},
		ovs: "actions=ct(commit,zone=3,nat(src=[fd00::1]-[fd00::9]:1000-2000))",
	},
	{
		name:    "ct_alg_ftp",
		actions: ofp.Actions{&CT{Flags: CTCommit, Zone: 1, Table: RecircNone, Alg: 21}},
		ovs:     "actions=ct(commit,zone=1,alg=ftp)",
	},
	{
		name: "ct_then_output",
		actions: ofp.Actions{&CT{Flags: CTCommit, Zone: 9, Table: RecircNone},
			&ofp.ActionSetField{Field: ofp.XM{Class: ofp.XMClassOpenflowBasic, Type: ofp.XMTypeEthDst, Value: ofp.XMValue{2, 0, 0, 0, 0, 1}}},
			&ofp.ActionOutput{Port: 3}},
		ovs: "actions=ct(commit,zone=9),set_field:02:00:00:00:00:01->eth_dst,output:3",
	},
}

func encodeActions(t testing.TB, a ofp.Actions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatalf("encoding actions: %v", err)
	}
	return buf.Bytes()
}

func readGolden(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name+".hex")
	if *update {
		if err := os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v", path, err)
	}
	want, err := hex.DecodeString(strings.Join(strings.Fields(string(text)), ""))
	if err != nil {
		t.Fatalf("golden %s: %v", path, err)
	}
	return want
}

func TestActionsGolden(t *testing.T) {
	for _, tc := range actionCases {
		t.Run(tc.name, func(t *testing.T) {
			got := encodeActions(t, tc.actions)
			want := readGolden(t, tc.name, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("encoding\n got %x\nwant %x", got, want)
			}
			if len(got)%8 != 0 {
				t.Fatalf("encoding is %d bytes, not padded to 8", len(got))
			}
			back, err := ParseActions(want)
			if err != nil {
				t.Fatalf("ParseActions(golden): %v", err)
			}
			if !reflect.DeepEqual(back, tc.actions) {
				t.Fatalf("ParseActions(golden) = %#v, want %#v", back, tc.actions)
			}
		})
	}
}

// TestDesignBytes checks the field values docs/design.md reports from Open vSwitch's own encoder
// for ct(commit,zone=7,nat(dst=10.0.0.1:9000),table=2), independent of our golden file.
func TestDesignBytes(t *testing.T) {
	b := encodeActions(t, actionCases[0].actions)
	want := []struct {
		off  int
		data []byte
		what string
	}{
		{0, []byte{0xff, 0xff, 0x00, 0x30}, "experimenter type, length 48"},
		{4, []byte{0x00, 0x00, 0x23, 0x20, 0x00, 0x23}, "Nicira vendor, subtype 35"},
		{10, []byte{0x00, 0x01}, "flags commit"},
		{12, []byte{0, 0, 0, 0, 0x00, 0x07, 0x02}, "zone_src 0, zone 7, recirc_table 2"},
		{22, []byte{0, 0}, "alg 0"},
		{24, []byte{0xff, 0xff, 0x00, 0x18, 0x00, 0x00, 0x23, 0x20, 0x00, 0x24}, "nested NXAST_NAT, 24 bytes"},
		{36, []byte{0x00, 0x02, 0x00, 0x11, 10, 0, 0, 1, 0x23, 0x28}, "flags dst, range 0x11, 10.0.0.1, 9000"},
	}
	for _, w := range want {
		if got := b[w.off : w.off+len(w.data)]; !bytes.Equal(got, w.data) {
			t.Errorf("%s at %d: got %x want %x", w.what, w.off, got, w.data)
		}
	}
}

func TestParseActionsErrors(t *testing.T) {
	good := encodeActions(t, actionCases[0].actions)
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"short header", good[:6], "truncated"},
		{"length past end", good[:40], "truncated"},
		{"length not multiple of 8", append([]byte{0, 0, 0, 12}, make([]byte, 8)...), "bad length"},
		{"length below 8", []byte{0, 0, 0, 4, 0, 0, 0, 0}, "bad length"},
		{"output wrong size", append([]byte{0, 0, 0, 8}, make([]byte, 4)...), "output action"},
		{"nat range mixes families", func() []byte {
			b := bytes.Clone(good[24:])
			b[15] = 0x05 // ipv4 min + ipv6 min
			return b
		}(), "mixes"},
		{"nat range runs past end", func() []byte {
			b := bytes.Clone(good[24:])
			b[15] = 0x33 // ipv4 min+max, port min+max: 12 bytes, 8 present
			return b
		}(), "needs more"},
		{"ct nested garbage", func() []byte {
			b := bytes.Clone(good)
			b[27] = 0x08 // nested length 8 leaves 16 bytes of junk
			return b
		}(), "nested"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseActions(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseActions(%x) error %v, want one containing %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestCTState(t *testing.T) {
	cases := []struct {
		set, clear CTState
		text       string
	}{
		{CTNew | CTTrk, 0, "+new+trk"},
		{CTEst | CTTrk, 0, "+est+trk"},
		{CTTrk, CTInv, "+trk-inv"},
		{CTRel | CTTrk | CTDNAT, CTRpl, "+rel+trk+dnat-rpl"},
	}
	for _, tc := range cases {
		xm := CTStateMatch(tc.set, tc.clear)
		set, clear, err := CTStateOf(xm)
		if err != nil || set != tc.set || clear != tc.clear {
			t.Errorf("CTStateOf(CTStateMatch(%#x,%#x)) = %#x,%#x,%v", tc.set, tc.clear, set, clear, err)
		}
		if got := CTStateString(set, clear); got != tc.text {
			t.Errorf("CTStateString = %q, want %q", got, tc.text)
		}
		var buf bytes.Buffer
		if _, err := xm.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		// NXM_NX_CT_STATE_W header: class 1, field 105, hasmask, length 8.
		if got := buf.Bytes()[:4]; !bytes.Equal(got, []byte{0x00, 0x01, 0xd3, 0x08}) {
			t.Errorf("ct_state header %x, want 0001d308", got)
		}
		back, err := ParseOXM(buf.Bytes())
		if err != nil || len(back) != 1 || !reflect.DeepEqual(back[0], xm) {
			t.Errorf("ParseOXM(%x) = %#v, %v", buf.Bytes(), back, err)
		}
	}
	if _, _, err := CTStateOf(CTZoneMatch(3)); err == nil {
		t.Error("CTStateOf(ct_zone) succeeded, want an error naming the field")
	}
}

func TestParseOXMErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"past end", []byte{0x80, 0x00, 0x18, 0x04, 10, 0}, "truncated"},
		{"odd masked", []byte{0x80, 0x00, 0x19, 0x03, 1, 2, 3}, "bad length"},
		{"zero length", []byte{0x80, 0x00, 0x18, 0x00}, "bad length"},
		{"stray", []byte{0x80, 0x00, 0x0a, 0x02, 0x08, 0x00, 0x01}, "stray"},
		{"experimenter", []byte{0xff, 0xff, 0x00, 0x04, 0, 0, 0, 0}, "experimenter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseOXM(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseOXM(%x) error %v, want %q", tc.in, err, tc.want)
			}
		})
	}
}

// FuzzParseActions: whatever parses must re-encode to bytes that parse to the same actions,
// and never panic.
func FuzzParseActions(f *testing.F) {
	for _, tc := range actionCases {
		f.Add(encodeActions(f, tc.actions))
	}
	f.Add(encodeActions(f, ofp.Actions{udpSlotHash()}))
	f.Add([]byte{0xff, 0xff, 0x00, 0x10, 0x00, 0x00, 0x23, 0x20, 0x00, 0x24, 0, 0, 0, 0, 0, 0x3f})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseActions(b)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if _, err := a.WriteTo(&buf); err != nil {
			t.Fatalf("re-encoding %#v: %v", a, err)
		}
		again, err := ParseActions(buf.Bytes())
		if err != nil {
			t.Fatalf("re-encoded %x does not parse: %v", buf.Bytes(), err)
		}
		if !reflect.DeepEqual(a, again) {
			t.Fatalf("round trip changed actions:\n%#v\n%#v", a, again)
		}
	})
}

// FuzzParseOXM: whatever parses re-encodes to a prefix-identical TLV run.
func FuzzParseOXM(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0xd3, 0x08, 0, 0, 0, 0x21, 0, 0, 0, 0x21})
	f.Add([]byte{0x80, 0x00, 0x0a, 0x02, 0x08, 0x00, 0x80, 0x00, 0x18, 0x04, 10, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		xms, err := ParseOXM(b)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		for i := range xms {
			if _, err := xms[i].WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(buf.Bytes(), b[:buf.Len()]) || !allZero(b[buf.Len():]) {
			t.Fatalf("re-encoding %x gave %x", b, buf.Bytes())
		}
	})
}

// TestInNetrackLists checks that our actions sit in netrack's ofp.Actions inside its
// GroupMod and FlowMod, with the bucket and instruction lengths covering them exactly.
func TestInNetrackLists(t *testing.T) {
	for _, tc := range actionCases {
		t.Run(tc.name, func(t *testing.T) {
			want := encodeActions(t, tc.actions)
			g, err := hex.DecodeString(groupModHex(t, tc.actions))
			if err != nil {
				t.Fatal(err)
			}
			// header 8, group mod 8, then the bucket: len, weight, watch port/group, pad, actions.
			bucket := g[16:]
			if n := int(binary.BigEndian.Uint16(bucket)); n != 16+len(want) || n != len(bucket) {
				t.Fatalf("bucket length %d, %d bytes follow, actions are %d", n, len(bucket), len(want))
			}
			if !bytes.Equal(bucket[16:], want) {
				t.Fatalf("bucket actions %x, want %x", bucket[16:], want)
			}
			f, err := hex.DecodeString(flowModHex(t, nil, tc.actions))
			if err != nil {
				t.Fatal(err)
			}
			// header 8, flow mod 40, empty match 8, then apply-actions: type 4, len, pad 4.
			in := f[56:]
			if typ, n := binary.BigEndian.Uint16(in), int(binary.BigEndian.Uint16(in[2:])); typ != 4 || n != 8+len(want) || n != len(in) {
				t.Fatalf("instruction type %d length %d, %d bytes follow, actions are %d", typ, n, len(in), len(want))
			}
			if !bytes.Equal(in[8:], want) {
				t.Fatalf("instruction actions %x, want %x", in[8:], want)
			}
		})
	}
}
