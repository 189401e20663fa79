package ofswitch

import (
	"fmt"
	"sync"

	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

type waitKind uint8

const (
	waitApply     waitKind = iota // OFPT_ERRORs and the BARRIER_REPLY of one stage
	waitMultipart                 // the parts of one MULTIPART_REPLY, or an OFPT_ERROR
	waitEcho                      // the ECHO_REPLY to a liveness probe
	waitRole                      // the ROLE_REPLY to a role request, or an OFPT_ERROR
)

// waiter collects what the reader routes to one request, without ever blocking the reader,
// and within bounds the request sets: an Apply stage takes at most one frame per xid it
// registered, a multipart reply at most its Limit. What it refuses the reader counts as a
// fault.
type waiter struct {
	kind   waitKind
	notify chan struct{}

	// Set before register, read-only after.
	mptype ofp.MultipartType
	lim    Limit

	mu     sync.Mutex
	frames []ofwire.Frame  // waitApply
	seen   map[uint32]bool // waitApply: xids that already delivered a frame
	buf    []byte          // waitMultipart: payloads so far
	parts  int             // waitMultipart
	last   bool            // waitMultipart: the final part arrived
	err    error           // waitMultipart, waitRole: the reply was refused
	errF   *ofwire.Frame   // waitMultipart, waitRole: the switch answered with OFPT_ERROR
	role   RoleReply       // waitRole: the decoded reply
	closed bool            // finished: anything more is unsolicited
}

func newWaiter(k waitKind) *waiter {
	return &waiter{kind: k, notify: make(chan struct{}, 1), seen: map[uint32]bool{}}
}

func (w *waiter) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// deliver hands an Apply stage a frame, once per xid. It reports false when the waiter
// refuses it (a repeat, or the waiter is done).
func (w *waiter) deliver(f ofwire.Frame) bool {
	w.mu.Lock()
	if w.closed || w.seen[f.Xid] {
		w.mu.Unlock()
		return false
	}
	w.seen[f.Xid] = true
	w.frames = append(w.frames, f)
	w.mu.Unlock()
	w.wake()
	return true
}

func (w *waiter) take() []ofwire.Frame {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.frames
	w.frames = nil
	return f
}

// finish closes the waiter with an outcome (a multipart error frame or refusal, or an
// answered probe); false if it was already finished.
func (w *waiter) finish(errF *ofwire.Frame, err error) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	w.closed, w.errF, w.err = true, errF, err
	w.mu.Unlock()
	w.wake()
	return true
}

// finishRole closes a role waiter with its decoded reply; accepted runs after the reply is
// taken and before the requester wakes. false if the waiter was already finished.
func (w *waiter) finishRole(rr RoleReply, accepted func()) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	w.closed, w.role = true, rr
	w.mu.Unlock()
	accepted()
	w.wake()
	return true
}

func (w *waiter) roleState() (rr RoleReply, err error, errF *ofwire.Frame) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.role, w.err, w.errF
}

// room reports whether one more multipart part of n payload bytes fits the limit, and if
// not, why, as an error naming the switch and the type.
func (w *waiter) room(sw *Switch, n int) (open bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false, nil
	}
	if w.parts+1 > w.lim.MaxParts || len(w.buf)+n > w.lim.MaxBytes {
		return true, fmt.Errorf("switch %s at %s: %w: %v reply of more than %d parts or %d bytes (had %d parts, %d bytes, next part %d bytes)",
			sw, sw.remote, ErrReplyTooLarge, w.mptype, w.lim.MaxParts, w.lim.MaxBytes, w.parts, len(w.buf), n)
	}
	return true, nil
}

// addPart appends one multipart part.
func (w *waiter) addPart(payload []byte, more bool) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	if w.buf == nil {
		w.buf = []byte{}
	}
	w.buf = append(w.buf, payload...)
	w.parts++
	if !more {
		w.last, w.closed = true, true
	}
	w.mu.Unlock()
	w.wake()
}

func (w *waiter) multipartState() (out []byte, parts int, last bool, err error, errF *ofwire.Frame) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf, w.parts, w.last, w.err, w.errF
}

func (sw *Switch) register(w *waiter, xids ...uint32) {
	sw.mu.Lock()
	for _, x := range xids {
		sw.pending[x] = w
	}
	sw.mu.Unlock()
}

func (sw *Switch) unregister(xids ...uint32) {
	sw.mu.Lock()
	for _, x := range xids {
		delete(sw.pending, x)
	}
	sw.mu.Unlock()
}

func (sw *Switch) waiterFor(xid uint32) *waiter {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.pending[xid]
}

// expects reports whether w takes a message of type t at all.
func (w *waiter) expects(t of.Type) bool {
	switch w.kind {
	case waitApply:
		return t == of.TypeError || t == of.TypeBarrierReply
	case waitMultipart:
		return t == of.TypeError || t == of.TypeMultipartReply
	case waitEcho:
		return t == of.TypeEchoReply
	case waitRole:
		return t == of.TypeError || t == of.TypeRoleReply
	}
	return false
}
