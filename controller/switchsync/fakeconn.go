package switchsync

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/ofswitch"

	"github.com/netrack/openflow/ofp"
)

// FakeConn is a Conn over a dataplane.FakeSwitch, for tests of syncers without a switch. Stall
// makes every request wait for its context, like a switch that stopped reading.
type FakeConn struct {
	DPID uint64

	mu      sync.Mutex
	sw      *dataplane.FakeSwitch
	stall   bool
	applies int
	done    chan struct{}
	closed  bool
}

// NewFakeConn is a fake session with an empty switch.
func NewFakeConn(dpid uint64) *FakeConn {
	return &FakeConn{DPID: dpid, sw: dataplane.NewFakeSwitch(), done: make(chan struct{})}
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

// Stall makes the switch stop answering (true) or answer again (false).
func (f *FakeConn) Stall(on bool) {
	f.mu.Lock()
	f.stall = on
	f.mu.Unlock()
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
	stall := f.stall
	f.mu.Unlock()
	if !stall {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-f.done:
		return ofswitch.ErrSessionClosed
	}
}

// Multipart answers GROUP_DESC and our FLOW requests from the fake switch's tables.
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
