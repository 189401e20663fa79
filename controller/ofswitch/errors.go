package ofswitch

import (
	"errors"
	"fmt"

	"flowweight/controller/ofwire"
)

var (
	// ErrBarrierTimeout: no BARRIER_REPLY within Config.BarrierTimeout. The stage's
	// messages may or may not be in effect; the caller should resync from a read-back.
	ErrBarrierTimeout = errors.New("barrier reply timed out")
	// ErrReplyTimeout: a MULTIPART_REPLY part, or the ROLE_REPLY to RequestRole, did not
	// arrive within Config.BarrierTimeout.
	ErrReplyTimeout = errors.New("reply timed out")
	// ErrEchoTimeout: the switch sent nothing, not even an ECHO_REPLY, for EchoTimeout.
	ErrEchoTimeout = errors.New("switch silent past echo timeout")
	// ErrReplaced: the same datapath id connected again while this session did not answer
	// a liveness probe; this (older) session is closed and the new one takes over.
	ErrReplaced = errors.New("session replaced by a new connection of the same datapath")
	// ErrDuplicateDatapath: a connection claimed a datapath id whose live session answered
	// a probe; the newcomer is refused (the established session wins).
	ErrDuplicateDatapath = errors.New("datapath id already connected")
	// ErrIdentityMismatch: a connection claimed a datapath id that its TLS certificate is
	// not bound to (see Config.CertNamesDatapath and the package doc); it is refused.
	ErrIdentityMismatch = errors.New("certificate not bound to the claimed datapath id")
	// ErrTooManySwitches: Config.MaxSwitches datapaths are connected already.
	ErrTooManySwitches = errors.New("too many switches connected")
	// ErrReplyTooLarge: a multipart reply exceeded its Limit; that request failed.
	ErrReplyTooLarge = errors.New("multipart reply over its limit")
	// ErrServerClosed: the Server's context ended.
	ErrServerClosed = errors.New("ofswitch server closed")
	// ErrHelloFailed: the switch does not offer OpenFlow 1.3.
	ErrHelloFailed = errors.New("OpenFlow version negotiation failed: 1.3 required")
	// ErrSessionClosed: the session ended while a request waited for its reply; errors.Is
	// also matches the cause (Switch.Err).
	ErrSessionClosed = errors.New("switch session closed")
)

// OpError is an OFPT_ERROR that a switch returned for one of our messages. Msg is the
// Message whose xid the error carried, so the error names what failed (Msg.Desc), and the
// type/code are given both as numbers and as OpenFlow 1.3 names.
type OpError struct {
	DatapathID         uint64
	Xid                uint32
	Msg                Message
	Type, Code         uint16
	TypeName, CodeName string
	Data               []byte // the start of the rejected request, as the switch echoed it
}

func (e *OpError) Error() string {
	desc := e.Msg.Desc
	if desc == "" {
		desc = e.Msg.Type.String()
	}
	return fmt.Sprintf("switch %016x rejected %q (%v, xid %d): %s/%s (type %d, code %d)",
		e.DatapathID, desc, e.Msg.Type, e.Xid, e.TypeName, e.CodeName, e.Type, e.Code)
}

// newOpError builds an OpError with names filled in.
func newOpError(dpid uint64, xid uint32, m Message, em ofwire.ErrorMsg) *OpError {
	tn, cn := ofwire.ErrorName(em.Type, em.Code)
	return &OpError{DatapathID: dpid, Xid: xid, Msg: m, Type: em.Type, Code: em.Code, TypeName: tn, CodeName: cn, Data: em.Data}
}
