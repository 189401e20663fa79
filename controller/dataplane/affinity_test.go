package dataplane

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"flowweight/controller/ofswitch"
	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

// affinityService is webService with a 3 s affinity timeout.
func affinityService() Service {
	s := webService(ModeConntrack)
	s.AffinityTimeout = 3
	return s
}

// flowsIn returns the flows of table t, by kind.
func flowsIn(st State, table uint8) map[Kind][]Flow {
	out := map[Kind][]Flow{}
	for _, f := range st.Flows {
		if f.Table == table {
			_, _, k, _ := ParseCookie(f.Cookie)
			out[k] = append(out[k], f)
		}
	}
	return out
}

func actionsOf(t *testing.T, f Flow) (ofp.Actions, []ofwire.Instruction) {
	t.Helper()
	ins, err := ofwire.ParseInstructions([]byte(f.Instructions))
	if err != nil {
		t.Fatalf("%v: %v", f, err)
	}
	var acts ofp.Actions
	for _, in := range ins {
		acts = append(acts, in.Actions...)
	}
	return acts, ins
}

func TestAffinityDesired(t *testing.T) {
	s := affinityService()
	s.Backends = append(s.Backends, Backend{Name: "d", Index: 3, IP: ip("10.0.0.4"), MAC: mac("02:00:00:00:00:04"), SwitchPort: 4}) // weight 0
	d := Desired([]Service{s}, DefaultOptions())

	// Table 1: resubmit to the learned table, then table 5.
	newFlows := flowsIn(d, TableCT)[KindNew]
	if len(newFlows) != 1 {
		t.Fatalf("table 1 new-connection flows: %v", newFlows)
	}
	acts, ins := actionsOf(t, newFlows[0])
	if len(ins) != 2 || ins[1].Type != ofwire.InstrGotoTable || ins[1].Table != TableAffinityPick ||
		len(acts) != 1 || *acts[0].(*ofwire.Resubmit) != (ofwire.Resubmit{InPort: ofwire.InPortUnchanged, Table: TableAffinity}) {
		t.Fatalf("table 1 new flow: %v", newFlows[0])
	}
	// Table 4: only the empty default (learned flows are the switch's).
	t4 := flowsIn(d, TableAffinity)
	if len(t4) != 1 || len(t4[KindAffinityNone]) != 1 || t4[KindAffinityNone][0].Instructions != "" {
		t.Fatalf("table 4 planned flows: %v", t4)
	}
	// Table 5: a hit flow per backend with a bucket (a, b: c is unresolved, d at weight 0),
	// and the group flow.
	t5 := flowsIn(d, TableAffinityPick)
	var hits []uint16
	for _, f := range t5[KindAffinityHit] {
		_, b, _, _ := ParseCookie(f.Cookie)
		hits = append(hits, b)
		acts, _ := actionsOf(t, f)
		tag, ok := acts[0].(*ofp.ActionSetField)
		if !ok || len(acts) != 2 || tag.Field.Type != ofwire.RegMatch(regAffinityService, 0).Type {
			t.Fatalf("hit flow of backend %d: %#v, want the service's tag in reg2, then a commit", b, acts)
		}
		ct := acts[1].(*ofwire.CT)
		if ct.Table != TableAffinityCount || ct.Flags != ofwire.CTCommit {
			t.Errorf("hit flow of backend %d: %#v, want a commit recirculating to table 8", b, ct)
		}
	}
	if !slices.Equal(hits, []uint16{0, 1}) || len(t5[KindAffinityMiss]) != 1 {
		t.Fatalf("table 5: hits for backends %v, %d group flows; want backends [0 1] and one", hits, len(t5[KindAffinityMiss]))
	}
	// Table 8: a counting flow per backend with a bucket, matching what its hit flow set, on
	// to table 2; and the default.
	t8 := flowsIn(d, TableAffinityCount)
	if len(t8[KindAffinityPinned]) != 2 || len(t8[KindAffinityPinnedNone]) != 1 {
		t.Fatalf("table 8: %v", t8)
	}
	for _, f := range t8[KindAffinityPinned] {
		acts, _ := actionsOf(t, f)
		if len(acts) != 1 || *acts[0].(*ofwire.Resubmit) != (ofwire.Resubmit{InPort: ofwire.InPortUnchanged, Table: TableForward}) {
			t.Errorf("table 8 flow %v: want resubmit(,2)", f)
		}
	}
	// Table 6: a learn flow per backend with a bucket, and the default.
	t6 := flowsIn(d, TableAffinityLearn)
	if len(t6[KindAffinityLearn]) != 2 || len(t6[KindAffinityLearnNone]) != 1 {
		t.Fatalf("table 6: %v", t6)
	}
	f := t6[KindAffinityLearn][0]
	acts, _ = actionsOf(t, f)
	l, ok := acts[0].(*ofwire.Learn)
	if !ok || len(acts) != 2 || *acts[1].(*ofwire.Resubmit) != (ofwire.Resubmit{InPort: ofwire.InPortUnchanged, Table: TableForward}) {
		t.Fatalf("table 6 learn flow actions %#v, want learn then resubmit(,2)", acts)
	}
	if l.Table != TableAffinity || l.IdleTimeout != 3 || l.HardTimeout != 0 || l.Cookie != MakeCookie(1, 0, KindAffinity) || l.Priority != PriorityAffinity {
		t.Errorf("learn %+v: want table 4, idle 3, no hard timeout, cookie of service 1 backend 0", l)
	}
	// The learned flow matches the VIP and the service port (pre-NAT), and loads backend a.
	want := []ofwire.LearnSpec{
		ofwire.LearnMatchValue(ofwire.NXMIPDst, 32, 0x0a000064),
		ofwire.LearnMatchValue(ofwire.NXMTCPDst, 16, 80),
		ofwire.LearnLoadValue(0x0a000001, 32, ofwire.NXMReg(0), 0),
		ofwire.LearnLoadValue(8080, 32, ofwire.NXMReg(1), 0),
	}
	for _, w := range want {
		if !slices.ContainsFunc(l.Specs, func(s ofwire.LearnSpec) bool {
			return s.Dst == w.Dst && s.DstField == w.DstField && bytes.Equal(s.Imm, w.Imm)
		}) {
			t.Errorf("learn lacks %+v: %+v", w, l.Specs)
		}
	}
	// Buckets tag the service and recirculate to table 6.
	for _, b := range d.Groups[0].Buckets {
		acts, err := ofwire.ParseActions([]byte(b.Actions))
		if err != nil {
			t.Fatal(err)
		}
		sf, ok := acts[0].(*ofp.ActionSetField)
		if len(acts) != 2 || !ok || sf.Field.Class != ofp.XMClassNicira1 || sf.Field.Type != 2 || !bytes.Equal(sf.Field.Value, []byte{0, 0, 0, 2}) {
			t.Fatalf("bucket %#v: want set_field:2->reg2 first", acts)
		}
		if ct := acts[1].(*ofwire.CT); ct.Table != TableAffinityLearn {
			t.Fatalf("bucket ct recirculates to %d, want table 6", ct.Table)
		}
	}
}

func TestAffinityOffAddsNothing(t *testing.T) {
	d := Desired([]Service{webService(ModeConntrack)}, DefaultOptions())
	for _, f := range d.Flows {
		if f.Table >= TableAffinity {
			t.Errorf("affinity off, yet %v", f)
		}
	}
	for _, b := range d.Groups[0].Buckets {
		if strings.Contains(b.Actions, string([]byte{0x00, 0x01, 0x04, 0x04})) {
			t.Errorf("affinity off, yet a bucket sets reg2: %x", b.Actions)
		}
	}
}

func TestAffinityStatelessRefused(t *testing.T) {
	s := webService(ModeStateless)
	s.AffinityTimeout = 10
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "affinity_timeout") || !strings.Contains(err.Error(), "conntrack") {
		t.Fatalf("Validate = %v, want an error naming affinity_timeout and conntrack mode", err)
	}
	if d := Desired([]Service{s}, DefaultOptions()); len(d.Groups) != 0 {
		t.Fatalf("an invalid service was planned: %v", d)
	}
}

// learnedFlow is a flow as the switch's learn action would write it for client cl.
func learnedFlow(t *testing.T, backend uint16, client string) Flow {
	t.Helper()
	return Flow{Table: TableAffinity, Priority: PriorityAffinity, Cookie: MakeCookie(1, backend, KindAffinity), IdleTimeout: 3,
		Match: mustMatch(t, ethType(0x0800), xm(ofp.XMTypeIPProto, []byte{6}), xm(ofp.XMTypeIPv4Src, ip(client).AsSlice()),
			xm(ofp.XMTypeIPv4Dst, ip("10.0.0.100").AsSlice()), xm(ofp.XMTypeTCPDst, port16(80))),
		Instructions: encodeInstructions(apply(setField32(0, 0x0a000001+uint32(backend)), setField32(1, 8080)))}
}

// TestLearnedFlowsAreNotDrift: learned flows carry our cookie magic, so an OwnFlowsRequest
// returns them; read-back drops them, Plan never deletes them, and AffinityDelete removes
// exactly one backend's.
func TestLearnedFlowsAreNotDrift(t *testing.T) {
	d := Desired([]Service{affinityService()}, DefaultOptions())
	sw := NewFakeSwitch()
	applyAll(t, sw, Plan(d, State{}))
	learned := []Flow{learnedFlow(t, 0, "10.9.0.1"), learnedFlow(t, 0, "10.9.0.2"), learnedFlow(t, 1, "10.9.0.3")}
	var adds []ofswitch.Message
	for _, f := range learned {
		adds = append(adds, flowMessage(ofp.FlowAdd, f))
	}
	applyAll(t, sw, [][]ofswitch.Message{adds})

	body, err := sw.FlowStatsReply(CookieMagic, CookieMask)
	if err != nil {
		t.Fatal(err)
	}
	flows, err := DecodeFlowStats(body)
	if err != nil {
		t.Fatal(err)
	}
	cur := State{Flows: flows, Groups: sw.State().Groups}.Canonical()
	if len(cur.Flows) != len(d.Flows)+len(learned) {
		t.Fatalf("read back %d flows, want %d planned + %d learned", len(cur.Flows), len(d.Flows), len(learned))
	}
	if !cur.WithoutLearned().Equal(d) {
		t.Fatal("read-back without learned flows differs from desired")
	}
	if stages := Plan(d, cur); len(stages) != 0 {
		t.Fatalf("plan against a switch with learned flows: %s", describe(stages))
	}
	applyAll(t, sw, [][]ofswitch.Message{{AffinityDelete(1, 0)}})
	left := sw.State().Flows
	for _, f := range learned {
		_, b, _, _ := ParseCookie(f.Cookie)
		if got := slices.Contains(left, f); got != (b == 1) {
			t.Errorf("after deleting backend 0's affinities, learned flow of backend %d present = %v", b, got)
		}
	}
	if !(State{Flows: left, Groups: sw.State().Groups}).Canonical().WithoutLearned().Equal(d) {
		t.Error("AffinityDelete touched a planned flow")
	}
}
