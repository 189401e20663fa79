package dataplane

import (
	"fmt"
	"io"

	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

// The planner's side of the codec (controller/ofwire holds the bytes): encoding what Desired
// builds, and reading a switch's reply back into a canonical State.

// ErrMalformed wraps every decoding error of a read-back (ofwire.ErrMalformed).
var ErrMalformed = ofwire.ErrMalformed

// FlowCounter is the traffic a flow has matched. The per-backend flows (KindForward in
// conntrack mode, KindReturn in both) count each backend's packets; select-group bucket
// counters read zero on the userspace datapath (docs/design.md), so these are the ones to use.
type FlowCounter = ofwire.FlowCounter

// OwnFlowsRequest asks for exactly the flows this package plans (cookie magic under
// CookieMask), so read-back never sees, and Plan never deletes, anyone else's flows. Pass it
// to ofswitch's Multipart(ctx, ofp.MultipartTypeFlow, body); the OFPMP_GROUP_DESC request
// has no body (pass nil).
func OwnFlowsRequest() io.WriterTo { return ofwire.FlowStatsRequest(CookieMagic, CookieMask) }

// DecodeGroupDesc decodes an OFPMP_GROUP_DESC reply (ofwire.DecodeGroupDesc) into canonical
// order.
func DecodeGroupDesc(body []byte) ([]Group, error) {
	groups, err := ofwire.DecodeGroupDesc(body)
	if err != nil {
		return nil, err
	}
	return State{Groups: groups}.Canonical().Groups, nil
}

// DecodeFlowStats decodes an OFPMP_FLOW reply (ofwire.DecodeFlowStats) into canonical order,
// so the flows compare equal to Desired's whatever order the switch emits them and their
// match fields in. Counters and durations are not state we plan; DecodeFlowCounters returns
// them.
func DecodeFlowStats(body []byte) ([]Flow, error) {
	wf, err := ofwire.DecodeFlowStats(body)
	if err != nil {
		return nil, err
	}
	flows := make([]Flow, len(wf))
	for i, f := range wf {
		flows[i] = Flow(f)
	}
	return State{Flows: flows}.Canonical().Flows, nil
}

// DecodeFlowCounters decodes the same OFPMP_FLOW reply as DecodeFlowStats into counters,
// in reply order.
func DecodeFlowCounters(body []byte) ([]FlowCounter, error) { return ofwire.DecodeFlowCounters(body) }

// EncodeGroupDesc encodes groups as an OFPMP_GROUP_DESC reply body, as a switch would (the
// fake switches' side of DecodeGroupDesc).
func EncodeGroupDesc(groups []Group) ([]byte, error) { return ofwire.EncodeGroupDesc(groups) }

// EncodeFlowStats encodes flows as an OFPMP_FLOW reply body with zero counters, as a switch
// would (the fake switches' side of DecodeFlowStats).
func EncodeFlowStats(flows []Flow) ([]byte, error) {
	wf := make([]ofwire.Flow, len(flows))
	for i, f := range flows {
		wf[i] = ofwire.Flow(f)
	}
	return ofwire.EncodeFlowStats(wf)
}

// flowMod is the OFPT_FLOW_MOD body of a planned flow.
func flowMod(cmd ofp.FlowModCommand, f Flow, cookieMask uint64) *ofwire.FlowMod {
	return &ofwire.FlowMod{Command: cmd, Flow: ofwire.Flow(f), CookieMask: cookieMask}
}

// encodeInstructions and encodeActions encode what the planner built; the planner builds
// only what encodes, so a failure is a bug here, not an input to handle.
func encodeInstructions(in ofp.Instructions) string {
	b, err := ofwire.AppendInstructions(nil, in)
	if err != nil {
		panic(fmt.Sprintf("dataplane: encoding instructions: %v", err))
	}
	return string(b)
}

func encodeActions(a ofp.Actions) string {
	b, err := ofwire.AppendActions(nil, a)
	if err != nil {
		panic(fmt.Sprintf("dataplane: encoding actions: %v", err))
	}
	return string(b)
}
