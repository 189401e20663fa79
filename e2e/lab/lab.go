package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"
)

// MaxIfName is the longest Linux interface name (IFNAMSIZ-1). Bridge, veth
// and namespace names are all "PREFIX-NAME" and must fit in it, because the
// same string names the interface, the namespace and the cgroup.
const MaxIfName = 15

// CommandTimeout bounds every helper command (ip, ovs-vsctl, ethtool, ...),
// so a wedged daemon fails a test instead of hanging it.
const CommandTimeout = 30 * time.Second

var idPattern = regexp.MustCompile(`^[a-z0-9]{1,6}$`)

// Lab owns every resource it created and tears them down in reverse order.
type Lab struct {
	// Dir holds the OVS database, sockets and every log file.
	Dir string
	// ID is the short random lab id; Prefix is "fw"+ID and starts every name.
	ID, Prefix string
	// Log receives the lab's own structured log (slog text, lowercase keys).
	Log *slog.Logger

	mu        sync.Mutex
	teardowns []teardown
	closed    bool
	closeErr  error
	names     map[string]bool
	procs     []*Proc
	ovs       *OVS
	bridges   []*Bridge
	nbridges  int
}

type teardown struct {
	what string
	fn   func() error
}

// New creates a lab whose files live in dir (created if missing) with a
// random 4-hex-digit id. log may be nil to discard the lab's log.
func New(dir string, log io.Writer) (*Lab, error) {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("lab: random id: %w", err)
	}
	return NewWithID(dir, hex.EncodeToString(b[:]), log)
}

// NewWithID is New with a chosen id (1–6 of [a-z0-9]), for a demo whose
// "down" step must find the same names again (see Sweep).
func NewWithID(dir, id string, log io.Writer) (*Lab, error) {
	if !idPattern.MatchString(id) {
		return nil, fmt.Errorf("lab: id %q: want 1-6 characters of [a-z0-9]", id)
	}
	if dir == "" {
		return nil, errors.New("lab: empty dir")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lab: dir: %w", err)
	}
	if log == nil {
		log = io.Discard
	}
	l := &Lab{
		Dir:    dir,
		ID:     id,
		Prefix: "fw" + id,
		names:  map[string]bool{},
	}
	l.Log = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})).With("lab", l.Prefix)
	return l, nil
}

// Close tears down everything in reverse order of creation and returns every
// error joined. It is idempotent: later calls return the first result.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		err := l.closeErr
		l.mu.Unlock()
		return err
	}
	l.closed = true
	tds := l.teardowns
	l.teardowns = nil
	l.mu.Unlock()

	var errs []error
	for i := len(tds) - 1; i >= 0; i-- {
		if err := tds[i].fn(); err != nil {
			l.Log.Warn("teardown failed", "what", tds[i].what, "err", err)
			errs = append(errs, fmt.Errorf("teardown %s: %w", tds[i].what, err))
		}
	}
	err := errors.Join(errs...)
	l.mu.Lock()
	l.closeErr = err
	l.mu.Unlock()
	return err
}

// onClose registers fn to run at Close, after everything registered later.
// It fails when the lab is already closed, so nothing is created unowned.
func (l *Lab) onClose(what string, fn func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("lab %s closed: cannot add %s", l.Prefix, what)
	}
	l.teardowns = append(l.teardowns, teardown{what: what, fn: fn})
	return nil
}

// claimName turns a caller's short name into the lab-wide unique
// "PREFIX-NAME", checking length (it names interfaces) and characters.
func (l *Lab) claimName(kind, name string) (string, error) {
	full, err := l.fullName(name)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", kind, name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return "", fmt.Errorf("%s %q: lab %s closed", kind, name, l.Prefix)
	}
	// Bridges and hosts share one space (both name interfaces); cgroups
	// have their own, so a backend's host and cgroup can share a name.
	space := "if"
	if kind == "cgroup" {
		space = kind
	}
	if l.names[space+":"+full] {
		return "", fmt.Errorf("%s %q: name %q already used in lab %s", kind, name, full, l.Prefix)
	}
	l.names[space+":"+full] = true
	return full, nil
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_]*$`)

func (l *Lab) fullName(name string) (string, error) {
	if !namePattern.MatchString(name) {
		return "", errors.New("want [a-z0-9][a-z0-9_]*")
	}
	full := l.Prefix + "-" + name
	if len(full) > MaxIfName {
		return "", fmt.Errorf("%q is %d characters, interface names allow %d", full, len(full), MaxIfName)
	}
	return full, nil
}

// run executes a helper command with CommandTimeout and returns its stdout;
// the error names the command and carries its stderr.
func (l *Lab) run(env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	l.Log.Debug("run", "cmd", name+" "+strings.Join(args, " "), "err", err)
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Tail returns the last n lines of a file, or a note saying why it cannot.
func Tail(path string, n int) string {
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

// Poll calls f every 50 ms until it returns nil or timeout passes, and returns
// f's last error. Used only for waiting on real daemons and processes.
func Poll(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
