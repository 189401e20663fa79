package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"flowweight/e2e/lab"
)

// FlowMonitor streams every change of the bridge's flow table (`ovs-ofctl -O OpenFlow14
// monitor BRIDGE watch:`): unlike two dumps, it sees a flow deleted and re-added between
// them. It needs Options.FlowMonitor (OpenFlow 1.4 allowed on the bridge; OpenFlow 1.3 has
// no flow monitor, and the controller still negotiates 1.3).
type FlowMonitor struct {
	proc *lab.Proc
	out  *LockedBuffer
}

// FlowEvent is one change the monitor reported.
type FlowEvent struct {
	Event string // ADDED, DELETED, MODIFIED
	Flow  string // the rest of the line: "table=2 cookie=0x... ip,nw_dst=... actions=..."
}

// LockedBuffer is a bytes.Buffer that a running command (or goroutine) writes while a test
// reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// MonitorFlows starts a flow monitor and returns once it has reported the initial table.
func (s *Scenario) MonitorFlows() (*FlowMonitor, error) {
	if !s.Opts.FlowMonitor {
		return nil, errors.New("scenario: MonitorFlows needs Options.FlowMonitor (OpenFlow 1.4 on the bridge)")
	}
	out := &LockedBuffer{}
	cmd := exec.Command("ovs-ofctl", "-O", "OpenFlow14", "monitor", "unix:"+s.Bridge.Mgmt(), "watch:")
	// ovs-ofctl opens its own control socket in OVS_RUNDIR.
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+s.OVS.RunDir)
	cmd.Stdout, cmd.Stderr = out, out
	p, err := s.Lab.Start("flow-monitor", cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("scenario: flow monitor: %w", err)
	}
	m := &FlowMonitor{proc: p, out: out}
	if err := lab.Poll(10*time.Second, func() error {
		if p.Exited() {
			return fmt.Errorf("scenario: flow monitor exited: %v: %s", p.Wait(), strings.TrimSpace(out.String()))
		}
		if !strings.Contains(out.String(), "event=INITIAL") {
			return errors.New("scenario: flow monitor has not reported the table yet")
		}
		return nil
	}); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return m, nil
}

// Stop ends the monitor and returns the changes it saw after the initial table.
func (m *FlowMonitor) Stop() ([]FlowEvent, error) {
	err := m.proc.Stop()
	return ParseFlowEvents(m.out.String()), err
}

// ParseFlowEvents extracts the ADDED/DELETED/MODIFIED lines of `ovs-ofctl monitor` output
// ("event=DELETED reason=delete table=2 cookie=0x... match actions=..."); the reason field,
// when present, is dropped so that the flow text matches the ADDED line of the same flow.
func ParseFlowEvents(out string) []FlowEvent {
	var evs []FlowEvent
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "event=")
		if !ok {
			continue
		}
		ev, flow, _ := strings.Cut(rest, " ")
		if ev == "INITIAL" || ev == "" {
			continue
		}
		if strings.HasPrefix(flow, "reason=") {
			_, flow, _ = strings.Cut(flow, " ")
		}
		evs = append(evs, FlowEvent{Event: ev, Flow: strings.TrimSpace(flow)})
	}
	return evs
}
