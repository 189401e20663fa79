package sample

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServiceCPURealProcess measures a busy child through a real pidfile and /proc: its
// service CPU is clearly above zero, and once it is killed the pidfile is stale and the
// signal absent.
func TestServiceCPURealProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), burnEnv+"=30s") // the test binary burns a core (main_test.go)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	killed := false
	kill := func() {
		if !killed {
			killed = true
			cmd.Process.Kill() // by the PID we started
			cmd.Wait()
		}
	}
	t.Cleanup(kill)
	pidfile := filepath.Join(t.TempDir(), "busy.pid")
	if err := os.WriteFile(pidfile, fmt.Appendf(nil, "%d\n", pid), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &ServiceCPU{PIDFile: pidfile}
	if _, err := s.Sample(context.Background()); !errors.Is(err, ErrFirstSample) {
		t.Fatalf("first sample: %v, want %v", err, ErrFirstSample)
	}
	// Wait until the child has used 300 ms of CPU more, whatever the machine's load.
	start := childTicks(t, pid)
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for childTicks(t, pid) < start+30 {
		if time.Now().After(deadline) {
			t.Fatalf("child used %d ticks in 30 s, want 30", childTicks(t, pid)-start)
		}
		<-tick.C
	}
	v, err := s.Sample(context.Background())
	if err != nil || !v.Has(FieldServiceCPU) {
		t.Fatalf("second sample: %+v, %v", v, err)
	}
	// One spinning thread (plus the runtime's): clearly above zero, at most about one core.
	if v.ServiceCores < 0.05 || v.ServiceCores > 1.5 {
		t.Errorf("service cores %v, want a busy loop's share of one core", v.ServiceCores)
	}
	t.Logf("busy child %d: %.3f cores", pid, v.ServiceCores)

	kill()
	v, err = s.Sample(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "stale pidfile") || v.Known != 0 {
		t.Errorf("after the kill: %+v, %v; want service_cpu absent for a stale pidfile", v, err)
	}
}

// childTicks is the CPU time pid has used, in UserHZ ticks.
func childTicks(t *testing.T, pid int) uint64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseProcStat(data)
	if err != nil {
		t.Fatal(err)
	}
	return st.CPU
}
