package lab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Sweep removes what a crashed or killed lab with this prefix left behind:
// namespaces (after killing the processes inside them), interfaces in this
// namespace (veths, bridge taps) and cgroups whose names start with prefix,
// and — when dir is not empty — the ovsdb-server and ovs-vswitchd whose
// pidfiles are in dir/ovs and whose command line names dir. It never
// touches anything without the prefix; prefix must be a lab prefix ("fw"
// plus at least one character). When no ovs-vswitchd is left running on
// the host, a stray "ovs-netdev" datapath tap (which would block every
// later lab) is removed too.
func Sweep(prefix, dir string, log io.Writer) error {
	if !strings.HasPrefix(prefix, "fw") || len(prefix) < 3 {
		return fmt.Errorf("sweep: prefix %q: want a lab prefix like fw1a2b", prefix)
	}
	l, err := NewWithID(os.TempDir(), "sweep", log)
	if err != nil {
		return err
	}
	var errs []error
	if dir != "" {
		for _, d := range []string{"ovs-vswitchd", "ovsdb-server"} {
			if err := killPidfile(l, filepath.Join(dir, "ovs", d+".pid"), d, dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	out, err := l.run(nil, "ip", "netns", "list")
	if err != nil {
		errs = append(errs, err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			if err := deleteNetns(l, f[0]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range links {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := deleteLink(l, e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if !vswitchdRunning() {
		if err := deleteLink(l, "ovs-netdev"); err != nil {
			errs = append(errs, err)
		}
	}
	if lay, err := DetectCgroups(); err == nil {
		for _, root := range []string{lay.CPU, lay.CPUAcct} {
			if root == "" {
				continue
			}
			ents, _ := os.ReadDir(root)
			for _, e := range ents {
				if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
					if err := removeCgroupDir(filepath.Join(root, e.Name())); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
	} else {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killPidfile kills the daemon named in pidfile only if /proc says it is
// that daemon running from dir, so a reused PID is never hit.
func killPidfile(l *Lab, pidfile, comm, dir string) error {
	b, err := os.ReadFile(pidfile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("sweep: %s: %w", pidfile, err)
	}
	c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return nil // not running
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if strings.TrimSpace(string(c)) != comm || !bytes.Contains(cmdline, []byte(dir)) {
		return nil
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	l.Log.Warn("sweep: killing leftover daemon", "daemon", comm, "pid", pid)
	if err := p.Kill(); err != nil {
		return fmt.Errorf("sweep: kill %s pid %d: %w", comm, pid, err)
	}
	// Wait until it is gone (or a zombie), so that the ovs-netdev check
	// below does not see it running.
	return Poll(5*time.Second, func() error {
		if !alive(pid) {
			return nil
		}
		return fmt.Errorf("sweep: %s pid %d still running after SIGKILL", comm, pid)
	})
}

func vswitchdRunning() bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		c, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(c)) == "ovs-vswitchd" {
			if pid, _ := strconv.Atoi(e.Name()); alive(pid) {
				return true
			}
		}
	}
	return false
}

// alive reports whether pid exists and is not a zombie (a killed daemon
// whose parent has not reaped it holds no devices any more).
func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i < 0 || i+2 >= len(st) || st[i+2] != 'Z'
}
