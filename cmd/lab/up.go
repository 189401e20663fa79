package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// upTimeout bounds how long `up` follows the story: building the lab (which may wait for
// another lab's switch on the host lock), then about two minutes of story.
const upTimeout = 8 * time.Minute

// ProxyAddr is where the supervisor forwards the controller's API (and dashboard) into the
// root namespace.
const ProxyAddr = "127.0.0.1:9190"

func upCommand(args []string) int {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	stateDir := fs.String("state", DefaultStateDir, "state directory")
	dir := fs.String("dir", "", "the lab directory, fresh from scripts/lab.sh (binaries in DIR/bin); removed again if a lab already runs")
	_ = fs.Parse(args)
	if err := checkLabDir(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "lab up:", err)
		return 2
	}
	st, err := readState(*stateDir)
	switch {
	case err == nil && supervisorAlive(st):
		fmt.Printf("a lab is already running: %s, supervisor pid %d, started %s\n\n", st.Prefix, st.PID, st.Started.Format(time.RFC3339))
		if st.Dir != *dir {
			_ = os.RemoveAll(*dir) // the build `up` made for nothing
		}
		printStatus(os.Stdout, *stateDir, st)
		return 0
	case err == nil:
		fmt.Printf("stale state: supervisor pid %d of lab %s is gone; cleaning up before starting anew\n", st.PID, st.Prefix)
		if err := teardown(os.Stdout, *stateDir, st); err != nil {
			fmt.Fprintln(os.Stderr, "lab up: cleanup of the stale lab:", err)
			return 1
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		fmt.Fprintf(os.Stderr, "lab up: %v\n(remove %s by hand after checking nothing of that lab runs)\n", err, filepath.Join(*stateDir, stateFile))
		return 1
	}

	if err := os.MkdirAll(*stateDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "lab up:", err)
		return 1
	}
	id, err := newID()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab up:", err)
		return 1
	}
	st, err = startSupervisor(*stateDir, *dir, id)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab up:", err)
		return 1
	}
	fmt.Printf("lab %s: supervisor pid %d (log %s), lab directory %s\n\n", st.Prefix, st.PID, filepath.Join(*stateDir, supervisorLog), st.Dir)
	ok, err := follow(os.Stdout, *stateDir, st, upTimeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab up:", err)
		fmt.Fprintf(os.Stderr, "---- supervisor log (tail) ----\n%s\n", tailFile(filepath.Join(*stateDir, supervisorLog), 40))
		if !supervisorAlive(st) {
			fmt.Println("the supervisor is gone; removing what is left of the lab")
			_ = teardown(os.Stdout, *stateDir, st)
		} else {
			fmt.Println("the lab still runs: `bash scripts/lab.sh status`, `bash scripts/lab.sh down`")
		}
		return 1
	}
	if !ok {
		// The supervisor reported that the lab failed to start (the scenario tears down what it
		// built) and exits; remove the rest so the next `up` starts clean.
		fmt.Fprintf(os.Stderr, "---- supervisor log (tail) ----\n%s\n", tailFile(filepath.Join(*stateDir, supervisorLog), 40))
		waitGone(st, 30*time.Second)
		if err := teardown(os.Stdout, *stateDir, st); err != nil {
			fmt.Fprintln(os.Stderr, "lab up: cleanup:", err)
		}
		return 1
	}
	return 0
}

// newID returns a random 4-character lab id of [a-z0-9].
func newID() (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lab id: %w", err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:]), nil
}

// startSupervisor starts `DIR/bin/lab serve` in its own session with stdin from /dev/null,
// output to the supervisor log and cwd /, so it survives the end of `up` (and of the
// shell), and holds nothing of the clone it was built from. The state file is written
// before anything of the lab exists, so a supervisor that dies half-way is still found.
func startSupervisor(stateDir, dir, id string) (State, error) {
	bin := filepath.Join(dir, "bin", "lab")
	logf, err := os.OpenFile(filepath.Join(stateDir, supervisorLog), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return State{}, err
	}
	defer logf.Close()
	if err := os.WriteFile(filepath.Join(stateDir, storyLog), nil, 0o644); err != nil {
		return State{}, err
	}
	cmd := exec.Command(bin, supervisorVerb, "-state", stateDir, "-dir", dir, "-id", id)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return State{}, fmt.Errorf("start supervisor %s: %w", bin, err)
	}
	st := newState(id, dir, cmd.Process.Pid, ProxyAddr, "", time.Now().UTC())
	if err := writeState(stateDir, st); err != nil {
		_ = cmd.Process.Kill()
		return State{}, err
	}
	_ = cmd.Process.Release()
	return st, nil
}

// follow prints the story log as it grows until its "story done" line (true), a "lab
// failed" line (false), the supervisor's death or the timeout (error).
func follow(w io.Writer, stateDir string, st State, timeout time.Duration) (bool, error) {
	f, err := os.Open(filepath.Join(stateDir, storyLog))
	if err != nil {
		return false, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	deadline := time.Now().Add(timeout)
	var partial string
	for {
		line, err := r.ReadString('\n')
		partial += line
		if err == nil {
			fmt.Fprint(w, partial)
			l := partial
			partial = ""
			switch {
			case strings.HasPrefix(l, storyDone):
				return true, nil
			case strings.HasPrefix(l, storyFailed):
				return false, nil
			}
			continue
		}
		if err != io.EOF {
			return false, err
		}
		if !supervisorAlive(st) {
			// One more read: the last lines may have been written just before it exited.
			rest, _ := io.ReadAll(r)
			fmt.Fprint(w, partial+string(rest))
			if strings.Contains(string(rest), storyDone) {
				return true, nil
			}
			return false, fmt.Errorf("the supervisor (pid %d) exited before the story was done", st.PID)
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("no %q line after %v", storyDone, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func statusCommand(args []string) int {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	stateDir := fs.String("state", DefaultStateDir, "state directory")
	_ = fs.Parse(args)
	st, err := readState(*stateDir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("no lab is running (no " + filepath.Join(*stateDir, stateFile) + ")")
		return 1
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab status:", err)
		return 1
	}
	if !supervisorAlive(st) {
		fmt.Printf("no lab is running: the supervisor (pid %d) of lab %s is gone; `bash scripts/lab.sh down` cleans up\n", st.PID, st.Prefix)
		return 1
	}
	if !printStatus(os.Stdout, *stateDir, st) {
		return 1
	}
	return 0
}

// printStatus says what runs and shows the group and the controller's table; false when
// the switch or the controller do not answer.
func printStatus(w io.Writer, stateDir string, st State) bool {
	fmt.Fprintf(w, "lab %s: supervisor pid %d, up %v, directory %s\n", st.Prefix, st.PID, time.Since(st.Started).Round(time.Second), st.Dir)
	if done, last := storyState(filepath.Join(stateDir, storyLog)); done {
		fmt.Fprintln(w, "story: done ("+filepath.Join(stateDir, storyLog)+")")
	} else {
		fmt.Fprintf(w, "story: in progress, last line: %s\n", last)
	}
	fmt.Fprintf(w, "bridge %s, management socket %s\n", st.Bridge, st.Mgmt)
	fmt.Fprintf(w, "Open vSwitch: %s\n", strings.Join(ovsDaemons(st.Dir), ", "))
	fmt.Fprintln(w, "namespaces and their processes:")
	nss, err := labNamespaces(st.Prefix)
	if err != nil {
		fmt.Fprintf(w, "  (%v)\n", err)
	}
	for _, ns := range nss {
		fmt.Fprintf(w, "  %s\n", ns)
		for _, p := range nsProcs(ns) {
			fmt.Fprintf(w, "    %s\n", p)
		}
	}
	fmt.Fprintf(w, "cgroups: %s\n", strings.Join(labCgroups(st.Prefix), " "))
	fmt.Fprintf(w, "dashboard: http://%s/ (forwarded by the supervisor to %s inside %s)\n\n", st.Proxy, st.API, st.CtlNS)
	ok := true
	out, err := run(10*time.Second, "ovs-ofctl", "-O", "OpenFlow13", "dump-groups", "unix:"+st.Mgmt)
	fmt.Fprintf(w, "$ ovs-ofctl -O OpenFlow13 dump-groups unix:%s\n%s", st.Mgmt, out)
	if err != nil {
		fmt.Fprintf(w, "(%v)\n", err)
		ok = false
	}
	ctl := filepath.Join(st.Dir, "bin", "controller")
	out, err = run(10*time.Second, "ip", "netns", "exec", st.CtlNS, ctl, "status", "-api", "http://"+st.API)
	fmt.Fprintf(w, "\n$ ip netns exec %s %s status -api http://%s\n%s", st.CtlNS, ctl, st.API, out)
	if err != nil {
		fmt.Fprintf(w, "(%v)\n", err)
		ok = false
	}
	return ok
}

// storyState reads the story log: whether it is done, and its last line.
func storyState(path string) (bool, string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	last := lines[len(lines)-1]
	return strings.Contains(string(b), "\n"+storyDone), last
}

func downCommand(args []string) int {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	stateDir := fs.String("state", DefaultStateDir, "state directory")
	_ = fs.Parse(args)
	st, err := readState(*stateDir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("no lab is running (no " + filepath.Join(*stateDir, stateFile) + "): nothing to do")
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab down: %v\n(remove %s by hand after checking nothing of that lab runs)\n", err, filepath.Join(*stateDir, stateFile))
		return 1
	}
	if err := teardown(os.Stdout, *stateDir, st); err != nil {
		fmt.Fprintln(os.Stderr, "lab down:", err)
		return 1
	}
	return 0
}

// supervisorStopWait bounds the supervisor's orderly teardown (the scenario stops each
// process with SIGTERM and up to 5 s before SIGKILL).
const supervisorStopWait = 60 * time.Second

// teardown stops the supervisor (SIGTERM, then SIGKILL by PID), sweeps whatever carries the
// lab's prefix, removes the lab and state directories, and checks nothing is left.
func teardown(w io.Writer, stateDir string, st State) error {
	if supervisorAlive(st) {
		fmt.Fprintf(w, "stopping the supervisor (pid %d, SIGTERM)\n", st.PID)
		_ = syscall.Kill(st.PID, syscall.SIGTERM)
		if !waitGone(st, supervisorStopWait) {
			fmt.Fprintf(w, "supervisor still running after %v: SIGKILL\n", supervisorStopWait)
			_ = syscall.Kill(st.PID, syscall.SIGKILL)
			if !waitGone(st, 10*time.Second) {
				return fmt.Errorf("supervisor pid %d survives SIGKILL", st.PID)
			}
		}
		fmt.Fprintln(w, "supervisor stopped")
	}
	if err := sweep(w, st); err != nil {
		return err
	}
	if left := leftovers(st); len(left) > 0 {
		return fmt.Errorf("lab %s: left after down: %s", st.Prefix, strings.Join(left, "; "))
	}
	if err := os.RemoveAll(st.Dir); err != nil {
		return fmt.Errorf("remove lab directory: %w", err)
	}
	if err := os.RemoveAll(stateDir); err != nil {
		return fmt.Errorf("remove state directory: %w", err)
	}
	fmt.Fprintf(w, "lab %s is down: no namespace, interface, cgroup or process of it is left; removed %s and %s\n", st.Prefix, st.Dir, stateDir)
	return nil
}

func waitGone(st State, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !supervisorAlive(st) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return !supervisorAlive(st)
}

// run runs a helper command with a timeout and returns its combined output.
func run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// procLine describes a process for status: "pid N comm args".
func procLine(pid int) string {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return fmt.Sprintf("pid %d (gone)", pid)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) > 0 {
		args[0] = filepath.Base(args[0])
	}
	return fmt.Sprintf("pid %d %s", pid, strings.Join(args, " "))
}
