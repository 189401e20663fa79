//go:build integration

package ofswitch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"flowweight/e2e/lab"
)

// ovsLab is a private Open vSwitch (ovsdb-server + userspace ovs-vswitchd) in a temp dir,
// with one netdev bridge in fail_mode secure whose controller is our Server. Nothing of it
// outlives the test: the daemons are ours by PID and are killed at cleanup.
type ovsLab struct {
	tb       testing.TB
	dir      string
	bridge   string
	dpid     uint64
	env      []string
	db       string
	vswitchd *exec.Cmd
	vsDone   <-chan struct{}
}

// needBinaries fails (never skips) the test when an Open vSwitch tool is missing: in CI
// the integration tier must really run.
func needBinaries(tb testing.TB, names ...string) {
	tb.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			tb.Fatalf("integration test needs %s on PATH (openvswitch-switch, iproute2, ethtool): %v", n, err)
		}
	}
}

func randHex(tb testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startOVSLab starts the daemons and a bridge whose controller is tcp:127.0.0.1:port.
func startOVSLab(tb testing.TB, controllerPort int) *ovsLab {
	tb.Helper()
	return startOVSLabTarget(tb, fmt.Sprintf("tcp:127.0.0.1:%d", controllerPort))
}

// startOVSLabTarget starts the daemons and a bridge whose controller is target (an Open
// vSwitch target such as "ssl:127.0.0.1:6653"); setup is an ovs-vsctl command run before the
// bridge exists (set-ssl, so the first connection attempt already has its certificates).
func startOVSLabTarget(tb testing.TB, target string, setup ...string) *ovsLab {
	tb.Helper()
	needBinaries(tb, "ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl")
	release, err := lab.ClaimHost() // one userspace switch per host at a time (e2e/lab)
	if err != nil {
		tb.Fatalf("claim the host for a userspace Open vSwitch: %v", err)
	}
	tb.Cleanup(func() { _ = release() })
	dir := tb.TempDir()
	suffix := randHex(tb, 3)
	l := &ovsLab{tb: tb, dir: dir, bridge: "fwof" + suffix, db: "unix:" + filepath.Join(dir, "db.sock")}
	l.env = append(os.Environ(), "OVS_RUNDIR="+dir, "OVS_DBDIR="+dir, "OVS_LOGDIR="+dir, "OVS_SYSCONFDIR="+dir)
	dp, err := strconv.ParseUint("fe"+randHex(tb, 7)[:14], 16, 64)
	if err != nil {
		tb.Fatal(err)
	}
	l.dpid = dp
	l.run("ovsdb-tool", "create", filepath.Join(dir, "conf.db"), "/usr/share/openvswitch/vswitch.ovsschema")
	l.start("ovsdb-server", filepath.Join(dir, "conf.db"), "--remote=punix:"+filepath.Join(dir, "db.sock"),
		"--pidfile="+filepath.Join(dir, "ovsdb-server.pid"), "--unixctl="+filepath.Join(dir, "ovsdb-server.ctl"),
		"--log-file="+filepath.Join(dir, "ovsdb-server.log"))
	l.waitFor(filepath.Join(dir, "db.sock"))
	l.vsctl("--no-wait", "init")
	l.startVswitchd()
	if len(setup) > 0 {
		l.vsctl(setup...)
	}
	l.vsctl("add-br", l.bridge, "--", "set", "bridge", l.bridge, "datapath_type=netdev", "protocols=OpenFlow13",
		"fail_mode=secure", fmt.Sprintf("other-config:datapath-id=%016x", l.dpid),
		"--", "set-controller", l.bridge, target)
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("dump-groups on failure:\n%s", l.ofctlOut("dump-groups"))
			tb.Logf("dump-flows on failure:\n%s", l.ofctlOut("dump-flows"))
			log, _ := os.ReadFile(filepath.Join(dir, "ovs-vswitchd.log"))
			tb.Logf("ovs-vswitchd.log tail:\n%s", tail(string(log), 3000))
		}
		l.vsctlNoFail("--if-exists", "del-br", l.bridge)
		// A SIGKILLed ovs-vswitchd (TestOVSSession) leaves the bridge's tap behind: the
		// netdev datapath makes it persistent and only a clean close deletes it. The name
		// is this test's own, so it is ours to remove.
		if _, err := net.InterfaceByName(l.bridge); err == nil {
			if out, err := exec.Command("ip", "link", "del", "dev", l.bridge).CombinedOutput(); err != nil {
				tb.Logf("ip link del %s: %v: %s", l.bridge, err, out)
			}
		}
	})
	return l
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// start runs a daemon in the foreground as our child and kills it at cleanup.
func (l *ovsLab) start(name string, args ...string) (*exec.Cmd, <-chan struct{}) {
	l.tb.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = l.env
	cmd.Dir = l.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		l.tb.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	l.tb.Cleanup(func() {
		stopCmd(cmd, done)
	})
	return cmd, done
}

// stopCmd terminates one child we started, by PID, and waits for it.
func stopCmd(cmd *exec.Cmd, done <-chan struct{}) {
	select {
	case <-done:
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func (l *ovsLab) startVswitchd() {
	l.vswitchd, l.vsDone = l.start("ovs-vswitchd", l.db, "--disable-system",
		"--pidfile="+filepath.Join(l.dir, "ovs-vswitchd.pid"), "--unixctl="+filepath.Join(l.dir, "ovs-vswitchd.ctl"),
		"--log-file="+filepath.Join(l.dir, "ovs-vswitchd.log"))
}

// killVswitchd kills ovs-vswitchd (our child) and waits for it to be gone.
func (l *ovsLab) killVswitchd() {
	l.tb.Helper()
	if err := l.vswitchd.Process.Signal(syscall.SIGKILL); err != nil {
		l.tb.Fatalf("kill ovs-vswitchd pid %d: %v", l.vswitchd.Process.Pid, err)
	}
	select {
	case <-l.vsDone:
	case <-time.After(10 * time.Second):
		l.tb.Fatalf("ovs-vswitchd pid %d still running 10s after SIGKILL", l.vswitchd.Process.Pid)
	}
}

func (l *ovsLab) waitFor(path string) {
	l.tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.tb.Fatalf("%s did not appear within 10s", path)
}

func (l *ovsLab) run(name string, args ...string) string {
	l.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = l.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		l.tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (l *ovsLab) vsctl(args ...string) string {
	l.tb.Helper()
	return l.run("ovs-vsctl", append([]string{"--db=" + l.db, "--timeout=20"}, args...)...)
}

func (l *ovsLab) vsctlNoFail(args ...string) {
	cmd := exec.Command("ovs-vsctl", append([]string{"--db=" + l.db, "--timeout=5"}, args...)...)
	cmd.Env = l.env
	cmd.Run()
}

func (l *ovsLab) mgmt() string { return "unix:" + filepath.Join(l.dir, l.bridge+".mgmt") }

func (l *ovsLab) ofctl(cmd string, args ...string) string {
	l.tb.Helper()
	return l.run("ovs-ofctl", append([]string{"-O", "OpenFlow13", cmd, l.mgmt()}, args...)...)
}

func (l *ovsLab) ofctlOut(cmd string) string {
	c := exec.Command("ovs-ofctl", "-O", "OpenFlow13", cmd, l.mgmt())
	c.Env = l.env
	out, _ := c.CombinedOutput()
	return string(out)
}

// serverOnFreePort runs a Server on a kernel-chosen loopback port until cleanup.
func serverOnFreePort(tb testing.TB, h Handler, cfg Config) (*Server, int) {
	tb.Helper()
	cfg.Listen = "127.0.0.1:0"
	srv, err := NewServer(cfg, h)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			tb.Errorf("Serve did not return")
		}
	})
	return srv, srv.Addr().(*net.TCPAddr).Port
}
