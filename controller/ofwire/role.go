package ofwire

import (
	"encoding/binary"
	"fmt"

	"github.com/netrack/openflow/ofp"
)

// Controller roles on the wire (OpenFlow 1.3.5 §7.3.9): ROLE_REPLY, and the role status Open
// vSwitch sends on its own when another controller takes MASTER, which reaches an OpenFlow 1.3
// controller as the ONF extension ONFT_ROLE_STATUS. What a session does with them is
// controller/ofswitch's.

const (
	// RoleBodyLen is ofp_role_request / ofp_role_reply: role u32, pad 4, generation_id u64.
	RoleBodyLen = 16
	// onfExperimenter is ONF_VENDOR_ID, and onfRoleStatus the exp_type of ONFT_ROLE_STATUS:
	// OpenFlow 1.4's OFPT_ROLE_STATUS carried in OFPT_EXPERIMENTER to 1.3 controllers (ONF
	// extension 1911, as Open vSwitch sends it; include/openvswitch/ofp-msgs.h).
	onfExperimenter = 0x4f4e4600
	onfRoleStatus   = 1911
	// ExperimenterHeaderLen is what follows ofp_header in an OFPT_EXPERIMENTER message:
	// experimenter u32 and exp_type u32.
	ExperimenterHeaderLen = 8
	// RoleStatusLen is ofp14_role_status after the headers: role u32, reason u8, pad 3,
	// generation_id u64; properties (ofp14_role_prop_header list) may follow.
	RoleStatusLen = 16
)

// RoleReply is a role the switch confirmed for a session: from the ROLE_REPLY to a role
// request, or from a role-status message the switch sent on its own.
type RoleReply struct {
	Role ofp.ControllerRole // EQUAL, MASTER or SLAVE, never NOCHANGE
	// GenerationID is the switch's current master election generation as it reported it.
	// Open vSwitch reports 0xffffffffffffffff while no MASTER or SLAVE request has ever set
	// one; before the switch said anything it is 0.
	GenerationID uint64
}

func (r RoleReply) String() string {
	return fmt.Sprintf("%s generation %d", RoleName(r.Role), r.GenerationID)
}

// RoleName is the OpenFlow name of a controller role ("OFPCR_ROLE_MASTER"), or
// "OFPCR_ROLE(n)" for a value the spec does not define.
func RoleName(r ofp.ControllerRole) string {
	switch r {
	case ofp.ControllerRoleNoChange:
		return "OFPCR_ROLE_NOCHANGE"
	case ofp.ControllerRoleEqual:
		return "OFPCR_ROLE_EQUAL"
	case ofp.ControllerRoleMaster:
		return "OFPCR_ROLE_MASTER"
	case ofp.ControllerRoleSlave:
		return "OFPCR_ROLE_SLAVE"
	}
	return fmt.Sprintf("OFPCR_ROLE(%d)", uint32(r))
}

// ValidRole reports whether r is a role a switch can confirm.
func ValidRole(r ofp.ControllerRole) bool {
	return r == ofp.ControllerRoleEqual || r == ofp.ControllerRoleMaster || r == ofp.ControllerRoleSlave
}

// ParseRoleReply decodes an ofp_role_reply body: exactly 16 bytes, a role a switch can
// confirm (NOCHANGE is only for requests).
func ParseRoleReply(body []byte) (RoleReply, error) {
	if len(body) != RoleBodyLen {
		return RoleReply{}, fmt.Errorf("%w: ROLE_REPLY body is %d bytes, want %d", ErrMalformed, len(body), RoleBodyLen)
	}
	r := ofp.ControllerRole(binary.BigEndian.Uint32(body[0:4]))
	if !ValidRole(r) {
		return RoleReply{}, fmt.Errorf("%w: ROLE_REPLY role %s", ErrMalformed, RoleName(r))
	}
	return RoleReply{Role: r, GenerationID: binary.BigEndian.Uint64(body[8:16])}, nil
}

// RoleStatus is a decoded ofp14_role_status.
type RoleStatus struct {
	RoleReply
	Reason uint8 // OFPCRR_MASTER_REQUEST 0, OFPCRR_CONFIG 1, OFPCRR_EXPERIMENTER 2
}

// IsONFRoleStatus reports whether an OFPT_EXPERIMENTER's experimenter header (the 8 bytes
// after ofp_header) names ONFT_ROLE_STATUS.
func IsONFRoleStatus(exp []byte) bool {
	return len(exp) >= ExperimenterHeaderLen && binary.BigEndian.Uint32(exp[0:4]) == onfExperimenter &&
		binary.BigEndian.Uint32(exp[4:8]) == onfRoleStatus
}

// ParseRoleStatus decodes the fixed part of an ofp14_role_status (the body after the
// experimenter header): at least 16 bytes, whose role is EQUAL, MASTER or SLAVE. Properties
// after them are ignored (Open vSwitch sends none); the reader does not even read them.
func ParseRoleStatus(b []byte) (RoleStatus, error) {
	if len(b) < RoleStatusLen {
		return RoleStatus{}, fmt.Errorf("%w: ROLE_STATUS body is %d bytes, need %d", ErrMalformed, len(b), RoleStatusLen)
	}
	r := ofp.ControllerRole(binary.BigEndian.Uint32(b[0:4]))
	if !ValidRole(r) {
		return RoleStatus{}, fmt.Errorf("%w: ROLE_STATUS role %s", ErrMalformed, RoleName(r))
	}
	return RoleStatus{RoleReply: RoleReply{Role: r, GenerationID: binary.BigEndian.Uint64(b[8:16])}, Reason: b[4]}, nil
}

// RoleStatusReason names ofp14_controller_role_reason for logs.
func RoleStatusReason(r uint8) string {
	switch r {
	case 0:
		return "OFPCRR_MASTER_REQUEST"
	case 1:
		return "OFPCRR_CONFIG"
	case 2:
		return "OFPCRR_EXPERIMENTER"
	}
	return fmt.Sprintf("OFPCRR(%d)", r)
}

// RoleBody encodes an ofp_role_request / ofp_role_reply body.
func RoleBody(role ofp.ControllerRole, gen uint64) []byte {
	b := make([]byte, RoleBodyLen)
	binary.BigEndian.PutUint32(b[0:4], uint32(role))
	binary.BigEndian.PutUint64(b[8:16], gen)
	return b
}

// RoleStatusBody encodes an ONFT_ROLE_STATUS body (after ofp_header) as Open vSwitch sends it
// to an OpenFlow 1.3 controller (ofputil_encode_role_status), followed by props: what fake
// switches send.
func RoleStatusBody(role ofp.ControllerRole, reason uint8, gen uint64, props []byte) []byte {
	b := make([]byte, ExperimenterHeaderLen+RoleStatusLen, ExperimenterHeaderLen+RoleStatusLen+len(props))
	binary.BigEndian.PutUint32(b[0:4], onfExperimenter)
	binary.BigEndian.PutUint32(b[4:8], onfRoleStatus)
	binary.BigEndian.PutUint32(b[8:12], uint32(role))
	b[12] = reason
	binary.BigEndian.PutUint64(b[16:24], gen)
	return append(b, props...)
}
