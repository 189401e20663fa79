package ofwire

import (
	"bytes"
	"io"
	"net/netip"
	"testing"

	"github.com/netrack/openflow/ofp"
)

// libraryBytes is what github.com/netrack/openflow writes for w: the reference the hand
// encoders must equal byte for byte.
func libraryBytes(t testing.TB, w io.WriterTo) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEncodersMatchTheLibrary(t *testing.T) {
	mac := []byte{2, 0, 0, 0, 0, 7}
	ip4 := netip.MustParseAddr("10.0.0.7").AsSlice()
	ip6 := netip.MustParseAddr("fd00::7").AsSlice()
	masked := ofp.XM{Class: ofp.XMClassOpenflowBasic, Type: ofp.XMTypeIPv4Dst, Value: ip4, Mask: ofp.XMValue{255, 255, 255, 0}}
	actions := []ofp.Actions{
		{output(ofp.PortNormal, 0)},
		{output(ofp.PortController, ofp.ContentLenNoBuffer)},
		{&ofp.ActionGroup{Group: 77}},
		{setField(ofp.XMTypeEthDst, mac), setField(ofp.XMTypeIPv4Dst, ip4), setField(ofp.XMTypeTCPDst, port16(8080)), output(3, 0)},
		{setField(ofp.XMTypeIPv6Dst, ip6), setField(ofp.XMTypeIPProto, []byte{17}), setField(ofp.XMTypeUDPSrc, port16(53))},
		{&ofp.ActionSetField{Field: masked}},
		{&CT{Flags: CTCommit, Zone: 9, Table: 2, Actions: ofp.Actions{&NAT{Flags: NATDst, IPMin: netip.MustParseAddr("10.0.0.7"), PortMin: 80}}}},
		{&ofp.ActionPopVLAN{}, &ofp.ActionSetQueue{QueueID: 4}}, // the library's own path
		nil,
	}
	for i, as := range actions {
		if got, want := mustActions(t, as), libraryBytes(t, &as); got != string(want) {
			t.Errorf("actions %d: % x, library % x", i, got, want)
		}
		in := apply(as...)
		if got, want := mustInstructions(t, in), libraryBytes(t, &in); got != string(want) {
			t.Errorf("apply-actions %d: % x, library % x", i, got, want)
		}
	}
	for _, in := range []ofp.Instructions{gotoTable(1), {&ofp.InstructionMeter{Meter: 3}}, append(gotoTable(2), apply(output(1, 0))...)} {
		if got, want := mustInstructions(t, in), libraryBytes(t, &in); got != string(want) {
			t.Errorf("instructions %v: % x, library % x", in, got, want)
		}
	}
	match := []ofp.XM{xm(ofp.XMTypeEthType, port16(0x0800)), xm(ofp.XMTypeIPProto, []byte{6}), xm(ofp.XMTypeIPv4Dst, ip4), xm(ofp.XMTypeTCPDst, port16(80)), masked}
	got, err := EncodeFields(match)
	if err != nil {
		t.Fatal(err)
	}
	var enc [][]byte
	for i := range match {
		enc = append(enc, libraryBytes(t, &match[i]))
	}
	// Canonical order: the TLVs sorted by their bytes.
	for i := 1; i < len(enc); i++ {
		for j := i; j > 0 && bytes.Compare(enc[j], enc[j-1]) < 0; j-- {
			enc[j], enc[j-1] = enc[j-1], enc[j]
		}
	}
	if want := bytes.Join(enc, nil); got != string(want) {
		t.Errorf("match: % x, library % x", got, want)
	}
	if _, err := EncodeFields([]ofp.XM{{Type: ofp.XMTypeIPv4Dst, Value: make(ofp.XMValue, 200), Mask: make(ofp.XMValue, 100)}}); err == nil {
		t.Error("a 300-byte OXM encoded: its length byte would wrap")
	}
}

// FuzzEncodeXM: any field type, value and mask up to the one-byte length encode as the library
// encodes them, alone and inside a set-field action.
func FuzzEncodeXM(f *testing.F) {
	f.Add(uint16(0x8000), uint8(ofp.XMTypeEthDst), []byte{2, 0, 0, 0, 0, 1}, []byte(nil))
	f.Add(uint16(0x8000), uint8(ofp.XMTypeIPv4Dst), []byte{10, 0, 0, 1}, []byte{255, 255, 0, 0})
	f.Add(uint16(0xffff), uint8(1), []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, class uint16, typ uint8, value, mask []byte) {
		if len(value)+len(mask) > 255 || typ > 127 {
			return // not representable: the length byte would wrap, the type shift overflow
		}
		x := ofp.XM{Class: ofp.XMClass(class), Type: ofp.XMType(typ), Value: value, Mask: mask}
		if got, want := appendXM(nil, &x), libraryBytes(t, &x); !bytes.Equal(got, want) {
			t.Fatalf("xm: % x, library % x", got, want)
		}
		a := ofp.Actions{&ofp.ActionSetField{Field: x}}
		if got, want := mustActions(t, a), libraryBytes(t, &a); got != string(want) {
			t.Fatalf("set-field: % x, library % x", got, want)
		}
	})
}
