//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/lab"
)

// labStateDir is where scripts/lab.sh records the running lab (cmd/lab DefaultStateDir).
const labStateDir = "/run/flowweight-lab"

// labDemoState is the part of the lab's state file this test reads (redeclared, as the
// command is a main package).
type labDemoState struct {
	PID    int    `json:"pid"`
	Prefix string `json:"prefix"`
	Dir    string `json:"dir"`
}

// TestLabDemo runs the README's first command from a clean clone of the committed tree:
// `bash scripts/lab.sh up` must bring the lab up and tell the story with at least one weight
// change visible in the dump-groups it prints; `up` again must say the lab runs and exit 0;
// `status` must exit 0; `down` must leave no namespace, interface, cgroup or process of the
// lab (by its recorded prefix and directory), then `status` fails and `down` is a no-op.
func TestLabDemo(t *testing.T) {
	for _, bin := range []string{"git", "go", "bash", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ip", "ethtool", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("the lab demo needs %s: %v (scripts/deps.sh installs the packages)", bin, err)
		}
	}
	if _, err := os.Stat(filepath.Join(labStateDir, "state.json")); err == nil {
		t.Fatalf("a lab is already running (%s/state.json): this test does not touch another's lab; `bash scripts/lab.sh down` first", labStateDir)
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	clone := filepath.Join(t.TempDir(), "flowweight")
	if out, err := exec.Command("git", "clone", "-q", strings.TrimSpace(string(root)), clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	script := func(timeout time.Duration, verb string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "scripts/lab.sh", verb)
		cmd.Dir = clone
		cmd.WaitDelay = 10 * time.Second
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		err := cmd.Run()
		t.Logf("lab.sh %s: %v, exit %d", verb, time.Since(t0).Round(100*time.Millisecond), cmd.ProcessState.ExitCode())
		if ctx.Err() != nil {
			t.Errorf("lab.sh %s: not done after %v", verb, timeout)
		}
		if err != nil && cmd.ProcessState == nil {
			t.Fatalf("lab.sh %s: %v", verb, err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}

	var supervisorLog, upOut string
	downDone := false
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(labStateDir, "supervisor.log")); err == nil {
				supervisorLog = string(b)
			}
			t.Logf("supervisor log:\n%s", supervisorLog)
			t.Logf("story (output of lab.sh up):\n%s", upOut)
		}
		if !downDone {
			out, code := script(2*time.Minute, "down")
			t.Logf("cleanup: lab.sh down (exit %d):\n%s", code, out)
		}
	})

	var code int
	upOut, code = script(5*time.Minute, "up")
	if b, err := os.ReadFile(filepath.Join(labStateDir, "supervisor.log")); err == nil {
		supervisorLog = string(b)
	}
	if code != 0 || !strings.Contains(upOut, "== story done") {
		t.Fatalf("lab.sh up: exit %d, no story done line", code)
	}
	// Every check of the story must hold: a newcomer's first screen that says "did not hold"
	// says the product failed.
	if i := strings.Index(upOut, "== story done"); !strings.Contains(upOut[i:], "checks held") {
		line, _, _ := strings.Cut(upOut[i:], "\n")
		t.Errorf("the story's checks: %s", line)
	}
	stateData, err := os.ReadFile(filepath.Join(labStateDir, "state.json"))
	if err != nil {
		t.Fatalf("lab up, but no state file: %v", err)
	}
	var st labDemoState
	if err := json.Unmarshal(stateData, &st); err != nil || !strings.HasPrefix(st.Prefix, "fw") || len(st.Prefix) < 3 || st.PID <= 1 || !filepath.IsAbs(st.Dir) {
		t.Fatalf("state file %s: %v (%+v)", stateData, err, st)
	}
	t.Logf("lab %s, supervisor pid %d, dir %s", st.Prefix, st.PID, st.Dir)
	for _, want := range []string{"1. what was built", "bridge " + st.Prefix + "-br", "VIP ", "be1", "be2", "be3", "0.25 core", "1.00 core", "BACKEND"} {
		if !strings.Contains(upOut, want) {
			t.Errorf("the story does not show %q", want)
		}
	}
	snaps, err := groupSnapshots(upOut)
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i := 1; i < len(snaps); i++ {
		if !slices.Equal(snaps[i], snaps[0]) {
			changed++
		}
	}
	t.Logf("group 1 as printed by dump-groups in the story: %v", snaps)
	if len(snaps) < 2 || changed == 0 {
		t.Fatalf("no weight change across the %d dump-groups outputs of the story: %v", len(snaps), snaps)
	}

	// Idempotent up: says the lab runs, shows status, exit 0, and starts nothing new.
	out, code := script(3*time.Minute, "up")
	if code != 0 || !strings.Contains(out, "already running") || !strings.Contains(out, st.Prefix) {
		t.Errorf("second lab.sh up: exit %d, want 0 and \"already running\" for %s:\n%s", code, st.Prefix, out)
	}
	if again, err := os.ReadFile(filepath.Join(labStateDir, "state.json")); err != nil || !bytes.Equal(again, stateData) {
		t.Errorf("second up changed the state file (%v):\n%s\nwas\n%s", err, again, stateData)
	}
	out, code = script(time.Minute, "status")
	if code != 0 || !strings.Contains(out, "group_id=1") || !strings.Contains(out, "BACKEND") || !strings.Contains(out, st.Prefix+"-ctl") {
		t.Errorf("lab.sh status: exit %d, want 0 with the group, the table and the namespaces:\n%s", code, out)
	}

	ovsPIDs := labDemoOVSPIDs(st.Dir)
	if len(ovsPIDs) != 2 {
		t.Errorf("the lab's Open vSwitch pidfiles in %s/ovs give %v, want ovsdb-server and ovs-vswitchd", st.Dir, ovsPIDs)
	}
	out, code = script(2*time.Minute, "down")
	downDone = code == 0
	if code != 0 {
		t.Fatalf("lab.sh down: exit %d:\n%s", code, out)
	}
	t.Logf("lab.sh down:\n%s", out)
	for _, left := range labDemoLeftovers(t, st, ovsPIDs) {
		t.Errorf("left after down: %s", left)
	}
	for _, p := range []string{labStateDir, st.Dir} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s still exists after down", p)
		}
	}
	if out, code := script(time.Minute, "status"); code == 0 {
		t.Errorf("lab.sh status after down: exit 0, want non-zero:\n%s", out)
	}
	if out, code := script(time.Minute, "down"); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Errorf("second lab.sh down: exit %d, want 0 and \"nothing to do\":\n%s", code, out)
	}
}

// groupSnapshots returns group 1's bucket weights from every dump-groups output in the
// story, in order.
func groupSnapshots(story string) ([][]uint16, error) {
	var snaps [][]uint16
	for _, line := range strings.Split(story, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "group_id=1,") {
			continue
		}
		gs, err := lab.ParseGroups(line)
		if err != nil {
			return nil, fmt.Errorf("story: %w", err)
		}
		var ws []uint16
		for _, b := range gs[0].Buckets {
			ws = append(ws, b.Weight)
		}
		snaps = append(snaps, ws)
	}
	if len(snaps) == 0 {
		return nil, fmt.Errorf("story: no dump-groups output with group_id=1")
	}
	return snaps, nil
}

// labDemoOVSPIDs reads the lab's ovsdb-server and ovs-vswitchd pidfiles.
func labDemoOVSPIDs(dir string) map[string]int {
	pids := map[string]int{}
	for _, d := range []string{"ovsdb-server", "ovs-vswitchd"} {
		b, err := os.ReadFile(filepath.Join(dir, "ovs", d+".pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pids[d] = pid
		}
	}
	return pids
}

// labDemoLeftovers lists namespaces, interfaces and cgroups with the lab's prefix, processes
// whose command line names the lab's directory, and the lab's supervisor and Open vSwitch
// daemons if any still runs.
func labDemoLeftovers(t *testing.T, st labDemoState, ovsPIDs map[string]int) []string {
	var left []string
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], st.Prefix) {
			left = append(left, "namespace "+f[0])
		}
	}
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Name(), st.Prefix) {
			left = append(left, "interface "+l.Name())
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := lab.ParseMountinfo(string(mi))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		ents, _ := os.ReadDir(m.MountPoint)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), st.Prefix) {
				left = append(left, "cgroup "+filepath.Join(m.MountPoint, e.Name()))
			}
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(st.Dir+"/")) || bytes.Contains(cmdline, append([]byte(st.Dir), 0)) {
			left = append(left, fmt.Sprintf("process %d %q", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte(" "))))
		}
	}
	// A zombie is gone (it holds nothing); who reaps an orphaned supervisor, and when, is
	// up to the machine's init.
	running := func(pid int, comm string) bool {
		c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			return false
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := bytes.LastIndexByte(stat, ')')
		return err == nil && !(i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z')
	}
	for d, pid := range ovsPIDs {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if running(pid, d) && bytes.Contains(cmdline, []byte(st.Dir)) {
			left = append(left, fmt.Sprintf("%s pid %d", d, pid))
		}
	}
	if running(st.PID, "lab") {
		left = append(left, fmt.Sprintf("supervisor pid %d", st.PID))
	}
	return left
}
