package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"flowweight/controller/ofswitch"
	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// flowID is what a test can say about a flow without restating its bytes.
type flowID struct {
	table            uint8
	kind             Kind
	service, backend uint16
}

func flowIDs(t *testing.T, s State) []flowID {
	t.Helper()
	var out []flowID
	for _, f := range s.Flows {
		svc, be, k, ok := ParseCookie(f.Cookie)
		if !ok {
			t.Fatalf("planned flow with a foreign cookie: %v", f)
		}
		if f.HardTimeout != 0 || f.IdleTimeout != 0 {
			t.Fatalf("planned flow with a timeout: %v", f)
		}
		out = append(out, flowID{f.Table, k, svc, be})
	}
	slices.SortFunc(out, func(a, b flowID) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	return out
}

func sortedIDs(ids ...flowID) []flowID {
	slices.SortFunc(ids, func(a, b flowID) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return ids
}

const X = NoIndex

func conntrackShared() []flowID {
	return []flowID{{TableCT, KindEst, X, X}, {TableCT, KindRel, X, X}, {TableReturn, KindReturnNormal, X, X}}
}

func withBackends(s Service, mut func(b *Backend)) Service {
	s.Backends = slices.Clone(s.Backends)
	for i := range s.Backends {
		mut(&s.Backends[i])
	}
	return s
}

func TestDesired(t *testing.T) {
	ct := webService(ModeConntrack)
	sl := webService(ModeStateless)
	udp := webService(ModeConntrack)
	udp.Protocol = "udp"
	other := webService(ModeConntrack)
	other.Name, other.Index, other.Port, other.GroupID = "web-tls", 2, 443, 11
	bad := webService(ModeConntrack)
	bad.Name, bad.Index, bad.VIP = "bad", 3, ip("fd00::1")

	ctPerService := func(svc uint16, backends ...uint16) []flowID {
		ids := []flowID{{TableClassify, KindARP, svc, X}, {TableClassify, KindVIP, svc, X}, {TableCT, KindNew, svc, X}, {TableReturn, KindReturnVIP, svc, X}}
		for _, b := range backends {
			ids = append(ids, flowID{TableForward, KindForward, svc, b}, flowID{TableClassify, KindReturn, svc, b})
		}
		return ids
	}
	cases := []struct {
		name     string
		services []Service
		opt      Options
		flows    []flowID
		weights  map[uint32][]uint16 // group id → bucket weights
	}{
		{
			name: "conntrack", services: []Service{ct}, opt: DefaultOptions(),
			flows:   append(append(ctPerService(1, 0, 1), conntrackShared()...), flowID{TableClassify, KindNormal, X, X}),
			weights: map[uint32][]uint16{10: {42, 21, 1}}, // 64 slots: 43/21, one of a's to the extra
		},
		{
			name: "conntrack without NORMAL", services: []Service{ct}, opt: Options{},
			flows:   append(ctPerService(1, 0, 1), conntrackShared()...),
			weights: map[uint32][]uint16{10: {42, 21, 1}}, // 64 slots: 43/21, one of a's to the extra
		},
		{
			name: "stateless", services: []Service{sl}, opt: DefaultOptions(),
			flows: []flowID{{TableClassify, KindARP, 1, X}, {TableClassify, KindVIP, 1, X},
				{TableClassify, KindReturn, 1, 0}, {TableClassify, KindReturn, 1, 1}, {TableClassify, KindNormal, X, X}},
			weights: map[uint32][]uint16{10: ones(64)},
		},
		{
			// 256 slots from 2.17: 170.7/85.3 round to 171/85, and one slot of a moves to
			// the extra bucket so the switch builds 256 slots.
			name: "conntrack on Open vSwitch 3.1.0", services: []Service{ct}, opt: Options{OVS: OVSVersion{Major: 3, Minor: 1, Patch: 0}},
			flows:   append(ctPerService(1, 0, 1), conntrackShared()...),
			weights: map[uint32][]uint16{10: {170, 85, 1}},
		},
		{
			name: "stateless on Open vSwitch 3.1.0", services: []Service{sl}, opt: Options{OVS: OVSVersion{Major: 3, Minor: 1, Patch: 0}},
			flows: []flowID{{TableClassify, KindARP, 1, X}, {TableClassify, KindVIP, 1, X},
				{TableClassify, KindReturn, 1, 0}, {TableClassify, KindReturn, 1, 1}},
			weights: map[uint32][]uint16{10: ones(256)},
		},
		{
			name: "weight zero keeps the backend's flows, drops its bucket", opt: Options{},
			services: []Service{withBackends(ct, func(b *Backend) {
				if b.Index == 0 {
					b.Weight = 0
				}
			})},
			flows:   append(ctPerService(1, 0, 1), conntrackShared()...),
			weights: map[uint32][]uint16{10: {64}}, // one bucket needs no extra one
		},
		{
			name: "no reachable backend: empty group, no backend flows", opt: Options{},
			services: []Service{withBackends(ct, func(b *Backend) { b.SwitchPort = 0 })},
			flows:    append(ctPerService(1), conntrackShared()...),
			weights:  map[uint32][]uint16{10: nil},
		},
		{
			name: "udp", services: []Service{udp}, opt: Options{},
			flows:   append(ctPerService(1, 0, 1), conntrackShared()...),
			weights: map[uint32][]uint16{10: {42, 21, 1}}, // 64 slots: 43/21, one of a's to the extra
		},
		{
			// Backend a listens on 8080 for both, so its return flow is shared; b uses the
			// service port, so the TLS service has its own return flow for b on 443.
			name: "two services on one VIP share ARP, return-vip and backend flows", opt: Options{},
			services: []Service{other, ct},
			flows: append(append(ctPerService(1, 0, 1), conntrackShared()...),
				flowID{TableClassify, KindVIP, 2, X}, flowID{TableCT, KindNew, 2, X}, flowID{TableClassify, KindReturn, 2, 1}),
			weights: map[uint32][]uint16{10: {42, 21, 1}, 11: {42, 21, 1}},
		},
		{
			name: "invalid service is left out", services: []Service{bad, sl}, opt: Options{},
			flows: []flowID{{TableClassify, KindARP, 1, X}, {TableClassify, KindVIP, 1, X},
				{TableClassify, KindReturn, 1, 0}, {TableClassify, KindReturn, 1, 1}},
			weights: map[uint32][]uint16{10: ones(64)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Desired(tc.services, tc.opt)
			if got, want := flowIDs(t, d), sortedIDs(tc.flows...); !reflect.DeepEqual(got, want) {
				t.Errorf("flows\n got %v\nwant %v", got, want)
			}
			got := map[uint32][]uint16{}
			for _, g := range d.Groups {
				if g.Type != ofp.GroupTypeSelect {
					t.Errorf("group %d type %d, want select", g.ID, g.Type)
				}
				got[g.ID] = weightsOf(g)
				if len(got[g.ID]) == 0 {
					got[g.ID] = nil
				}
			}
			if !reflect.DeepEqual(got, tc.weights) {
				t.Errorf("group weights %v, want %v", got, tc.weights)
			}
			if !d.Equal(d.Canonical()) {
				t.Error("Desired is not in canonical order")
			}
			if again := Desired(tc.services, tc.opt); !again.Equal(d) {
				t.Error("Desired is not deterministic")
			}
		})
	}
}

// TestBucketActions checks the meaning of the bucket bytes for both modes.
func TestBucketActions(t *testing.T) {
	cases := []struct {
		mode Mode
		want []ofp.Actions
	}{
		{ModeConntrack, []ofp.Actions{
			{&ofwire.CT{Flags: ofwire.CTCommit, Zone: 7, Table: TableForward, Actions: ofp.Actions{&ofwire.NAT{Flags: ofwire.NATDst, IPMin: ip("10.0.0.1"), PortMin: 8080}}}},
			{&ofwire.CT{Flags: ofwire.CTCommit, Zone: 7, Table: TableForward, Actions: ofp.Actions{&ofwire.NAT{Flags: ofwire.NATDst, IPMin: ip("10.0.0.2"), PortMin: 80}}}},
		}},
		{ModeStateless, []ofp.Actions{
			{setField(ofp.XMTypeEthDst, mac("02:00:00:00:00:01")), setField(ofp.XMTypeIPv4Dst, ip("10.0.0.1").AsSlice()),
				setField(ofp.XMTypeTCPDst, port16(8080)), output(1, 0)},
			{setField(ofp.XMTypeEthDst, mac("02:00:00:00:00:02")), setField(ofp.XMTypeIPv4Dst, ip("10.0.0.2").AsSlice()), output(2, 0)},
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			d := Desired([]Service{webService(tc.mode)}, Options{})
			if len(d.Groups) != 1 {
				t.Fatalf("groups %v, want one", d.Groups)
			}
			acts := distinctActions(d.Groups[0])
			if len(acts) != len(tc.want) {
				t.Fatalf("group %v has %d distinct bucket actions, want %d", d.Groups[0], len(acts), len(tc.want))
			}
			for i, b := range acts {
				got, err := ofwire.ParseActions([]byte(b))
				if err != nil {
					t.Fatalf("bucket %d: %v", i, err)
				}
				if !reflect.DeepEqual(got, tc.want[i]) {
					t.Errorf("bucket %d actions %#v, want %#v", i, got, tc.want[i])
				}
			}
		})
	}
}

func ones(n int) []uint16 {
	w := make([]uint16, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

// distinctActions lists a group's bucket actions in order of first appearance: a backend can
// have several buckets (the extra one-slot bucket, or one bucket per slot in stateless mode).
func distinctActions(g Group) []string {
	var out []string
	for _, b := range g.Buckets {
		if !slices.Contains(out, b.Actions) {
			out = append(out, b.Actions)
		}
	}
	return out
}

// applyAll applies a plan to the fake and fails on any rejection.
func applyAll(t *testing.T, sw *FakeSwitch, stages [][]ofswitch.Message) {
	t.Helper()
	if err := sw.ApplyPlan(stages); err != nil {
		t.Fatalf("switch rejected the plan: %v", err)
	}
}

func scenarios() map[string][]Service {
	two := webService(ModeConntrack)
	two.Name, two.Index, two.VIP, two.GroupID, two.Zone = "api", 2, ip("10.0.0.200"), 20, 8
	return map[string][]Service{
		"conntrack":      {webService(ModeConntrack)},
		"stateless":      {webService(ModeStateless)},
		"mixed":          {webService(ModeStateless), two},
		"empty":          nil,
		"all unresolved": {withBackends(webService(ModeConntrack), func(b *Backend) { b.MAC = nil })},
		"ipv6 conntrack": {webService6(ModeConntrack)},
		"ipv6 stateless": {webService6(ModeStateless)},
		"dual stack":     {webService(ModeConntrack), webService6(ModeStateless)},
		"affinity":       {affinityService(), two},
	}
}

func TestPlanFromEmptyIsIdempotent(t *testing.T) {
	for name, services := range scenarios() {
		for _, opt := range []Options{{}, DefaultOptions()} {
			t.Run(fmt.Sprintf("%s/normal=%v", name, opt.Normal), func(t *testing.T) {
				d := Desired(services, opt)
				sw := NewFakeSwitch()
				stages := Plan(d, State{})
				applyAll(t, sw, stages)
				if got := sw.State(); !got.Equal(d) {
					t.Fatalf("switch holds\n%v\nwant\n%v", got, d)
				}
				if again := Plan(d, sw.State()); len(again) != 0 {
					t.Fatalf("second plan is not empty: %v", describe(again))
				}
				if n := countMessages(stages); n != len(d.Flows)+len(d.Groups) {
					t.Errorf("plan from empty has %d messages, want one per flow and group (%d)", n, len(d.Flows)+len(d.Groups))
				}
			})
		}
	}
}

func countMessages(stages [][]ofswitch.Message) int {
	n := 0
	for _, s := range stages {
		n += len(s)
	}
	return n
}

func describe(stages [][]ofswitch.Message) string {
	var b strings.Builder
	for i, s := range stages {
		for _, m := range s {
			fmt.Fprintf(&b, "\n  stage %d: %s", i, m.Desc)
		}
	}
	return b.String()
}

// bodyOf returns the planned body of a message.
func groupModOf(t *testing.T, m ofswitch.Message) *ofwire.GroupMod {
	t.Helper()
	g, ok := m.Body.(*ofwire.GroupMod)
	if !ok || m.Type != of.TypeGroupMod {
		t.Fatalf("message %q is %v %T, want a group mod", m.Desc, m.Type, m.Body)
	}
	return g
}

func TestWeightOnlyChangeIsOneModify(t *testing.T) {
	for _, mode := range []Mode{ModeConntrack, ModeStateless} {
		t.Run(string(mode), func(t *testing.T) {
			before := []Service{webService(mode)}
			sw := NewFakeSwitch()
			applyAll(t, sw, Plan(Desired(before, DefaultOptions()), State{}))
			after := []Service{withBackends(before[0], func(b *Backend) { b.Weight += 7 * (b.Index + 1) })}
			d := Desired(after, DefaultOptions())
			stages := Plan(d, sw.State())
			if len(stages) != 1 || len(stages[0]) != 1 {
				t.Fatalf("plan %s, want exactly one message", describe(stages))
			}
			gm := groupModOf(t, stages[0][0])
			if gm.Command != ofp.GroupModify || gm.Group.ID != 10 {
				t.Fatalf("message %q, want a modify of group 10", stages[0][0].Desc)
			}
			if !gm.Group.Equal(d.Groups[0]) {
				t.Fatalf("modify carries group %v, want the whole desired group %v", gm.Group, d.Groups[0])
			}
			applyAll(t, sw, stages)
			if !sw.State().Equal(d) {
				t.Fatal("switch does not hold the new weights")
			}
		})
	}
}

func TestRemoveBackend(t *testing.T) {
	for _, mode := range []Mode{ModeConntrack, ModeStateless} {
		t.Run(string(mode), func(t *testing.T) {
			s := webService(mode)
			sw := NewFakeSwitch()
			applyAll(t, sw, Plan(Desired([]Service{s}, DefaultOptions()), State{}))
			s.Backends = slices.DeleteFunc(slices.Clone(s.Backends), func(b Backend) bool { return b.Index == 1 })
			d := Desired([]Service{s}, DefaultOptions())
			stages := Plan(d, sw.State())
			applyAll(t, sw, stages)
			for _, id := range flowIDs(t, sw.State()) {
				if id.service == 1 && id.backend == 1 {
					t.Errorf("flow %v of the removed backend is still installed", id)
				}
			}
			if g := sw.State().Groups; len(g) != 1 || len(distinctActions(g[0])) != 1 {
				t.Errorf("groups %v, want one backend's buckets left", g)
			}
			if !sw.State().Equal(d) || len(Plan(d, sw.State())) != 0 {
				t.Errorf("after removal the switch differs from desired: %s", describe(Plan(d, sw.State())))
			}
			for _, m := range slices.Concat(stages...) {
				if fm, ok := m.Body.(*ofwire.FlowMod); ok && fm.Command == ofp.FlowDeleteStrict && fm.CookieMask != ^uint64(0) {
					t.Errorf("delete %q does not match the exact cookie", m.Desc)
				}
			}
		})
	}
}

func TestRemoveService(t *testing.T) {
	services := scenarios()["mixed"]
	sw := NewFakeSwitch()
	applyAll(t, sw, Plan(Desired(services, DefaultOptions()), State{}))
	d := Desired(services[1:], DefaultOptions()) // drop "web" (index 1, group 10)
	stages := Plan(d, sw.State())
	applyAll(t, sw, stages)
	for _, id := range flowIDs(t, sw.State()) {
		if id.service == 1 {
			t.Errorf("flow %v of the removed service is still installed", id)
		}
	}
	for _, g := range sw.State().Groups {
		if g.ID == 10 {
			t.Errorf("group 10 of the removed service is still installed")
		}
	}
	last := stages[len(stages)-1]
	if len(last) != 1 || groupModOf(t, last[0]).Command != ofp.GroupDelete {
		t.Errorf("last stage %s, want the group delete alone", describe(stages[len(stages)-1:]))
	}
	if !sw.State().Equal(d) {
		t.Error("switch differs from desired after removing a service")
	}
}

// TestStageOrder checks the documented order and that no stage uses a group before the stage
// that creates it; the fake switch also enforces the latter by rejecting such flows.
func TestStageOrder(t *testing.T) {
	rank := func(t *testing.T, m ofswitch.Message) int {
		switch b := m.Body.(type) {
		case *ofwire.GroupMod:
			return map[ofp.GroupCommand]int{ofp.GroupAdd: 0, ofp.GroupModify: 1, ofp.GroupDelete: 4}[b.Command]
		case *ofwire.FlowMod:
			return map[ofp.FlowModCommand]int{ofp.FlowAdd: 2, ofp.FlowDeleteStrict: 3}[b.Command]
		}
		t.Fatalf("unexpected message %q", m.Desc)
		return -1
	}
	sw := NewFakeSwitch()
	applyAll(t, sw, Plan(Desired(scenarios()["mixed"], DefaultOptions()), State{}))
	// A change touching every stage: one service removed, one added, weights changed.
	next := []Service{withBackends(scenarios()["mixed"][1], func(b *Backend) { b.Weight += 50 * b.Index }), webService(ModeConntrack)}
	next[1].Name, next[1].Index, next[1].GroupID, next[1].VIP = "new", 5, 50, ip("10.0.0.50")
	stages := Plan(Desired(next, DefaultOptions()), sw.State())
	if len(stages) != 5 {
		t.Fatalf("plan has %d stages, want all 5: %s", len(stages), describe(stages))
	}
	for i, s := range stages {
		for _, m := range s {
			if r := rank(t, m); r != i {
				t.Errorf("stage %d holds %q, which belongs in stage %d", i, m.Desc, r)
			}
		}
	}
	applyAll(t, sw, stages)

	// Reversed, the flows come before their group: the switch must refuse them.
	sw = NewFakeSwitch()
	plan := Plan(Desired(scenarios()["conntrack"], DefaultOptions()), State{})
	slices.Reverse(plan)
	err := sw.ApplyPlan(plan)
	var ofe *OFError
	if !errors.As(err, &ofe) || ofe.Type != ErrTypeBadAction || ofe.Code != CodeBadOutGroup {
		t.Fatalf("flows before their group: error %v, want BAD_ACTION/BAD_OUT_GROUP", err)
	}
}

func TestModeChange(t *testing.T) {
	sw := NewFakeSwitch()
	applyAll(t, sw, Plan(Desired(scenarios()["conntrack"], DefaultOptions()), State{}))
	d := Desired(scenarios()["stateless"], DefaultOptions())
	applyAll(t, sw, Plan(d, sw.State()))
	if !sw.State().Equal(d) || len(Plan(d, sw.State())) != 0 {
		t.Fatalf("conntrack → stateless did not converge: %s", describe(Plan(d, sw.State())))
	}
}

// TestReadBack runs the read-back path: the fake encodes replies as a switch would,
// DecodeGroupDesc/DecodeFlowStats turn them back into the state, and drift made by someone
// else is repaired by the next plan while foreign flows are left alone.
func TestReadBack(t *testing.T) {
	d := Desired(scenarios()["mixed"], DefaultOptions())
	sw := NewFakeSwitch()
	applyAll(t, sw, Plan(d, State{}))
	foreign := Flow{Table: 0, Priority: 5, Cookie: 0x1234, Match: mustMatch(t, ethType(0x86dd)), Instructions: encodeInstructions(apply(output(ofp.PortNormal, 0)))}
	applyAll(t, sw, [][]ofswitch.Message{{flowMessage(ofp.FlowAdd, foreign)}})
	// Someone runs `ovs-ofctl mod-group` with other weights.
	drift := d.Groups[0]
	drift.Buckets = slices.Clone(drift.Buckets)
	drift.Buckets[0].Weight = 2
	applyAll(t, sw, [][]ofswitch.Message{{groupMessage(ofp.GroupModify, drift)}})

	read := func() State {
		gd, err := sw.GroupDescReply()
		if err != nil {
			t.Fatal(err)
		}
		fs, err := sw.FlowStatsReply(CookieMagic, CookieMask)
		if err != nil {
			t.Fatal(err)
		}
		var s State
		if s.Groups, err = DecodeGroupDesc(gd); err != nil {
			t.Fatalf("DecodeGroupDesc: %v", err)
		}
		if s.Flows, err = DecodeFlowStats(fs); err != nil {
			t.Fatalf("DecodeFlowStats: %v", err)
		}
		return s
	}
	cur := read()
	if !slices.Equal(cur.Flows, d.Flows) {
		t.Fatalf("read-back flows differ from desired:\n%v\n%v", cur.Flows, d.Flows)
	}
	stages := Plan(d, cur)
	if len(stages) != 1 || len(stages[0]) != 1 || groupModOf(t, stages[0][0]).Command != ofp.GroupModify {
		t.Fatalf("drift repair plan %s, want one group modify", describe(stages))
	}
	applyAll(t, sw, stages)
	if cur = read(); !cur.Equal(d) {
		t.Fatal("read-back after repair differs from desired")
	}
	// Plan never deletes a flow without our cookie, even if handed one.
	withForeign := State{Flows: append(slices.Clone(cur.Flows), foreign), Groups: cur.Groups}
	if stages := Plan(d, withForeign); len(stages) != 0 {
		t.Fatalf("plan touches a foreign flow: %s", describe(stages))
	}
	if !slices.Contains(sw.State().Flows, foreign) {
		t.Fatal("foreign flow disappeared from the switch")
	}
}

func mustMatch(t *testing.T, f ...ofp.XM) string {
	t.Helper()
	m, err := ofwire.EncodeFields(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDecodeFlowStatsCanonicalMatch: a switch may emit match fields in any order.
func TestDecodeFlowStatsCanonicalMatch(t *testing.T) {
	fields := toVIP(webService(ModeConntrack))
	var raw []byte
	for i := len(fields) - 1; i >= 0; i-- { // reverse of our order
		m, err := ofwire.EncodeFields(fields[i : i+1])
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, m...)
	}
	f := Flow{Table: 1, Priority: 9, Cookie: MakeCookie(1, X, KindVIP), Match: string(raw), Instructions: encodeInstructions(gotoTable(2))}
	body, err := EncodeFlowStats([]Flow{f})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeFlowStats(body)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustMatch(t, fields...); len(got) != 1 || got[0].Match != want {
		t.Fatalf("decoded match %x, want canonical %x", got[0].Match, want)
	}
}

func TestFakeSwitchRejects(t *testing.T) {
	g := Group{ID: 3, Type: ofp.GroupTypeSelect, Buckets: []Bucket{{Weight: 1, Actions: encodeActions(ofp.Actions{output(1, 0)})}}}
	toGroup := func(id uint32) Flow {
		return Flow{Table: 0, Priority: 1, Cookie: MakeCookie(1, X, KindVIP), Match: mustMatch(t, ethType(0x0800)),
			Instructions: encodeInstructions(apply(&ofp.ActionGroup{Group: ofp.Group(id)}))}
	}
	backwards := Flow{Table: 2, Priority: 1, Cookie: MakeCookie(1, X, KindEst), Instructions: encodeInstructions(gotoTable(1))}
	cases := []struct {
		name       string
		setup, msg []ofswitch.Message
		typ, code  uint16
	}{
		{"add existing group", []ofswitch.Message{groupMessage(ofp.GroupAdd, g)}, []ofswitch.Message{groupMessage(ofp.GroupAdd, g)}, ErrTypeGroupModFailed, CodeGroupExists},
		{"modify missing group", nil, []ofswitch.Message{groupMessage(ofp.GroupModify, g)}, ErrTypeGroupModFailed, CodeUnknownGroup},
		{"flow to missing group", []ofswitch.Message{groupMessage(ofp.GroupAdd, g)}, []ofswitch.Message{flowMessage(ofp.FlowAdd, toGroup(4))}, ErrTypeBadAction, CodeBadOutGroup},
		{"goto backwards", nil, []ofswitch.Message{flowMessage(ofp.FlowAdd, backwards)}, ErrTypeBadInstruction, CodeBadTableID},
		{"reserved group id", nil, []ofswitch.Message{groupMessage(ofp.GroupAdd, Group{ID: 0xfffffffc, Type: ofp.GroupTypeSelect})}, ErrTypeGroupModFailed, CodeInvalidGroup},
		{"unmodelled message", nil, []ofswitch.Message{{Type: of.TypePortMod, Desc: "port mod"}}, ErrTypeBadRequest, CodeBadType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sw := NewFakeSwitch()
			if err := sw.Apply(tc.setup); err != nil {
				t.Fatal(err)
			}
			before := sw.State()
			err := sw.Apply(tc.msg)
			var ofe *OFError
			if !errors.As(err, &ofe) || ofe.Type != tc.typ || ofe.Code != tc.code {
				t.Fatalf("error %v, want type %d code %d", err, tc.typ, tc.code)
			}
			if ofe.Desc != tc.msg[0].Desc {
				t.Errorf("error names %q, want the message %q", ofe.Desc, tc.msg[0].Desc)
			}
			if !sw.State().Equal(before) {
				t.Error("a rejected message changed the switch")
			}
		})
	}
	// Deleting a group takes the flows that use it along, as Open vSwitch does.
	sw := NewFakeSwitch()
	if err := sw.Apply([]ofswitch.Message{groupMessage(ofp.GroupAdd, g), flowMessage(ofp.FlowAdd, toGroup(3)), groupMessage(ofp.GroupDelete, g)}); err != nil {
		t.Fatal(err)
	}
	if s := sw.State(); len(s.Flows) != 0 || len(s.Groups) != 0 {
		t.Fatalf("after group delete the switch holds %v", s)
	}
}

func TestValidate(t *testing.T) {
	good := webService(ModeConntrack)
	cases := []struct {
		name string
		mut  func(s *Service)
		want string
	}{
		{"ok", func(s *Service) {}, ""},
		{"ipv6 vip, ipv4 backends", func(s *Service) { s.VIP = ip("fd00::1") }, `backend "a": ip 10.0.0.1 is not of the family of vip fd00::1`},
		{"ipv4-mapped vip", func(s *Service) { s.VIP = ip("::ffff:10.0.0.100") }, "vip ::ffff:10.0.0.100 is neither an IPv4 nor a plain IPv6"},
		{"no mac", func(s *Service) { s.VIPMAC = nil }, "vip mac"},
		{"protocol", func(s *Service) { s.Protocol = "sctp" }, `protocol "sctp"`},
		{"port", func(s *Service) { s.Port = 0 }, "port is 0"},
		{"mode", func(s *Service) { s.Mode = "magic" }, `mode "magic"`},
		{"group", func(s *Service) { s.GroupID = 0xfffffffc }, "group id 4294967292"},
		{"reserved index", func(s *Service) { s.Index = NoIndex }, "index 0xffff is reserved"},
		{"duplicate backend index", func(s *Service) { s.Backends[1].Index = 0 }, `backend "b": index 0 used twice`},
		{"backend ip", func(s *Service) { s.Backends[2].IP = ip("fd00::3") }, `backend "c": ip`},
		{"backend port", func(s *Service) { s.Backends[0].SwitchPort = 0xfffffffd }, `backend "a": switch port`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			s.Backends = slices.Clone(good.Backends)
			tc.mut(&s)
			err := s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `service "web"`) {
				t.Fatalf("Validate error %v, want one naming the service and %q", err, tc.want)
			}
		})
	}
	dup := webService(ModeStateless)
	err := ValidateServices([]Service{good, dup})
	for _, want := range []string{"index 1 already used", "group id 10 already used", "tcp 10.0.0.100:80 already served"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateServices error %v, want %q", err, want)
		}
	}
	six, dup6 := webService6(ModeConntrack), webService6(ModeStateless)
	dup6.Name, dup6.Index, dup6.GroupID = "web6-again", 4, 31
	if err := ValidateServices([]Service{six, dup6}); err == nil || !strings.Contains(err.Error(), `service "web6-again": tcp [fd00:77::100]:80 already served by "web6"`) {
		t.Errorf("ValidateServices of two IPv6 services on one VIP and port: %v", err)
	}
	if err := ValidateServices([]Service{good, six}); err != nil {
		t.Errorf("an IPv4 and an IPv6 service side by side: %v", err)
	}
}

func TestCookie(t *testing.T) {
	cases := []struct {
		svc, be uint16
		kind    Kind
	}{{1, 2, KindForward}, {NoIndex, NoIndex, KindNormal}, {0, 0, KindARP}, {0xfffe, 0xfffe, Kind(0xffff)}}
	for _, tc := range cases {
		c := MakeCookie(tc.svc, tc.be, tc.kind)
		if c&CookieMask != CookieMagic {
			t.Errorf("cookie %#x lacks the magic", c)
		}
		s, b, k, ok := ParseCookie(c)
		if !ok || s != tc.svc || b != tc.be || k != tc.kind {
			t.Errorf("ParseCookie(%#x) = %d %d %v %v", c, s, b, k, ok)
		}
	}
	if _, _, _, ok := ParseCookie(0x1234); ok {
		t.Error("foreign cookie parsed as ours")
	}
}

func TestDecodeFlowCounters(t *testing.T) {
	d := Desired(scenarios()["conntrack"], Options{})
	body, err := EncodeFlowStats(d.Flows)
	if err != nil {
		t.Fatal(err)
	}
	// Put distinct counters into each entry as a switch would: duration at 4, packets at 32,
	// bytes at 40 of each ofp_flow_stats.
	var want []FlowCounter
	for off, i := 0, 0; off < len(body); i++ {
		n := int(binary.BigEndian.Uint16(body[off:]))
		c := FlowCounter{Cookie: d.Flows[i].Cookie, Table: d.Flows[i].Table, DurationSec: uint32(i + 1), Packets: uint64(10 * (i + 1)), Bytes: uint64(1000 * (i + 1))}
		binary.BigEndian.PutUint32(body[off+4:], c.DurationSec)
		binary.BigEndian.PutUint64(body[off+32:], c.Packets)
		binary.BigEndian.PutUint64(body[off+40:], c.Bytes)
		want = append(want, c)
		off += n
	}
	got, err := DecodeFlowCounters(body)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("counters\n got %v\nwant %v", got, want)
	}
	if flows, err := DecodeFlowStats(body); err != nil || !slices.Equal(flows, d.Flows) {
		t.Fatalf("counters leak into the planned state: %v", err)
	}
}
