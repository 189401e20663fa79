//go:build integration

package sample

import (
	"context"
	"errors"
	"flowweight/internal/testutil"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// resolveEnv makes the test binary resolve a cgroup and print what it found (see
// TestCgroupUnderIPNetnsExec): the value is "PATH HOSTPID".
const resolveEnv = "FLOWWEIGHT_TEST_RESOLVE"

func init() {
	extraMain = func() (int, bool) {
		if arg := os.Getenv(resolveEnv); arg != "" {
			return resolveAndPrint(arg), true
		}
		return 0, false
	}
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
	dirs := []string{cg.Dir}
	if cg.Version == 1 {
		dirs = []string{cg.CPU, cg.CPUAcct, cg.Memory}
	}
	stopBurner := startBurner(t, dirs...)
	measure := func(window time.Duration) float64 { return measureUtil(t, cpuS, window) }
	thr := &CgroupThrottle{Cgroup: cg}
	psi := &Pressure{File: HostPressureFile, Scope: ScopeHost}
	_, _ = thr.Sample(ctx)
	_, _ = psi.Sample(ctx)
	busy := measure(2 * time.Second)
	t.Logf("cpu util with burner: %.3f of %.2f cores", busy, 0.25)
	if busy < 0.6 {
		t.Errorf("cpu util %.3f with a burner at the quota, want > 0.6", busy)
	}
	// A spinning task under a quarter-CPU quota is throttled in nearly every period.
	tv, err := thr.Sample(ctx)
	t.Logf("throttled %.3f of the periods, %v held back", tv.Throttled, tv.ThrottledTime)
	if err != nil || !tv.Has(FieldThrottled) || tv.Throttled < 0.5 || tv.ThrottledTime < 500*time.Millisecond {
		t.Errorf("throttling with a burner at the quota: %+v %v, want > half the periods and > 0.5 s", tv, err)
	}
	if pv, err := psi.Sample(ctx); err != nil || !pv.Has(FieldCPUPressure) || pv.PressureScope != ScopeHost {
		t.Errorf("host cpu pressure: %+v %v", pv, err)
	} else {
		t.Logf("host cpu pressure %.3f", pv.CPUPressure)
	}
	stopBurner()
	// The bandwidth timer outlives the burner by a period or two, and the cgroup's runqueue,
	// throttled when the burner was killed, counts one more throttled period when the timer
	// releases it: wait until two samples 150 ms apart see no throttled period (the timer has
	// gone idle), then judge a whole idle second.
	testutil.Eventually(t, 5*time.Second, func() (any, bool) {
		_, _ = thr.Sample(ctx)
		time.Sleep(150 * time.Millisecond) // two samples 150 ms apart, as above
		tv, err := thr.Sample(ctx)
		if err != nil {
			return err, false
		}
		return tv, tv.Throttled == 0
	}, "throttling did not stop after the burner")
	_, _ = thr.Sample(ctx)
	idle := measure(time.Second)
	if tv, err := thr.Sample(ctx); err != nil || tv.Throttled != 0 {
		t.Errorf("throttling after the burner stopped: %+v %v, want 0", tv, err)
	}
	t.Logf("cpu util after burner: %.3f", idle)
	if idle > 0.1 {
		t.Errorf("cpu util %.3f after the burner stopped, want < 0.1", idle)
	}
}

// TestCgroupV2CPUHybrid runs the v2 code against a real cgroup2 hierarchy. This machine is
// cgroup v1 (its cpu and memory controllers are bound to v1), so the test mounts a private
// cgroup2 hierarchy in a temp dir, as systemd's hybrid mode does at /sys/fs/cgroup/unified:
// it has no cpu or memory controller, but every v2 cgroup accounts its CPU time in cpu.stat.
// What it proves: the v2 path resolution from mountinfo, usage_usec deltas as utilisation,
// "no cpu.max" as no quota (host CPUs), and a clear error for the missing memory controller.
// cpu.max and memory.current themselves are covered by the unit tests' fixtures only.
func TestCgroupV2CPUHybrid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the cgroup test needs root")
	}
	root := t.TempDir()
	if out, err := exec.Command("mount", "-t", "cgroup2", "none", root).CombinedOutput(); err != nil {
		t.Fatalf("mount cgroup2 on %s: %v\n%s", root, err, out)
	}
	dir := filepath.Join(root, fmt.Sprintf("flowweight-test-%d", os.Getpid()))
	t.Cleanup(func() {
		if data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, pid := range splitLines(data) {
				_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0)
			}
		}
		if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
			t.Errorf("remove %s: %v", dir, err)
		}
		if out, err := exec.Command("umount", root).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", root, err, out)
		}
	})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cg, err := LoadCgroup(dir)
	if err != nil {
		t.Fatalf("LoadCgroup(%s): %v", dir, err)
	}
	if cg.Version != 2 || cg.Dir != dir {
		t.Fatalf("LoadCgroup(%s) = %+v, want v2 at that dir", dir, cg)
	}
	ctx := context.Background()
	hostCPUs := float64(runtime.NumCPU())
	cpuS := &CgroupCPU{Cgroup: cg, HostCPUs: hostCPUs}
	v, _ := cpuS.Sample(ctx)
	if !v.Has(FieldCPUCount) || v.CPUCount != hostCPUs {
		t.Fatalf("cpu count %+v, want the host's %v (no cpu.max: no quota)", v, hostCPUs)
	}
	_, err = (&CgroupMem{Cgroup: cg, HostMem: 1 << 30}).Sample(ctx)
	if err == nil || !strings.Contains(err.Error(), "memory controller is not enabled") {
		t.Errorf("memory sample without a memory controller: %v", err)
	}

	// Without the cpu controller, cpu.stat has no throttling counters: the signal is
	// unavailable, not failing. cpu.pressure exists in every v2 cgroup.
	if v, err := (&CgroupThrottle{Cgroup: cg}).Sample(ctx); !errors.Is(err, ErrUnavailable) || v.Unavailable != FieldThrottled {
		t.Errorf("throttling without a cpu controller: %+v %v, want unavailable", v, err)
	}
	psi := &Pressure{File: filepath.Join(dir, "cpu.pressure"), Scope: ScopeCgroup}
	if _, err := psi.Sample(ctx); !errors.Is(err, ErrFirstSample) {
		t.Fatalf("cgroup cpu.pressure: %v", err)
	}

	stopBurner := startBurner(t, dir)
	measure := func(window time.Duration) float64 { return measureUtil(t, cpuS, window) }
	// One spinning thread is at most one of the host's cores.
	busy := measure(2 * time.Second)
	if pv, err := psi.Sample(ctx); err != nil || !pv.Has(FieldCPUPressure) || pv.PressureScope != ScopeCgroup {
		t.Errorf("cgroup cpu pressure: %+v %v", pv, err)
	} else {
		t.Logf("cgroup cpu pressure with one burner: %.3f", pv.CPUPressure)
	}
	t.Logf("cpu util with one burner: %.3f of %v cores (one core = %.3f)", busy, hostCPUs, 1/hostCPUs)
	if busy < 0.5/hostCPUs || busy > 1.1/hostCPUs {
		t.Errorf("cpu util %.3f with one burner, want between %.3f and %.3f", busy, 0.5/hostCPUs, 1.1/hostCPUs)
	}
	stopBurner()
	idle := measure(time.Second)
	t.Logf("cpu util after burner: %.3f", idle)
	if idle > 0.05 {
		t.Errorf("cpu util %.3f after the burner stopped, want < 0.05", idle)
	}
}

// startBurner starts a CPU burner (this test binary, bounded to 20 s by itself), moves it into
// each cgroup directory, and returns a function that kills it and waits; cleanup does too.
func startBurner(t *testing.T, dirs ...string) (stop func()) {
	t.Helper()
	burner := exec.Command(os.Args[0], "-test.run=^$")
	burner.Env = append(os.Environ(), burnEnv+"=20s")
	if err := burner.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { burner.Wait(); close(done) }()
	stop = func() {
		burner.Process.Kill()
		<-done
	}
	t.Cleanup(stop)
	pid := strconv.Itoa(burner.Process.Pid)
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(pid), 0); err != nil {
			t.Fatalf("move burner into %s: %v", d, err)
		}
	}
	return stop
}

// measureUtil is the CPU utilisation over window: a sample, real time passing, a sample.
func measureUtil(t *testing.T, s *CgroupCPU, window time.Duration) float64 {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Sample(ctx); err != nil {
		t.Fatalf("sample: %v", err)
	}
	time.Sleep(window) // real CPU time has to pass: this is what is measured
	v, err := s.Sample(ctx)
	if err != nil || !v.Has(FieldCPUUtil) {
		t.Fatalf("sample: %+v %v", v, err)
	}
	return v.CPUUtil
}

// TestCgroupMemBoundReal checks the memory bound on this machine's real memory controller: a
// cgroup without a limit inside one limited to 192 MiB is bounded by its parent, one with a
// tighter limit of its own by itself, and one with no limit anywhere by the host's MemTotal.
func TestCgroupMemBoundReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the cgroup test needs root")
	}
	parentName := fmt.Sprintf("flowweight-memtest-%d", os.Getpid())
	parent, err := LoadCgroup(parentName)
	if err != nil {
		t.Fatal(err)
	}
	memDir := parent.Memory
	if parent.Version == 2 {
		memDir = parent.Dir
	}
	limitFile := "memory.limit_in_bytes"
	if parent.Version == 2 {
		limitFile = "memory.max"
		if err := os.WriteFile(filepath.Join(filepath.Dir(memDir), "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
			t.Fatal(err)
		}
	}
	child := filepath.Join(memDir, "be1")
	own := filepath.Join(memDir, "be2")
	for _, d := range []string{memDir, child, own} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{child, own, memDir} {
			if err := os.Remove(d); err != nil {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	if parent.Version == 2 {
		if err := os.WriteFile(filepath.Join(memDir, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
			t.Fatal(err)
		}
	}
	write := func(file string, n int) {
		t.Helper()
		if err := os.WriteFile(file, []byte(strconv.Itoa(n)), 0); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(memDir, limitFile), 192<<20)
	write(filepath.Join(own, limitFile), 64<<20)

	hostMem := hostMemTotal(t)
	cgAt := func(dir string) Cgroup {
		if parent.Version == 2 {
			return Cgroup{Version: 2, Dir: dir}
		}
		return Cgroup{Version: 1, Memory: dir}
	}
	// The hierarchy's root has no limit on this machine, so a fresh top-level cgroup without
	// one is bounded by the host.
	top := filepath.Join(filepath.Dir(memDir), fmt.Sprintf("flowweight-memtest-top-%d", os.Getpid()))
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(top); err != nil {
			t.Errorf("remove cgroup %s: %v", top, err)
		}
	})
	tests := []struct {
		dir   string
		bytes uint64
		bound string
	}{
		{child, 192 << 20, MemBoundAncestor + memDir},
		{own, 64 << 20, MemBoundCgroup},
		{memDir, 192 << 20, MemBoundCgroup},
		{top, hostMem, MemBoundHost},
	}
	for _, tt := range tests {
		v, err := (&CgroupMem{Cgroup: cgAt(tt.dir), HostMem: hostMem}).Sample(context.Background())
		t.Logf("%s: %d bytes, bound %s, util %.4f", tt.dir, v.MemBytes, v.MemBound, v.MemUtil)
		if err != nil || v.MemBytes != tt.bytes || v.MemBound != tt.bound {
			t.Errorf("%s: %+v %v, want %d bytes bound %q", tt.dir, v, err, tt.bytes, tt.bound)
		}
	}
}

// hostMemTotal is MemTotal from /proc/meminfo, in bytes.
func hostMemTotal(t *testing.T) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

// resolveAndPrint resolves the cgroup through PID 1 (LoadCgroup) and through HOSTPID, samples
// it through the second, and prints one "name: result" line for each.
func resolveAndPrint(arg string) int {
	p, hostPID, _ := strings.Cut(arg, " ")
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	ms, _ := ParseMountInfo(mounts)
	fmt.Printf("own-cgroup-mounts: %v\n", HasCgroupMount(ms))
	cg, err := LoadCgroup(p)
	fmt.Printf("pid1: %+v err=%v\n", cg, err)
	cg, err = loadCgroup(p, hostPID)
	fmt.Printf("host: %+v err=%v\n", cg, err)
	if err != nil {
		return 0
	}
	v, err := (&CgroupCPU{Cgroup: cg, HostCPUs: 2}).Sample(context.Background())
	fmt.Printf("cpu_count: %v err=%v\n", v.CPUCount, err)
	v, err = (&CgroupMem{Cgroup: cg, HostMem: 1 << 40}).Sample(context.Background())
	fmt.Printf("mem_bytes: %d bound=%s err=%v\n", v.MemBytes, v.MemBound, err)
	return 0
}

// TestCgroupUnderIPNetnsExec runs the probe's cgroup resolution in a network namespace the
// test creates, entered two ways. Under `ip netns exec`, which remounts /sys, the probe's own
// mount namespace has no cgroup mount: the cgroup is found among the mounts of a process in
// the original mount namespace and read through its /proc/PID/root. PID 1 is that process in
// production; on this machine PID 1 refuses the look into its root (permission denied even to
// root), so the test also resolves through a sleeper it started before entering, and checks
// that the PID 1 attempt either works or fails with the advice to use nsenter. Under `nsenter
// --net`, which leaves the mounts alone, the ordinary resolution works.
func TestCgroupUnderIPNetnsExec(t *testing.T) {
	cg := makeCgroup(t)
	ns := fmt.Sprintf("fwtest-cg-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})
	sleeper := exec.Command("sleep", "120")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	pid := strconv.Itoa(sleeper.Process.Pid)
	name := filepath.Base(cg.CPU)
	for _, tt := range []struct {
		name  string
		enter []string
		path  string
		// want is what each output line must contain.
		want map[string]string
	}{
		{"ip netns exec, absolute", []string{"ip", "netns", "exec", ns}, cg.CPU, map[string]string{
			"own-cgroup-mounts": "false",
			"host":              "Root:/proc/" + pid + "/root} err=<nil>",
			"cpu_count":         "0.25 err=",
			"mem_bytes":         fmt.Sprintf("%d bound=cgroup err=<nil>", 256<<20),
		}},
		{"ip netns exec, relative", []string{"ip", "netns", "exec", ns}, name, map[string]string{
			"host":      "Memory:/proc/" + pid + "/root/sys/fs/cgroup/memory/" + name + " Root:/proc/" + pid + "/root} err=<nil>",
			"cpu_count": "0.25 err=",
		}},
		{"nsenter --net", []string{"nsenter", "--net=/var/run/netns/" + ns}, cg.CPU, map[string]string{
			"own-cgroup-mounts": "true",
			"pid1":              "Root:} err=<nil>",
		}},
	} {
		cmd := exec.Command(tt.enter[0], append(tt.enter[1:], os.Args[0], "-test.run=^$")...)
		cmd.Env = append(os.Environ(), resolveEnv+"="+tt.path+" "+pid)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tt.name, err, out)
		}
		t.Logf("%s:\n%s", tt.name, out)
		lines := map[string]string{}
		for line := range strings.Lines(string(out)) {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ": "); ok {
				lines[k] = v
			}
		}
		for k, want := range tt.want {
			if !strings.Contains(lines[k], want) {
				t.Errorf("%s: %s = %q, want it to contain %q", tt.name, k, lines[k], want)
			}
		}
		if strings.HasPrefix(tt.name, "ip netns exec") {
			// Through PID 1: found, or refused with the advice to enter the network namespace only.
			if l := lines["pid1"]; !strings.Contains(l, "Root:/proc/1/root} err=<nil>") && !strings.Contains(l, "nsenter --net=/var/run/netns/NAME") {
				t.Errorf("%s: pid1 = %q, want the cgroup or the nsenter advice", tt.name, l)
			}
		}
	}
}

// A kept descriptor of a removed cgroup's file answers ENODEV; Reread then opens the path
// again and reports it missing, as os.ReadFile would, and finds the file of a cgroup created
// again under the same name.
func TestRereadRemovedCgroup(t *testing.T) {
	cg := makeCgroup(t)
	dir, name := cg.Dir, "cpu.stat"
	if cg.Version == 1 {
		dir, name = cg.CPUAcct, "cpuacct.usage"
	}
	r := &Reread{Path: filepath.Join(dir, name)}
	defer r.Close()
	if b, err := r.Read(); err != nil || len(b) == 0 {
		t.Fatalf("read %q: %q %v", r.Path, b, err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := r.Read(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("removed cgroup: %q %v, want not exist", b, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := r.Read(); err != nil || len(b) == 0 {
		t.Fatalf("cgroup created again: %q %v", b, err)
	}
}
