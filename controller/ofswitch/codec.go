package ofswitch

import (
	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

// The bytes are controller/ofwire's; these names keep the session's API as its callers know it.

// PacketIn is a decoded OFPT_PACKET_IN, as a Handler receives it.
type PacketIn = ofwire.PacketIn

// RoleReply is a role the switch confirmed for this session: from the ROLE_REPLY to
// RequestRole, or from a role-status message the switch sent on its own.
type RoleReply = ofwire.RoleReply

// ErrMalformed marks a message from the switch that cannot be decoded (ofwire.ErrMalformed).
var ErrMalformed = ofwire.ErrMalformed

// RoleName is the OpenFlow name of a controller role ("OFPCR_ROLE_MASTER").
func RoleName(r ofp.ControllerRole) string { return ofwire.RoleName(r) }
