//go:build integration

package sample

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// burnEnv makes the test binary a CPU burner for the cgroup test: a child process that spins
// for the given duration and exits by itself, so nothing outlives a failed test for long.
const burnEnv = "FLOWWEIGHT_TEST_BURN"

func TestMain(m *testing.M) {
	if d, err := time.ParseDuration(os.Getenv(burnEnv)); err == nil {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// makeCgroup creates a test cgroup on this machine's hierarchy (v1 or v2) with a CPU quota
// of 0.25 cores and a 256 MiB memory limit, and removes it at cleanup.
func makeCgroup(t *testing.T) Cgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the cgroup test needs root")
	}
	name := fmt.Sprintf("flowweight-test-%d", os.Getpid())
	cg, err := LoadCgroup(name)
	if err != nil {
		t.Fatalf("resolve %s: %v", name, err)
	}
	dirs := []string{cg.Dir}
	if cg.Version == 1 {
		dirs = []string{cg.CPU, cg.CPUAcct, cg.Memory}
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			t.Fatalf("mkdir %s: %v", d, err)
		}
	}
	t.Cleanup(func() {
		// Move anything left to the parent, then remove.
		for _, d := range dirs {
			if data, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && len(data) > 0 {
				for _, pid := range splitLines(data) {
					_ = os.WriteFile(filepath.Join(filepath.Dir(d), "cgroup.procs"), []byte(pid), 0)
				}
			}
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	write := func(file, val string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(val), 0); err != nil {
			t.Fatalf("write %q to %s: %v", val, file, err)
		}
	}
	if cg.Version == 1 {
		write(filepath.Join(cg.CPU, "cpu.cfs_period_us"), "100000")
		write(filepath.Join(cg.CPU, "cpu.cfs_quota_us"), "25000")
		write(filepath.Join(cg.Memory, "memory.limit_in_bytes"), strconv.Itoa(256<<20))
	} else {
		parent := filepath.Dir(cg.Dir)
		write(filepath.Join(parent, "cgroup.subtree_control"), "+cpu +memory")
		write(filepath.Join(cg.Dir, "cpu.max"), "25000 100000")
		write(filepath.Join(cg.Dir, "memory.max"), strconv.Itoa(256<<20))
	}
	t.Logf("cgroup v%d %+v", cg.Version, cg)
	return cg
}

func splitLines(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == '\n' {
			if i > start {
				out = append(out, string(b[start:i]))
			}
			start = i + 1
		}
	}
	return out
}

func TestCgroupSamplersReal(t *testing.T) {
	cg := makeCgroup(t)
	ctx := context.Background()
	cpuS := &CgroupCPU{Cgroup: cg, HostCPUs: float64(runtime.NumCPU())}
	memS := &CgroupMem{Cgroup: cg, HostMem: 1 << 40}

	v, _ := cpuS.Sample(ctx)
	if !v.Has(FieldCPUCount) || v.CPUCount != 0.25 {
		t.Fatalf("cpu count %+v, want 0.25", v)
	}
	if mv, err := memS.Sample(ctx); err != nil || mv.MemBytes != 256<<20 {
		t.Errorf("memory %+v %v, want 256 MiB", mv, err)
	}

	// A burner bounded to 20 s by itself, moved into the cgroup.
	burner := exec.Command(os.Args[0], "-test.run=^$")
	burner.Env = append(os.Environ(), burnEnv+"=20s")
	if err := burner.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { burner.Wait(); close(done) }()
	stopBurner := func() {
		burner.Process.Kill()
		<-done
	}
	t.Cleanup(stopBurner)
	pid := strconv.Itoa(burner.Process.Pid)
	dirs := []string{cg.Dir}
	if cg.Version == 1 {
		dirs = []string{cg.CPU, cg.CPUAcct, cg.Memory}
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(pid), 0); err != nil {
			t.Fatalf("move burner into %s: %v", d, err)
		}
	}

	measure := func(window time.Duration) float64 {
		t.Helper()
		if _, err := cpuS.Sample(ctx); err != nil {
			t.Fatalf("sample: %v", err)
		}
		time.Sleep(window) // real CPU time has to pass: this is what is measured
		v, err := cpuS.Sample(ctx)
		if err != nil || !v.Has(FieldCPUUtil) {
			t.Fatalf("sample: %+v %v", v, err)
		}
		return v.CPUUtil
	}
	busy := measure(2 * time.Second)
	t.Logf("cpu util with burner: %.3f of %.2f cores", busy, 0.25)
	if busy < 0.6 {
		t.Errorf("cpu util %.3f with a burner at the quota, want > 0.6", busy)
	}
	stopBurner()
	idle := measure(time.Second)
	t.Logf("cpu util after burner: %.3f", idle)
	if idle > 0.1 {
		t.Errorf("cpu util %.3f after the burner stopped, want < 0.1", idle)
	}
}
