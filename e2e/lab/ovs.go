package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// OVSSchema is the Open_vSwitch database schema of the Debian package.
const OVSSchema = "/usr/share/openvswitch/vswitch.ovsschema"

// LockPath is the host-wide lock serialising lab switches (see the package
// comment: one netdev datapath per network namespace).
var LockPath = filepath.Join(os.TempDir(), "flowweight-lab-ovs.lock")

// LockWait bounds how long StartOVS waits for another lab's switch.
var LockWait = 5 * time.Minute

// DaemonTimeout bounds how long a daemon may take to become ready.
const DaemonTimeout = 15 * time.Second

// sunPathMax is the usable length of a unix socket path (sun_path - NUL).
const sunPathMax = 107

// OVS is a private Open vSwitch: its own database, sockets and logs in
// RunDir, its daemons started and stopped by the lab.
type OVS struct {
	// RunDir holds conf.db, db.sock, BRIDGE.mgmt sockets and the daemon logs.
	RunDir string

	lab      *Lab
	mu       sync.Mutex
	vswitchd *Proc
	restarts int
	bridges  []*Bridge
}

// StartOVS creates a database from OVSSchema and starts ovsdb-server and
// ovs-vswitchd --disable-system with OVS_RUNDIR, OVS_DBDIR, OVS_LOGDIR and
// OVS_SYSCONFDIR all pointing into Dir/ovs. It returns when the switch
// answers on its control socket. Errors carry the daemon's log tail.
func (l *Lab) StartOVS() (*OVS, error) {
	for _, bin := range []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("start ovs: %w (install openvswitch-switch)", err)
		}
	}
	l.mu.Lock()
	if l.ovs != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("start ovs: lab %s already has a switch", l.Prefix)
	}
	l.mu.Unlock()
	o := &OVS{RunDir: filepath.Join(l.Dir, "ovs"), lab: l}
	if n := len(filepath.Join(o.RunDir, l.Prefix+"-xxxxxxxx.mgmt")); n > sunPathMax {
		return nil, fmt.Errorf("start ovs: dir %s too long: socket paths would be %d bytes, unix sockets allow %d", o.RunDir, n, sunPathMax)
	}
	if err := os.MkdirAll(o.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("start ovs: %w", err)
	}
	unlock, err := lockHost(LockPath, LockWait)
	if err != nil {
		return nil, fmt.Errorf("start ovs: %w", err)
	}
	if err := l.onClose("ovs host lock", unlock); err != nil {
		return nil, errors.Join(err, unlock())
	}
	// A datapath tap left by a killed vswitchd (the tap is persistent) or
	// held by a switch that does not use the lock makes every bridge fail.
	// With no ovs-vswitchd running on the host it can only be stale, and is
	// removed; otherwise wait for its owner, then say what is wrong.
	if err := Poll(30*time.Second, func() error {
		if _, err := os.Stat("/sys/class/net/ovs-netdev"); err != nil {
			return nil
		}
		if !vswitchdRunning() {
			l.Log.Warn("removing stale datapath tap ovs-netdev (no ovs-vswitchd runs)")
			if err := deleteLink(l, "ovs-netdev"); err != nil {
				return err
			}
			return nil
		}
		return errors.New("tap device ovs-netdev exists and an ovs-vswitchd runs: another netdev switch is up in this network namespace")
	}); err != nil {
		return nil, fmt.Errorf("start ovs: %w", err)
	}

	db := filepath.Join(o.RunDir, "conf.db")
	if _, err := l.run(o.env(), "ovsdb-tool", "create", db, OVSSchema); err != nil {
		return nil, fmt.Errorf("start ovs: %w", err)
	}
	srv := exec.Command("ovsdb-server", db,
		"--remote=punix:"+o.dbSock(),
		"--pidfile="+filepath.Join(o.RunDir, "ovsdb-server.pid"),
		"--unixctl="+filepath.Join(o.RunDir, "ovsdb-server.ctl"),
		"--log-file="+filepath.Join(o.RunDir, "ovsdb-server.log"))
	srv.Env = append(os.Environ(), o.env()...)
	srvProc, err := l.Start("ovsdb-server", srv, nil)
	if err != nil {
		return nil, fmt.Errorf("start ovs: %w", err)
	}
	if err := Poll(DaemonTimeout, func() error {
		if srvProc.Exited() {
			return fmt.Errorf("ovsdb-server exited: %v", srvProc.Wait())
		}
		_, err := o.Vsctl("--no-wait", "init")
		return err
	}); err != nil {
		return nil, fmt.Errorf("start ovs: ovsdb-server not ready: %w\n%s", err, Tail(filepath.Join(o.RunDir, "ovsdb-server.log"), 20))
	}
	if err := o.startVswitchd(); err != nil {
		return nil, fmt.Errorf("start ovs: %w", err)
	}
	if err := l.onClose("ovs-vswitchd", o.stopVswitchd); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.ovs = o
	l.mu.Unlock()
	return o, nil
}

func (o *OVS) env() []string {
	return []string{"OVS_RUNDIR=" + o.RunDir, "OVS_DBDIR=" + o.RunDir, "OVS_LOGDIR=" + o.RunDir, "OVS_SYSCONFDIR=" + o.RunDir}
}

func (o *OVS) dbSock() string { return filepath.Join(o.RunDir, "db.sock") }

// VswitchdLog is the path of ovs-vswitchd's own log file.
func (o *OVS) VswitchdLog() string { return filepath.Join(o.RunDir, "ovs-vswitchd.log") }

func (o *OVS) ctlSock() string { return filepath.Join(o.RunDir, "ovs-vswitchd.ctl") }

func (o *OVS) startVswitchd() error {
	o.mu.Lock()
	name := "ovs-vswitchd"
	if o.restarts > 0 {
		name += "." + strconv.Itoa(o.restarts)
	}
	o.mu.Unlock()
	cmd := exec.Command("ovs-vswitchd", "unix:"+o.dbSock(), "--disable-system",
		"--pidfile="+filepath.Join(o.RunDir, "ovs-vswitchd.pid"),
		"--unixctl="+o.ctlSock(),
		"--log-file="+o.VswitchdLog())
	cmd.Env = append(os.Environ(), o.env()...)
	p, err := o.lab.startProc(name, cmd, nil)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.vswitchd = p
	o.mu.Unlock()
	err = Poll(DaemonTimeout, func() error {
		if p.Exited() {
			return fmt.Errorf("ovs-vswitchd exited: %v", p.Wait())
		}
		_, err := o.lab.run(o.env(), "ovs-appctl", "-t", o.ctlSock(), "version")
		return err
	})
	if err == nil {
		// A write without --no-wait returns only once ovs-vswitchd has
		// applied the database (cur_cfg caught up with next_cfg).
		_, err = o.Vsctl("set", "Open_vSwitch", ".", "external_ids:flowweight-lab="+o.lab.Prefix)
	}
	if err != nil {
		return fmt.Errorf("ovs-vswitchd not ready: %w\n%s", errors.Join(err, p.Stop()), Tail(o.VswitchdLog(), 20))
	}
	return nil
}

func (o *OVS) stopVswitchd() error {
	o.mu.Lock()
	p := o.vswitchd
	o.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop()
}

// Vsctl runs ovs-vsctl against this switch's database, waiting at most
// 10 s for ovs-vswitchd to apply a change.
func (o *OVS) Vsctl(args ...string) (string, error) {
	out, err := o.lab.run(o.env(), "ovs-vsctl", append([]string{"--db=unix:" + o.dbSock(), "--timeout=10"}, args...)...)
	return strings.TrimSpace(out), err
}

// Appctl runs ovs-appctl against this switch's ovs-vswitchd.
func (o *OVS) Appctl(args ...string) (string, error) {
	out, err := o.lab.run(o.env(), "ovs-appctl", append([]string{"-t", o.ctlSock()}, args...)...)
	return strings.TrimSpace(out), err
}

// PID is ovs-vswitchd's current process id.
func (o *OVS) PID() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.vswitchd.PID
}

// Restart stops ovs-vswitchd by its PID (SIGTERM, then SIGKILL) and starts it
// again on the same database: bridges and ports come back from the database,
// flows and groups are gone, as after a switch crash — for resync tests.
// It returns once every bridge answers OpenFlow again.
func (o *OVS) Restart() error {
	if err := o.stopVswitchd(); err != nil {
		return fmt.Errorf("restart ovs-vswitchd: %w", err)
	}
	o.mu.Lock()
	o.restarts++
	bridges := append([]*Bridge(nil), o.bridges...)
	o.mu.Unlock()
	if err := o.startVswitchd(); err != nil {
		return fmt.Errorf("restart ovs-vswitchd: %w", err)
	}
	for _, b := range bridges {
		if err := Poll(DaemonTimeout, func() error { _, err := b.Ofctl("show"); return err }); err != nil {
			return fmt.Errorf("restart ovs-vswitchd: bridge %s: %w\n%s", b.Name, err, Tail(o.VswitchdLog(), 20))
		}
	}
	return nil
}

// lockHost takes an exclusive flock on path, polling until wait passes.
func lockHost(path string, wait time.Duration) (func() error, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("host lock %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("host lock %s (another lab's switch is running) after %v: %w", path, wait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() { err = f.Close() }) // closing drops the flock
		return err
	}, nil
}

// ClaimHost takes the host-wide lock for a userspace Open vSwitch (LockPath, waiting up to
// LockWait) and removes a datapath tap ovs-netdev left by a killed ovs-vswitchd, for tests
// that start their own switch without a Lab: two netdev switches cannot run at once on one
// host, and a stale tap makes every later bridge fail. Call release when the switch is gone.
func ClaimHost() (release func() error, err error) {
	unlock, err := lockHost(LockPath, LockWait)
	if err != nil {
		return nil, err
	}
	if err := Poll(30*time.Second, func() error {
		if _, err := os.Stat("/sys/class/net/ovs-netdev"); err != nil {
			return nil
		}
		if !vswitchdRunning() {
			if out, err := exec.Command("ip", "link", "delete", "ovs-netdev").CombinedOutput(); err != nil {
				return fmt.Errorf("removing stale tap ovs-netdev: %v: %s", err, out)
			}
			return nil
		}
		return errors.New("tap device ovs-netdev exists and an ovs-vswitchd runs: another netdev switch is up")
	}); err != nil {
		return nil, errors.Join(err, unlock())
	}
	return unlock, nil
}
