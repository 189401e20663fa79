package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// StopTimeout is how long Proc.Stop waits after SIGTERM before SIGKILL.
const StopTimeout = 5 * time.Second

// Proc is a process the lab started. Only its own PID is ever signalled.
type Proc struct {
	Name string
	// PID is the process id; with a cgroup or a namespace the wrappers exec
	// into the program, so this is the program's own PID.
	PID int
	// LogPath receives the process's stdout and stderr unless the caller set
	// cmd.Stdout/Stderr.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
	logf *os.File
}

// Start starts cmd as NAME, logging to Dir/NAME.log, and stops it at Close.
//
// With cg set the process joins the cgroup before the program runs: cmd is
// wrapped in `sh -c 'echo $$ > DIR/cgroup.procs ... && exec "$@"'`. Moving
// the PID after Start instead would let the program run (and fork threads or
// children, which v1 does not move along) outside its quota for a moment.
// cmd must not have been started; its context, Env and Dir are kept.
func (l *Lab) Start(name string, cmd *exec.Cmd, cg *Cgroup) (*Proc, error) {
	p, err := l.startProc(name, cmd, cg)
	if err != nil {
		return nil, err
	}
	if err := l.onClose("process "+name, p.Stop); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// startProc is Start without registering the teardown, for daemons whose
// owner stops them itself (ovs-vswitchd across Restart).
func (l *Lab) startProc(name string, cmd *exec.Cmd, cg *Cgroup) (*Proc, error) {
	if cmd.Process != nil {
		return nil, fmt.Errorf("start %s: command already started", name)
	}
	if cmd.Err != nil {
		return nil, fmt.Errorf("start %s: %w", name, cmd.Err)
	}
	if strings.ContainsAny(name, "/ ") || name == "" {
		return nil, fmt.Errorf("start %q: name must be non-empty without '/' or spaces", name)
	}
	if cg != nil {
		if err := wrapInCgroup(cmd, cg); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
	}
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{}), LogPath: filepath.Join(l.Dir, name+".log")}
	if cmd.Stdout == nil || cmd.Stderr == nil {
		f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("start %s: log: %w", name, err)
		}
		p.logf = f
		if cmd.Stdout == nil {
			cmd.Stdout = f
		}
		if cmd.Stderr == nil {
			cmd.Stderr = f
		}
	}
	if err := cmd.Start(); err != nil {
		if p.logf != nil {
			p.logf.Close()
		}
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.PID = cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		if p.logf != nil {
			p.logf.Close()
		}
		close(p.done)
	}()
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	l.Log.Info("started", "proc", name, "pid", p.PID, "cgroup", cgName(cg))
	return p, nil
}

func cgName(cg *Cgroup) string {
	if cg == nil {
		return ""
	}
	return cg.Name
}

// wrapInCgroup rewrites cmd to join every directory of cg, then exec the
// original program with the original arguments.
func wrapInCgroup(cmd *exec.Cmd, cg *Cgroup) error {
	sh, err := exec.LookPath("sh")
	if err != nil {
		return fmt.Errorf("cgroup wrapper: %w", err)
	}
	var script strings.Builder
	for _, d := range cg.Dirs() {
		fmt.Fprintf(&script, "echo $$ > %s && ", shellQuote(filepath.Join(d, "cgroup.procs")))
	}
	script.WriteString(`exec "$@"`)
	args := append([]string{"sh", "-c", script.String(), "sh", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = sh
	cmd.Args = args
	return nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Done is closed when the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for exit and returns what exec.Cmd.Wait returned.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process's PID (no-op once it has exited).
func (p *Proc) Signal(sig os.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s (pid %d): %w", p.Name, p.PID, err)
	}
	return nil
}

// Stop sends SIGTERM, then SIGKILL after StopTimeout, and waits for exit.
// An exit caused by those signals is not an error; idempotent.
func (p *Proc) Stop() error {
	if p.Exited() {
		return nil
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(StopTimeout):
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return fmt.Errorf("stop %s (pid %d): ignored SIGTERM for %v, killed", p.Name, p.PID, StopTimeout)
	case <-time.After(StopTimeout):
		return fmt.Errorf("stop %s (pid %d): still running after SIGKILL", p.Name, p.PID)
	}
}
