package switchsync

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/ofswitch"

	"github.com/netrack/openflow/ofp"
)

// FakeConn is a Conn over a dataplane.FakeSwitch, for tests of syncers without a switch. Stall
// makes every request wait, like a switch that stopped reading: until its context ends, or
// until Stall(false), when the switch reads again and answers what waited.
type FakeConn struct {
	DPID uint64

	mu      sync.Mutex
	sw      *dataplane.FakeSwitch
	stall   bool
	resume  chan struct{} // closed by Stall(false)
	waiting int           // requests waiting on a stall now
	applies int
	done    chan struct{}
	closed  bool

	// Roles as Open vSwitch keeps them for this controller's session: the role, and the
	// switch-wide newest generation id (genSet: one was given).
	role        ofp.ControllerRole
	gen         uint64
	genSet      bool
	roleChanged chan struct{}
	requests    int
	lie         Lie
	groupStats  int // OFPMP_GROUP requests answered

	// What was written, for tests of who writes: the frames sent out, and the goroutine each
	// write (Apply, PacketOut, RequestRole) came from.
	packetOuts []SentFrame
	writers    map[uint64]int
}

// SentFrame is one PacketOut as the fake switch took it.
type SentFrame struct {
	InPort  uint32
	Actions ofp.Actions
	Frame   []byte
}

// Lie is what a hostile or broken switch claims about the controller roles, whatever the
// generation ids say (a connection on an unused datapath id can claim anything).
type Lie struct {
	// AnswerRole, unless NOCHANGE (the zero value), is the role every role request is
	// answered with.
	AnswerRole ofp.ControllerRole
	// RefuseWrites refuses every write with OFPBRC_IS_SLAVE.
	RefuseWrites bool
}

// SetLie makes the fake switch lie (Lie{}: tell the truth again).
func (f *FakeConn) SetLie(l Lie) {
	f.mu.Lock()
	f.lie = l
	f.mu.Unlock()
}

// NewFakeConn is a fake session with an empty switch.
func NewFakeConn(dpid uint64) *FakeConn {
	return &FakeConn{DPID: dpid, sw: dataplane.NewFakeSwitch(), done: make(chan struct{}),
		role: ofp.ControllerRoleEqual, roleChanged: make(chan struct{}, 1)}
}

func (f *FakeConn) DatapathID() uint64 { return f.DPID }
func (f *FakeConn) String() string     { return fmt.Sprintf("%016x", f.DPID) }

// Done is closed by Close.
func (f *FakeConn) Done() <-chan struct{} { return f.done }

// Close ends the session.
func (f *FakeConn) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
}

// Stall makes the switch stop answering (true) or answer again (false), what waited too.
func (f *FakeConn) Stall(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case on && !f.stall:
		f.resume = make(chan struct{})
	case !on && f.stall:
		close(f.resume)
	}
	f.stall = on
}

// Stalled is how many requests wait on a stall now.
func (f *FakeConn) Stalled() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

// State is what the fake switch holds.
func (f *FakeConn) State() dataplane.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sw.State()
}

// Applies counts successful Apply calls.
func (f *FakeConn) Applies() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applies
}

// Edit runs fn on the switch, as someone with ovs-ofctl would.
func (f *FakeConn) Edit(fn func(*dataplane.FakeSwitch)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.sw)
}

func (f *FakeConn) wait(ctx context.Context) error {
	f.mu.Lock()
	stall, resume := f.stall, f.resume
	if stall {
		f.waiting++
	}
	f.mu.Unlock()
	if !stall {
		return nil
	}
	defer func() {
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-f.done:
		return ofswitch.ErrSessionClosed
	case <-resume:
		return nil
	}
}

// Multipart answers GROUP_DESC, GROUP (counters) and our FLOW requests from the fake switch's tables.
func (f *FakeConn) Multipart(ctx context.Context, typ ofp.MultipartType, _ io.WriterTo) ([]byte, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch typ {
	case ofp.MultipartTypeGroupDescription:
		return f.sw.GroupDescReply()
	case ofp.MultipartTypeFlow:
		return f.sw.FlowStatsReply(dataplane.CookieMagic, dataplane.CookieMask)
	case ofp.MultipartTypeGroup:
		f.groupStats++
		return f.sw.GroupStatsReply()
	}
	return nil, fmt.Errorf("fake switch: multipart type %d not served", typ)
}

// Apply applies the stages to the fake switch.
func (f *FakeConn) Apply(ctx context.Context, stages ...[]ofswitch.Message) (ofswitch.Result, error) {
	if err := f.wait(ctx); err != nil {
		return ofswitch.Result{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wrote()
	if f.role == ofp.ControllerRoleSlave || f.lie.RefuseWrites {
		for _, st := range stages {
			if len(st) > 0 {
				return ofswitch.Result{}, &ofswitch.OpError{DatapathID: f.DPID, Msg: st[0], Type: 1, Code: 10,
					TypeName: "OFPET_BAD_REQUEST", CodeName: "OFPBRC_IS_SLAVE"}
			}
		}
	}
	if err := f.sw.ApplyPlan(stages); err != nil {
		return ofswitch.Result{}, err
	}
	f.applies++
	n := 0
	for _, s := range stages {
		n += len(s)
	}
	return ofswitch.Result{BarrierRTT: make([]time.Duration, len(stages)), Messages: n}, nil
}

// RequestRole checks the generation id as Open vSwitch does (older than the newest seen:
// stale) and takes the role.
func (f *FakeConn) RequestRole(ctx context.Context, role ofp.ControllerRole, gen uint64) (ofswitch.RoleReply, error) {
	if err := f.wait(ctx); err != nil {
		return ofswitch.RoleReply{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wrote()
	f.requests++
	if role == ofp.ControllerRoleMaster || role == ofp.ControllerRoleSlave {
		if f.genSet && int64(gen-f.gen) < 0 {
			return ofswitch.RoleReply{}, &ofswitch.OpError{DatapathID: f.DPID, Type: 11, Code: 0,
				TypeName: "OFPET_ROLE_REQUEST_FAILED", CodeName: "OFPRRFC_STALE"}
		}
		f.gen, f.genSet = gen, true
	}
	if role != ofp.ControllerRoleNoChange {
		f.role = role
	}
	if f.lie.AnswerRole != ofp.ControllerRoleNoChange {
		f.role = f.lie.AnswerRole
	}
	return ofswitch.RoleReply{Role: f.role, GenerationID: f.gen}, nil
}

// Role is the role the fake switch holds for us.
func (f *FakeConn) Role() ofswitch.RoleReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ofswitch.RoleReply{Role: f.role, GenerationID: f.gen}
}

// RoleChanged is poked by Takeover.
func (f *FakeConn) RoleChanged() <-chan struct{} { return f.roleChanged }

// Takeover is another controller becoming master with gen: we are made SLAVE and told so.
func (f *FakeConn) Takeover(gen uint64) {
	f.mu.Lock()
	f.gen, f.genSet = gen, true
	f.role = ofp.ControllerRoleSlave
	f.mu.Unlock()
	select {
	case f.roleChanged <- struct{}{}:
	default:
	}
}

// GroupStatsReads counts the group counter requests answered.
func (f *FakeConn) GroupStatsReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groupStats
}

// RoleRequests counts role requests.
func (f *FakeConn) RoleRequests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// PacketOut records the frame; a SLAVE's packet-out is refused, as Open vSwitch does.
func (f *FakeConn) PacketOut(ctx context.Context, inPort uint32, actions ofp.Actions, frame []byte) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wrote()
	if f.role == ofp.ControllerRoleSlave || f.lie.RefuseWrites {
		return &ofswitch.OpError{DatapathID: f.DPID, Type: 1, Code: 10, TypeName: "OFPET_BAD_REQUEST", CodeName: "OFPBRC_IS_SLAVE"}
	}
	f.packetOuts = append(f.packetOuts, SentFrame{InPort: inPort, Actions: actions, Frame: append([]byte(nil), frame...)})
	return nil
}

// PacketOuts returns the frames sent out so far.
func (f *FakeConn) PacketOuts() []SentFrame {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]SentFrame(nil), f.packetOuts...)
}

// Writers counts the writes by the goroutine (its runtime id) they came from.
func (f *FakeConn) Writers() map[uint64]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[uint64]int, len(f.writers))
	for g, n := range f.writers {
		out[g] = n
	}
	return out
}

// wrote records the calling goroutine as a writer. f.mu must be held.
func (f *FakeConn) wrote() {
	if f.writers == nil {
		f.writers = map[uint64]int{}
	}
	f.writers[GoroutineID()]++
}

// GoroutineID is the runtime's id of the calling goroutine, from its stack header
// ("goroutine 42 [running]:"): for tests that check who writes, never for logic.
func GoroutineID() uint64 {
	var buf [64]byte
	b := string(buf[:runtime.Stack(buf[:], false)])
	b = strings.TrimPrefix(b, "goroutine ")
	if i := strings.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(b, 10, 64)
	return id
}
