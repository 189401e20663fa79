package ofswitch

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"

	"flowweight/controller/ofwire"

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

// Error types and codes the role helpers match (OpenFlow 1.3.5 §7.4.4; errname.go).
const (
	errTypeBadRequest        = 1  // OFPET_BAD_REQUEST
	errCodeIsSlave           = 10 // OFPBRC_IS_SLAVE
	errTypeRoleRequestFailed = 11 // OFPET_ROLE_REQUEST_FAILED
	errCodeStale             = 0  // OFPRRFC_STALE
)

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
	b, err := ofwire.EncodeMessage(of.TypeRoleRequest, xid, req)
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
			em, err := ofwire.ParseError(errFrame.Body)
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

// routeRoleReply decodes a ROLE_REPLY for w, which waits for it. The body is read only when
// it has the one length a reply can have.
func (sw *Switch) routeRoleReply(w *waiter, h ofwire.Header, n int) error {
	if n != ofwire.RoleBodyLen {
		err := fmt.Errorf("switch %s at %s: %w: ROLE_REPLY body is %d bytes, want %d", sw, sw.remote, ErrMalformed, n, ofwire.RoleBodyLen)
		sw.fault(FaultMalformedReply, "bad role reply, request failed", "xid", h.Xid, "bytes", n)
		w.finish(nil, err)
		return sw.skip(n)
	}
	b, err := sw.body(n)
	if err != nil {
		return err
	}
	rr, err := ofwire.ParseRoleReply(b)
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
func (sw *Switch) routeExperimenter(h ofwire.Header, n int) error {
	if n < ofwire.ExperimenterHeaderLen {
		sw.fault(FaultIgnoredMessage, "message not used by the session, discarded", "type", h.Type.String(), "xid", h.Xid, "bytes", int(h.Length))
		return sw.skip(n)
	}
	var exp [ofwire.ExperimenterHeaderLen]byte
	if _, err := io.ReadFull(sw.br, exp[:]); err != nil {
		return err
	}
	rest := n - ofwire.ExperimenterHeaderLen
	if !ofwire.IsONFRoleStatus(exp[:]) {
		sw.fault(FaultIgnoredMessage, "message not used by the session, discarded", "type", h.Type.String(), "xid", h.Xid, "bytes", int(h.Length),
			"experimenter", fmt.Sprintf("%#08x", binary.BigEndian.Uint32(exp[0:4])), "exp_type", binary.BigEndian.Uint32(exp[4:8]))
		return sw.skip(rest)
	}
	if rest < ofwire.RoleStatusLen {
		sw.fault(FaultMalformedRoleStatus, "bad role status, discarded", "xid", h.Xid, "bytes", rest)
		return sw.skip(rest)
	}
	var b [ofwire.RoleStatusLen]byte
	if _, err := io.ReadFull(sw.br, b[:]); err != nil {
		return err
	}
	if err := sw.skip(rest - ofwire.RoleStatusLen); err != nil {
		return err
	}
	rs, err := ofwire.ParseRoleStatus(b[:])
	if err != nil {
		sw.fault(FaultMalformedRoleStatus, "bad role status, discarded", "xid", h.Xid, "err", err)
		return nil
	}
	// One line at most once per ratelog.Every per switch and source, across sessions: a peer
	// repeating statuses cannot flood the log, and a real demotion is rare.
	sw.logf(slog.LevelInfo, "role_status", "switch reports our role", "role", RoleName(rs.Role),
		"generation_id", rs.GenerationID, "role_reason", ofwire.RoleStatusReason(rs.Reason))
	sw.setRole(rs.RoleReply)
	return nil
}
