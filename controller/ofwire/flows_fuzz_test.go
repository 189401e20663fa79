package dataplane

import (
	"bytes"
	"slices"
	"testing"

	"github.com/netrack/openflow/ofp"
)

func seedState(f *testing.F) State {
	return Desired(scenarios()["mixed"], DefaultOptions())
}

// FuzzDecodeGroupDesc: never panics; whatever decodes re-encodes to a reply that decodes to
// the same groups.
func FuzzDecodeGroupDesc(f *testing.F) {
	s := seedState(f)
	body, err := EncodeGroupDesc(s.Groups)
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
	s := seedState(f)
	body, err := EncodeFlowStats(s.Flows)
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

// FuzzDecodeFlowMod covers the fake switch's decoder, which reads what Plan encodes.
func FuzzDecodeFlowMod(f *testing.F) {
	for _, fl := range seedState(f).Flows {
		b, err := (&FlowMod{Command: ofp.FlowAdd, Flow: fl}).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeFlowMod(b)
		if err != nil {
			return
		}
		again, err := (&m).MarshalBinary()
		if err != nil {
			return
		}
		m2, err := decodeFlowMod(again)
		if m.Command == ofp.FlowDelete || m.Command == ofp.FlowDeleteStrict {
			m.Flow.Instructions = "" // deletes carry none on the wire
		}
		if err != nil || m2 != m {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, m, m2)
		}
	})
}

// FuzzDecodeGroupMod covers the fake switch's group decoder.
func FuzzDecodeGroupMod(f *testing.F) {
	for _, g := range seedState(f).Groups {
		b, err := (&GroupMod{Command: ofp.GroupModify, Group: g}).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeGroupMod(b)
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
			m2, err := decodeGroupMod(again)
			if err != nil || m2.Command != m.Command || !m2.Group.Equal(m.Group) {
				t.Fatalf("round trip: %v\n%+v\n%+v", err, m, m2)
			}
		}
	})
}

// FuzzDecodeFlowCounters: counters decode exactly when the flows do, one per entry.
func FuzzDecodeFlowCounters(f *testing.F) {
	body, err := EncodeFlowStats(seedState(f).Flows)
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
