package ofwire

import (
	"bytes"
	"slices"
	"testing"

	"github.com/netrack/openflow/ofp"
)

// seedState is what fuzzing starts from: the flows ovs-ofctl itself encoded
// (testdata/*.ofctl.hex, with Nicira learn and resubmit actions), one with goto_table, and a
// select group whose buckets are the golden action lists (ct, nat, set_field, output).
func seedState(f *testing.F) (flows []Flow, groups []Group) {
	for _, tc := range ofctlCases {
		msg := readOfctlGolden(f, tc.name)
		m, err := DecodeFlowMod(msg[HeaderLen:])
		if err != nil {
			f.Fatalf("%s: %v", tc.name, err)
		}
		flows = append(flows, m.Flow)
	}
	match, err := EncodeFields([]ofp.XM{xm(ofp.XMTypeEthType, port16(0x0800)), xm(ofp.XMTypeIPv4Dst, []byte{10, 0, 0, 100})})
	if err != nil {
		f.Fatal(err)
	}
	flows = append(flows, Flow{Table: 0, Priority: 100, Cookie: 0xf1e0000100020002, Match: match,
		Instructions: mustInstructions(f, append(apply(setField(ofp.XMTypeTCPDst, port16(80))), gotoTable(1)...))})
	g := Group{ID: 10, Type: ofp.GroupTypeSelect}
	for i, tc := range actionCases {
		g.Buckets = append(g.Buckets, Bucket{Weight: uint16(i + 1), Actions: string(encodeActions(f, tc.actions))})
	}
	return flows, []Group{g, {ID: 11, Type: ofp.GroupTypeSelect}}
}

// FuzzDecodeGroupDesc: never panics; whatever decodes re-encodes to a reply that decodes to
// the same groups.
func FuzzDecodeGroupDesc(f *testing.F) {
	_, groups := seedState(f)
	body, err := EncodeGroupDesc(groups)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Add(body[:len(body)-3])
	f.Add([]byte{0, 8, 1, 0, 0, 0, 0, 10})
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := DecodeGroupDesc(b)
		if err != nil {
			return
		}
		again, err := EncodeGroupDesc(g)
		if err != nil {
			return // e.g. a group too long to re-encode is not a decoding bug
		}
		g2, err := DecodeGroupDesc(again)
		if err != nil || !slices.EqualFunc(g, g2, Group.Equal) {
			t.Fatalf("round trip: %v\n%v\n%v", err, g, g2)
		}
	})
}

// FuzzDecodeFlowStats: never panics; decoded flows survive a re-encode.
func FuzzDecodeFlowStats(f *testing.F) {
	flows, _ := seedState(f)
	body, err := EncodeFlowStats(flows)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Add(body[:len(body)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := DecodeFlowStats(b)
		if err != nil {
			return
		}
		again, err := EncodeFlowStats(fl)
		if err != nil {
			return
		}
		fl2, err := DecodeFlowStats(again)
		if err != nil || !slices.Equal(fl, fl2) {
			t.Fatalf("round trip: %v\n%v\n%v", err, fl, fl2)
		}
	})
}

// FuzzDecodeFlowMod covers the fake switches' decoder, which reads what the planner encodes.
func FuzzDecodeFlowMod(f *testing.F) {
	flows, _ := seedState(f)
	for _, fl := range flows {
		b, err := (&FlowMod{Command: ofp.FlowAdd, Flow: fl}).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeFlowMod(b)
		if err != nil {
			return
		}
		again, err := (&m).MarshalBinary()
		if err != nil {
			return
		}
		m2, err := DecodeFlowMod(again)
		if m.Command == ofp.FlowDelete || m.Command == ofp.FlowDeleteStrict {
			m.Flow.Instructions = "" // deletes carry none on the wire
		}
		if err != nil || m2 != m {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, m, m2)
		}
	})
}

// FuzzDecodeGroupMod covers the fake switches' group decoder.
func FuzzDecodeGroupMod(f *testing.F) {
	_, groups := seedState(f)
	for _, g := range groups {
		b, err := (&GroupMod{Command: ofp.GroupModify, Group: g}).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeGroupMod(b)
		if err != nil {
			return
		}
		again, err := (&m).MarshalBinary()
		if err != nil {
			return
		}
		if m.Command == ofp.GroupDelete {
			return // deletes carry no buckets on the wire
		}
		if !bytes.Equal(again, b) {
			// Only the watch port/group and padding may differ; compare decoded forms.
			m2, err := DecodeGroupMod(again)
			if err != nil || m2.Command != m.Command || !m2.Group.Equal(m.Group) {
				t.Fatalf("round trip: %v\n%+v\n%+v", err, m, m2)
			}
		}
	})
}

// FuzzDecodeFlowCounters: counters decode exactly when the flows do, one per entry.
func FuzzDecodeFlowCounters(f *testing.F) {
	flows, _ := seedState(f)
	body, err := EncodeFlowStats(flows)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, errC := DecodeFlowCounters(b)
		fl, errF := DecodeFlowStats(b)
		if (errC == nil) != (errF == nil) || len(c) != len(fl) {
			t.Fatalf("counters (%d, %v) and flows (%d, %v) disagree", len(c), errC, len(fl), errF)
		}
	})
}
