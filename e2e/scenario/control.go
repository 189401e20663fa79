package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"flowweight/e2e/lab"
)

const (
	sigSTOP = syscall.SIGSTOP
	sigCONT = syscall.SIGCONT
)

// writeAtomic replaces path in one rename, so the controller's file watcher never reads a
// half-written configuration.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return fmt.Errorf("scenario: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("scenario: rename %s: %w", tmp, err)
	}
	return nil
}

func (s *Scenario) writeConfig() error {
	for i := range s.Opts.Controllers {
		s.mu.Lock()
		text := ControllerTOML(s.Opts, s.SocketOf(i), s.KeyFile, s.capacities, s.mode)
		s.mu.Unlock()
		if s.Opts.Controllers > 1 {
			text = haTOML(s.Opts, text, i)
		}
		if err := writeAtomic(s.ConfigPathOf(i), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// StartController starts the controller binary inside "ctl" (log: Dir/controller.log,
// appended across restarts; state file: Dir/controller.state, kept across restarts as on a
// host, never shared with another lab or the host's /var/lib/flowweight) and waits until its
// API answers.
func (s *Scenario) StartController() error { return s.StartControllerN(0) }

// StartControllerN starts controller i (see Options.Controllers) and waits until its API
// answers.
func (s *Scenario) StartControllerN(i int) error {
	s.mu.Lock()
	if p := s.ctlProcs[i]; p != nil && !p.Exited() {
		s.mu.Unlock()
		return fmt.Errorf("scenario: controller %d already running", i)
	}
	s.mu.Unlock()
	cmd := s.Ctl.Command(context.Background(), s.Opts.Bins.Controller, "-config", s.ConfigPathOf(i),
		"-state", s.StatePathOf(i))
	p, err := s.Lab.Start(controllerFile(i, ""), cmd, nil)
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	s.mu.Lock()
	if s.ctlProcs == nil {
		s.ctlProcs = map[int]*lab.Proc{}
	}
	s.ctlProcs[i] = p
	s.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var v []json.RawMessage
		err := s.APIOf(i, "/api/v1/services", &v)
		if err == nil {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("scenario: controller exited during start: %v\n%s", p.Wait(), lab.Tail(p.LogPath, 20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scenario: controller API not answering after 15s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopController stops the controller (SIGTERM). The switch keeps its flows (fail secure).
func (s *Scenario) StopController() error {
	s.mu.Lock()
	p := s.ctlProcs[0]
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	if err := p.Stop(); err != nil {
		return fmt.Errorf("scenario: stop controller: %w", err)
	}
	return nil
}

// KillController ends the controller with SIGKILL, as a crash would.
func (s *Scenario) KillController() error { return s.KillControllerN(0) }

// KillControllerN ends controller i with SIGKILL and waits for it to be gone.
func (s *Scenario) KillControllerN(i int) error {
	s.mu.Lock()
	p := s.ctlProcs[i]
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("scenario: kill controller %d: %w", i, err)
	}
	<-p.Done()
	return nil
}

// SignalControllerN sends sig to controller i (SIGSTOP, SIGCONT).
func (s *Scenario) SignalControllerN(i int, sig syscall.Signal) error {
	s.mu.Lock()
	p := s.ctlProcs[i]
	s.mu.Unlock()
	if p == nil || p.Exited() {
		return fmt.Errorf("scenario: controller %d is not running", i)
	}
	return p.Signal(sig)
}

// RestartController stops and starts the controller.
func (s *Scenario) RestartController() error {
	if err := s.StopController(); err != nil {
		return err
	}
	return s.StartController()
}

// ControllerPID is the running controller's process id (0 if none).
func (s *Scenario) ControllerPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.ctlProcs[0]
	if p == nil || p.Exited() {
		return 0
	}
	return p.PID
}

// ControllerLog is the controller's log file.
func (s *Scenario) ControllerLog() string { return s.ControllerLogOf(0) }

// ControllerLogOf is controller i's log file.
func (s *Scenario) ControllerLogOf(i int) string {
	return filepath.Join(s.Lab.Dir, controllerFile(i, "log"))
}

// Capacities returns the operator capacity factors currently in controller.toml.
func (s *Scenario) Capacities() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.capacities)
}

// Reload writes controller.toml with new capacities (nil: unchanged) and mode ("":
// unchanged), sends SIGHUP and waits (at most 10 s) until the controller records a
// successful reload in its events.
func (s *Scenario) Reload(capacities []float64, mode string) error {
	// The newest reload event's time, not a count: the event list is a bounded ring, and
	// after enough reloads old ones leave it as new ones come (a benchmark's 36th reload saw
	// 31 before and 30 after).
	before, err := s.latestEvent("config", "configuration reloaded")
	if err != nil {
		return err
	}
	s.mu.Lock()
	if capacities != nil {
		if len(capacities) != len(s.capacities) {
			s.mu.Unlock()
			return fmt.Errorf("scenario: reload: %d capacities for %d backends", len(capacities), len(s.capacities))
		}
		s.capacities = slices.Clone(capacities)
	}
	if mode != "" {
		s.mode = mode
	}
	p := s.ctlProcs[0]
	s.mu.Unlock()
	if err := s.writeConfig(); err != nil {
		return err
	}
	if p == nil {
		return errors.New("scenario: reload: controller not started")
	}
	if err := p.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("scenario: reload: %w", err)
	}
	return lab.Poll(10*time.Second, func() error {
		t, err := s.latestEvent("config", "configuration reloaded")
		if err != nil {
			return err
		}
		if !t.After(before) {
			return fmt.Errorf("scenario: reload: no \"configuration reloaded\" event after %s; rejected? see events", before.Format(time.RFC3339Nano))
		}
		return nil
	})
}

// SetServiceKey sets key k of service "web" to the raw TOML value v ("" removes it) in
// controller.toml and reloads as Reload does.
func (s *Scenario) SetServiceKey(k, v string) error {
	s.mu.Lock()
	keys := make(map[string]string, len(s.Opts.ServiceKeys)+1)
	for kk, vv := range s.Opts.ServiceKeys {
		keys[kk] = vv
	}
	if v == "" {
		delete(keys, k)
	} else {
		keys[k] = v
	}
	s.Opts.ServiceKeys = keys
	s.mu.Unlock()
	return s.Reload(nil, "")
}

// latestEvent returns the time of the newest event of kind whose text holds text, zero when
// there is none.
func (s *Scenario) latestEvent(kind, text string) (time.Time, error) {
	var evs []Event
	if err := s.API("/api/v1/events", &evs); err != nil {
		return time.Time{}, err
	}
	var t time.Time
	for _, e := range evs {
		if e.Kind == kind && strings.Contains(e.Text, text) && e.Time.After(t) {
			t = e.Time
		}
	}
	return t, nil
}

// Drain drains (true) or undrains a backend through POST /api/v1/backends/NAME/drain|undrain.
func (s *Scenario) Drain(name string, drained bool) error {
	verb := "undrain"
	if drained {
		verb = "drain"
	}
	return s.APIPost("/api/v1/backends/" + name + "/" + verb)
}

// prepareProbe writes the probe's config. On cgroup v1 the lab creates only the cpu and
// cpuacct directories, but the probe's cgroup scope also reads the memory controller at the
// same relative path; the scenario creates that directory (and moves backendd into it) so
// the probe's memory source works, and removes it at Close.
func (b *Backend) prepareProbe() error {
	s := b.s
	if b.Cgroup.Version == lab.CgroupV1 {
		mem, err := memoryMount()
		if err != nil {
			return err
		}
		b.memDir = filepath.Join(mem, b.Cgroup.Name)
		if err := os.Mkdir(b.memDir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("scenario: backend %s: memory cgroup: %w", b.Name, err)
		}
	}
	b.probeConf = filepath.Join(s.Lab.Dir, b.Name+"-probe.toml")
	text := ProbeTOML(s.Opts, b.Name, b.Host.Addr().String(), b.Cgroup.Path(), s.KeyFile,
		filepath.Join(s.Lab.Dir, b.Name+".drain"), b.PIDFile)
	return writeAtomic(b.probeConf, []byte(text), 0o644)
}

func memoryMount() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("scenario: %w", err)
	}
	mounts, err := lab.ParseMountinfo(string(data))
	if err != nil {
		return "", fmt.Errorf("scenario: %w", err)
	}
	for _, m := range mounts {
		if m.FSType == "cgroup" && m.Root == "/" && slices.Contains(m.SuperOptions, "memory") {
			return m.MountPoint, nil
		}
	}
	return "", errors.New("scenario: cgroup v1 without a memory controller mount: the probe's cgroup scope needs one")
}

// StartHTTP starts the backend's backendd (keep-alive allowed, for LongConns) in its cgroup,
// writes its PID to PIDFile and waits until it accepts connections.
func (b *Backend) StartHTTP() error { return b.startHTTP() }

// StartHTTPCold is StartHTTP with a cold start, as a JIT-compiled service's first minute: each
// request that arrives within d of the start costs factor times the work.
func (b *Backend) StartHTTPCold(factor int, d time.Duration) error {
	return b.startHTTP("-cold-factor", strconv.Itoa(factor), "-cold-for", d.String())
}

func (b *Backend) startHTTP(extra ...string) error {
	b.mu.Lock()
	if b.http != nil && !b.http.Exited() {
		b.mu.Unlock()
		return fmt.Errorf("scenario: backend %s: backendd already running", b.Name)
	}
	b.mu.Unlock()
	addr := net.JoinHostPort(b.Host.Addr().String(), strconv.Itoa(BackendPort))
	args := []string{"-listen", addr, "-name", b.Name, "-work", strconv.Itoa(b.s.Opts.Work), "-keepalive"}
	if ps := b.s.Opts.AlsoPorts; len(ps) > 0 {
		also := make([]string, len(ps))
		for i, p := range ps {
			also[i] = strconv.Itoa(p)
		}
		args = append(args, "-also-ports", strings.Join(also, ","))
	}
	if b.s.Opts.UDPPort != 0 {
		args = append(args, "-udp-port", strconv.Itoa(b.s.Opts.UDPPort))
	}
	args = append(args, extra...)
	cmd := b.Host.Command(context.Background(), b.s.Opts.Bins.Backendd, args...)
	p, err := b.s.Lab.Start(b.Name+"-http", cmd, b.Cgroup)
	if err != nil {
		return fmt.Errorf("scenario: backend %s: %w", b.Name, err)
	}
	b.mu.Lock()
	b.http = p
	b.mu.Unlock()
	if b.memDir != "" {
		if err := os.WriteFile(filepath.Join(b.memDir, "cgroup.procs"), []byte(strconv.Itoa(p.PID)), 0o644); err != nil {
			return fmt.Errorf("scenario: backend %s: join memory cgroup: %w", b.Name, err)
		}
	}
	// The wrappers exec into backendd, so p.PID is its own PID (lab.Proc). One rename: the
	// probe never reads a half-written pidfile.
	if err := writeAtomic(b.PIDFile, pidFileData(p.PID), 0o644); err != nil {
		return fmt.Errorf("scenario: backend %s: %w", b.Name, err)
	}
	return lab.Poll(10*time.Second, func() error {
		if p.Exited() {
			return fmt.Errorf("scenario: backend %s: backendd exited: %v\n%s", b.Name, p.Wait(), lab.Tail(p.LogPath, 10))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := b.Host.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("scenario: backend %s: %w", b.Name, err)
		}
		return c.Close()
	})
}

// StartBurner starts a neighbour that uses the backend's CPU: `backendd -burn-cores cores` in
// the backend's cgroup for at most d. The caller stops it (Proc.Stop) or lets it end.
func (b *Backend) StartBurner(cores float64, d time.Duration) (*lab.Proc, error) {
	cmd := exec.Command(b.s.Opts.Bins.Backendd, "-burn-cores", strconv.FormatFloat(cores, 'f', -1, 64),
		"-burn-period", "100ms", "-burn-for", d.String())
	p, err := b.s.Lab.Start(b.Name+"-burn", cmd, b.Cgroup)
	if err != nil {
		return nil, fmt.Errorf("scenario: backend %s: burner: %w", b.Name, err)
	}
	return p, nil
}

// pidFileData is a pidfile's text: the PID in decimal and a newline, as daemons write it.
func pidFileData(pid int) []byte { return []byte(strconv.Itoa(pid) + "\n") }

// StopHTTP stops the backend's backendd (SIGTERM), so its health checks fail.
func (b *Backend) StopHTTP() error {
	b.mu.Lock()
	p := b.http
	b.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = p.Signal(sigCONT)
	if err := p.Stop(); err != nil {
		return fmt.Errorf("scenario: backend %s: %w", b.Name, err)
	}
	return nil
}

// KillHTTP ends the backend's backendd with SIGKILL, as a crash would: no graceful close, new
// connections refused at once. It returns when the process has exited.
func (b *Backend) KillHTTP() error {
	b.mu.Lock()
	p := b.http
	b.mu.Unlock()
	if p == nil || p.Exited() {
		return fmt.Errorf("scenario: backend %s: backendd not running", b.Name)
	}
	_ = p.Signal(sigCONT) // a frozen process dies all the same, but say so plainly
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("scenario: backend %s: %w", b.Name, err)
	}
	<-p.Done()
	return nil
}

// Freeze stops the backend's backendd with SIGSTOP: connections hang, health checks time out.
func (b *Backend) Freeze() error { return b.signalHTTP(sigSTOP) }

// Thaw resumes a frozen backendd with SIGCONT.
func (b *Backend) Thaw() error { return b.signalHTTP(sigCONT) }

func (b *Backend) signalHTTP(sig syscall.Signal) error {
	b.mu.Lock()
	p := b.http
	b.mu.Unlock()
	if p == nil || p.Exited() {
		return fmt.Errorf("scenario: backend %s: backendd not running", b.Name)
	}
	return p.Signal(sig)
}

// StartProbe starts the real probe inside the backend's namespace (not in its cgroup: it
// measures the cgroup, it is not part of the service's load).
func (b *Backend) StartProbe() error {
	b.mu.Lock()
	if b.probe != nil && !b.probe.Exited() {
		b.mu.Unlock()
		return fmt.Errorf("scenario: backend %s: probe already running", b.Name)
	}
	b.mu.Unlock()
	// Not Host.Command: `ip netns exec` also enters a new mount namespace with a fresh /sys,
	// where /sys/fs/cgroup is not mounted and the probe cannot find its cgroup. nsenter
	// switches the network namespace only.
	cmd := exec.Command("nsenter", "--net=/run/netns/"+b.Host.NS, b.s.Opts.Bins.Probe, "-config", b.probeConf)
	p, err := b.s.Lab.Start(b.Name+"-probe", cmd, nil)
	if err != nil {
		return fmt.Errorf("scenario: backend %s: %w", b.Name, err)
	}
	b.mu.Lock()
	b.probe = p
	b.mu.Unlock()
	return nil
}

// KillProbe ends the backend's probe with SIGKILL: no leaving report, so the controller
// only notices after stale_after.
func (b *Backend) KillProbe() error {
	b.mu.Lock()
	p := b.probe
	b.mu.Unlock()
	if p == nil || p.Exited() {
		return nil
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("scenario: backend %s: %w", b.Name, err)
	}
	<-p.Done()
	return nil
}

// StopProbe stops the backend's probe with SIGTERM: it sends a report flagged leaving, and
// the controller takes the backend out at once.
func (b *Backend) StopProbe() error {
	b.mu.Lock()
	p := b.probe
	b.mu.Unlock()
	if p == nil {
		return nil
	}
	if err := p.Stop(); err != nil {
		return fmt.Errorf("scenario: backend %s: %w", b.Name, err)
	}
	return nil
}

// ProbePID is the backend's running probe's process id (0 if none), for measuring its CPU.
func (b *Backend) ProbePID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.probe == nil || b.probe.Exited() {
		return 0
	}
	return b.probe.PID
}

// HTTPPID is the backend's running backendd's process id (0 if none).
func (b *Backend) HTTPPID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.http == nil || b.http.Exited() {
		return 0
	}
	return b.http.PID
}

// SetWork restarts every backendd with -work rounds per request and waits until the
// controller has every backend up again. Not concurrent with the other methods that start
// or stop backendd.
func (s *Scenario) SetWork(rounds int) error {
	if rounds < 0 {
		return fmt.Errorf("scenario: set work: %d rounds", rounds)
	}
	s.Opts.Work = rounds
	for _, b := range s.Backends {
		if err := b.StopHTTP(); err != nil {
			return err
		}
		if err := b.StartHTTP(); err != nil {
			return err
		}
	}
	return s.WaitReady(60 * time.Second)
}
