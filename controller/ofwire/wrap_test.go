package ofwire

import (
	"bytes"
	"encoding/hex"
	"testing"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// frame wraps a body in an OpenFlow 1.3 header with xid 1.
func frame(t testing.TB, typ of.Type, body []byte) []byte {
	t.Helper()
	b, err := EncodeMessage(typ, 1, RawBody(body))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// flowModHex is an OFPT_FLOW_MOD adding table 0 priority 100 with the given match fields and
// apply-actions, hex encoded for ovs-ofctl ofp-print.
func flowModHex(t testing.TB, fields []ofp.XM, actions ofp.Actions) string {
	t.Helper()
	fm := &ofp.FlowMod{
		Command: ofp.FlowAdd, Priority: 100, Buffer: ofp.NoBuffer,
		OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
		Match:        ofp.Match{Type: ofp.MatchTypeXM, Fields: fields},
		Instructions: ofp.Instructions{&ofp.InstructionApplyActions{Actions: actions}},
	}
	var buf bytes.Buffer
	if _, err := fm.WriteTo(&buf); err != nil {
		t.Fatalf("encoding flow mod: %v", err)
	}
	return hex.EncodeToString(frame(t, of.TypeFlowMod, buf.Bytes()))
}

// groupModHex is an OFPT_GROUP_MOD adding select group 1 with one weight-10 bucket.
func groupModHex(t testing.TB, actions ofp.Actions) string {
	t.Helper()
	gm := &ofp.GroupMod{Command: ofp.GroupAdd, Type: ofp.GroupTypeSelect, Group: 1,
		Buckets: []ofp.Bucket{{Weight: 10, WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny, Actions: actions}}}
	var buf bytes.Buffer
	if _, err := gm.WriteTo(&buf); err != nil {
		t.Fatalf("encoding group mod: %v", err)
	}
	return hex.EncodeToString(frame(t, of.TypeGroupMod, buf.Bytes()))
}
