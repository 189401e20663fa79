package ofswitch

import (
	"io"

	of "github.com/netrack/openflow"
)

// Message is one OpenFlow request that a plan wants on a switch.
//
// The planner (controller/dataplane) produces Messages and never touches a socket; the
// session here assigns transaction ids, writes them, and maps any OFPT_ERROR back to the
// Message by xid so that the error names what failed (Desc), not just a number.
type Message struct {
	Type of.Type     // e.g. of.TypeGroupMod, of.TypeFlowMod
	Body io.WriterTo // the ofp body, e.g. *ofp.GroupMod; nil for body-less messages
	Desc string      // human description for logs and errors, e.g. `group 10 modify (web)`
}
