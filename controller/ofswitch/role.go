package ofswitch

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// Controller roles (OpenFlow 1.3.5 §6.3.5, §7.3.9). With several controllers on one switch
// the switch is the fence between them: it refuses a role request whose generation_id is
// older than the newest it has seen (OFPET_ROLE_REQUEST_FAILED/OFPRRFC_STALE, see IsStale)
// and every write from a SLAVE (OFPET_BAD_REQUEST/OFPBRC_IS_SLAVE, see IsSlave). The session
// asks for a role, remembers the role the switch last confirmed, and wakes whoever watches
// it when the switch says the role changed, which Open vSwitch does when another controller
// takes MASTER (the ONF role-status extension below). Deciding which role to ask for, and
// with which generation, is the caller's business (leader election).

const (
	// roleBodyLen is ofp_role_request / ofp_role_reply: role u32, pad 4, generation_id u64.
	roleBodyLen = 16
	// onfExperimenter is ONF_VENDOR_ID, and onfRoleStatus the exp_type of ONFT_ROLE_STATUS:
	// OpenFlow 1.4's OFPT_ROLE_STATUS carried in OFPT_EXPERIMENTER to 1.3 controllers (ONF
	// extension 1911, as Open vSwitch sends it; include/openvswitch/ofp-msgs.h).
	onfExperimenter = 0x4f4e4600
	onfRoleStatus   = 1911
	// experimenterHeaderLen is what follows ofp_header in an OFPT_EXPERIMENTER message:
	// experimenter u32 and exp_type u32.
	experimenterHeaderLen = 8
	// roleStatusLen is ofp14_role_status after the headers: role u32, reason u8, pad 3,
	// generation_id u64; properties (ofp14_role_prop_header list) may follow.
	roleStatusLen = 16
)

// Error types and codes the role helpers match (OpenFlow 1.3.5 §7.4.4; errname.go).
const (
	errTypeBadRequest        = 1  // OFPET_BAD_REQUEST
	errCodeIsSlave           = 10 // OFPBRC_IS_SLAVE
	errTypeRoleRequestFailed = 11 // OFPET_ROLE_REQUEST_FAILED
	errCodeStale             = 0  // OFPRRFC_STALE
)

// RoleReply is a role the switch confirmed for this session: from the ROLE_REPLY to
// RequestRole, or from a role-status message the switch sent on its own.
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

// RequestRole asks the switch for role with generation gen (OFPT_ROLE_REQUEST) and returns
// what the switch confirmed (OFPT_ROLE_REPLY of the same xid). ofp.ControllerRoleNoChange
// asks for the current role without changing it. For MASTER and SLAVE the switch checks gen
// against the newest generation it has seen and refuses an older one with an *OpError that
// IsStale matches; gen is compared as a wrapping 64-bit counter, so the caller should
// increase it by one per election. Other OFPT_ERRORs for the request come back as *OpError
// too. The reply must arrive within Config.BarrierTimeout (ErrReplyTimeout), before ctx
// ends and before the session ends (ErrSessionClosed). A reply that does not decode (a body
// other than 16 bytes, or a role other than EQUAL, MASTER or SLAVE) fails the request with
// ErrMalformed and is counted as FaultMalformedReply.
//
// The confirmed role is also what Role returns from then on. A reply arriving after the
// request gave up is discarded as unsolicited and does not update Role; after a timeout,
// ask again (NOCHANGE) before trusting Role.
func (sw *Switch) RequestRole(ctx context.Context, role ofp.ControllerRole, gen uint64) (RoleReply, error) {
	xid := sw.nextXID()
	req := &ofp.RoleRequest{Role: role, GenerationID: gen}
	b, err := encodeMessage(of.TypeRoleRequest, xid, req)
	if err != nil {
		return RoleReply{}, fmt.Errorf("switch %s role request: %w", sw, err)
	}
	w := newWaiter(waitRole)
	sw.register(w, xid)
	defer sw.unregister(xid)
	if err := sw.send(ctx, b); err != nil {
		return RoleReply{}, err
	}
	timeout := sw.srv.after(sw.cfg.BarrierTimeout)
	select {
	case <-w.notify:
		rr, err, errFrame := w.roleState()
		switch {
		case errFrame != nil:
			em, err := parseError(errFrame.body)
			if err != nil {
				return RoleReply{}, fmt.Errorf("switch %s role request: %w", sw, err)
			}
			m := Message{Type: of.TypeRoleRequest, Body: req, Desc: fmt.Sprintf("role request %s generation %d", RoleName(role), gen)}
			return RoleReply{}, newOpError(sw.DatapathID(), xid, m, em)
		case err != nil:
			return RoleReply{}, err
		}
		return rr, nil
	case <-timeout:
		return RoleReply{}, fmt.Errorf("switch %s role request %s generation %d: %w after %v", sw, RoleName(role), gen, ErrReplyTimeout, sw.cfg.BarrierTimeout)
	case <-ctx.Done():
		return RoleReply{}, fmt.Errorf("switch %s role request %s: %w", sw, RoleName(role), ctx.Err())
	case <-sw.done:
		return RoleReply{}, fmt.Errorf("role request: %w", sw.closedErr())
	}
}

// Role is the role the switch last confirmed for this session, from a ROLE_REPLY or a role
// status, whichever the reader routed last (the switch's order). Before the switch said
// anything it is EQUAL with GenerationID 0: OpenFlow 1.3.5 §6.3.5 starts every controller
// connection as EQUAL. A new session (after a reconnect) starts again from EQUAL, as the
// switch does; a controller that wants MASTER must ask again on every Connected.
func (sw *Switch) Role() RoleReply {
	if p := sw.role.Load(); p != nil {
		return *p
	}
	return RoleReply{Role: ofp.ControllerRoleEqual}
}

// RoleChanged receives a token (capacity 1, so wakes coalesce and none is lost) whenever
// Role changes, whether by a ROLE_REPLY or by a role status the switch sent on its own,
// e.g. when another controller became MASTER and this one was demoted to SLAVE. A watcher
// loops: wait on RoleChanged (and Done), then read Role. The channel is never closed; the
// session's end is Done.
func (sw *Switch) RoleChanged() <-chan struct{} { return sw.roleChanged }

// setRole records a role the switch confirmed and wakes the watcher if it changed. Only
// the reader calls it, so the load and the store do not race with another setRole.
func (sw *Switch) setRole(r RoleReply) {
	if sw.Role() == r {
		return
	}
	sw.role.Store(&r)
	select {
	case sw.roleChanged <- struct{}{}:
	default:
	}
}

// IsStale reports whether err is the switch refusing a role request for its generation_id
// being older than one it has seen (OFPET_ROLE_REQUEST_FAILED/OFPRRFC_STALE): the switch
// says another controller was elected after the caller. That is the switch's word about
// itself; whether the caller must stop leading is the election's to say.
func IsStale(err error) bool { return isOpError(err, errTypeRoleRequestFailed, errCodeStale) }

// IsSlave reports whether err is the switch refusing a write because this controller is
// SLAVE on it (OFPET_BAD_REQUEST/OFPBRC_IS_SLAVE): another controller is MASTER.
func IsSlave(err error) bool { return isOpError(err, errTypeBadRequest, errCodeIsSlave) }

// isOpError reports whether any *OpError in err's tree has typ/code: errors.As would stop
// at the first one, and Apply joins one per refused message.
func isOpError(err error, typ, code uint16) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *OpError:
		return e.Type == typ && e.Code == code
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if isOpError(inner, typ, code) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		return isOpError(e.Unwrap(), typ, code)
	}
	return false
}

// validRole reports whether r is a role a switch can confirm.
func validRole(r ofp.ControllerRole) bool {
	return r == ofp.ControllerRoleEqual || r == ofp.ControllerRoleMaster || r == ofp.ControllerRoleSlave
}

// parseRoleReply decodes an ofp_role_reply body: exactly 16 bytes, a role a switch can
// confirm (NOCHANGE is only for requests).
func parseRoleReply(body []byte) (RoleReply, error) {
	if len(body) != roleBodyLen {
		return RoleReply{}, fmt.Errorf("%w: ROLE_REPLY body is %d bytes, want %d", ErrMalformed, len(body), roleBodyLen)
	}
	r := ofp.ControllerRole(binary.BigEndian.Uint32(body[0:4]))
	if !validRole(r) {
		return RoleReply{}, fmt.Errorf("%w: ROLE_REPLY role %s", ErrMalformed, RoleName(r))
	}
	return RoleReply{Role: r, GenerationID: binary.BigEndian.Uint64(body[8:16])}, nil
}

// roleStatus is a decoded ofp14_role_status.
type roleStatus struct {
	RoleReply
	Reason uint8 // OFPCRR_MASTER_REQUEST 0, OFPCRR_CONFIG 1, OFPCRR_EXPERIMENTER 2
}

// isONFRoleStatus reports whether an OFPT_EXPERIMENTER's experimenter header (the 8 bytes
// after ofp_header) names ONFT_ROLE_STATUS.
func isONFRoleStatus(exp []byte) bool {
	return len(exp) >= experimenterHeaderLen && binary.BigEndian.Uint32(exp[0:4]) == onfExperimenter &&
		binary.BigEndian.Uint32(exp[4:8]) == onfRoleStatus
}

// parseRoleStatus decodes the fixed part of an ofp14_role_status (the body after the
// experimenter header): at least 16 bytes, whose role is EQUAL, MASTER or SLAVE. Properties
// after them are ignored (Open vSwitch sends none); the reader does not even read them.
func parseRoleStatus(b []byte) (roleStatus, error) {
	if len(b) < roleStatusLen {
		return roleStatus{}, fmt.Errorf("%w: ROLE_STATUS body is %d bytes, need %d", ErrMalformed, len(b), roleStatusLen)
	}
	r := ofp.ControllerRole(binary.BigEndian.Uint32(b[0:4]))
	if !validRole(r) {
		return roleStatus{}, fmt.Errorf("%w: ROLE_STATUS role %s", ErrMalformed, RoleName(r))
	}
	return roleStatus{RoleReply: RoleReply{Role: r, GenerationID: binary.BigEndian.Uint64(b[8:16])}, Reason: b[4]}, nil
}

// roleStatusReason names ofp14_controller_role_reason for logs.
func roleStatusReason(r uint8) string {
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

// routeRoleReply decodes a ROLE_REPLY for w, which waits for it. The body is read only when
// it has the one length a reply can have.
func (sw *Switch) routeRoleReply(w *waiter, h header, n int) error {
	if n != roleBodyLen {
		err := fmt.Errorf("switch %s at %s: %w: ROLE_REPLY body is %d bytes, want %d", sw, sw.remote, ErrMalformed, n, roleBodyLen)
		sw.fault(FaultMalformedReply, "bad role reply, request failed", "xid", h.Xid, "bytes", n)
		w.finish(nil, err)
		return sw.skip(n)
	}
	b, err := sw.body(n)
	if err != nil {
		return err
	}
	rr, err := parseRoleReply(b)
	if err != nil {
		sw.fault(FaultMalformedReply, "bad role reply, request failed", "xid", h.Xid, "err", err)
		w.finish(nil, fmt.Errorf("switch %s at %s: %w", sw, sw.remote, err))
		return nil
	}
	// The role is recorded before the waiter wakes, so Role already has it (or something
	// the switch said later) when RequestRole returns.
	if !w.finishRole(rr, func() { sw.setRole(rr) }) {
		sw.fault(FaultUnsolicitedReply, "repeated reply, discarded", "type", h.Type.String(), "xid", h.Xid)
	}
	return nil
}

// routeExperimenter takes an OFPT_EXPERIMENTER: ONFT_ROLE_STATUS updates Role, anything
// else is ignored as before (FaultIgnoredMessage, body skipped). Only the experimenter
// header and the 16 fixed bytes of a role status are read; its properties are skipped.
func (sw *Switch) routeExperimenter(h header, n int) error {
	if n < experimenterHeaderLen {
		sw.fault(FaultIgnoredMessage, "message not used by the session, discarded", "type", h.Type.String(), "xid", h.Xid, "bytes", int(h.Length))
		return sw.skip(n)
	}
	var exp [experimenterHeaderLen]byte
	if _, err := io.ReadFull(sw.br, exp[:]); err != nil {
		return err
	}
	rest := n - experimenterHeaderLen
	if !isONFRoleStatus(exp[:]) {
		sw.fault(FaultIgnoredMessage, "message not used by the session, discarded", "type", h.Type.String(), "xid", h.Xid, "bytes", int(h.Length),
			"experimenter", fmt.Sprintf("%#08x", binary.BigEndian.Uint32(exp[0:4])), "exp_type", binary.BigEndian.Uint32(exp[4:8]))
		return sw.skip(rest)
	}
	if rest < roleStatusLen {
		sw.fault(FaultMalformedRoleStatus, "bad role status, discarded", "xid", h.Xid, "bytes", rest)
		return sw.skip(rest)
	}
	var b [roleStatusLen]byte
	if _, err := io.ReadFull(sw.br, b[:]); err != nil {
		return err
	}
	if err := sw.skip(rest - roleStatusLen); err != nil {
		return err
	}
	rs, err := parseRoleStatus(b[:])
	if err != nil {
		sw.fault(FaultMalformedRoleStatus, "bad role status, discarded", "xid", h.Xid, "err", err)
		return nil
	}
	// One line at most once per ratelog.Every per switch and source, across sessions: a peer
	// repeating statuses cannot flood the log, and a real demotion is rare.
	sw.logf(slog.LevelInfo, "role_status", "switch reports our role", "role", RoleName(rs.Role),
		"generation_id", rs.GenerationID, "role_reason", roleStatusReason(rs.Reason))
	sw.setRole(rs.RoleReply)
	return nil
}
