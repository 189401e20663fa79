package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EtcdBinary is the etcd server the lab runs (Debian package etcd-server).
var EtcdBinary = "/usr/bin/etcd"

// ErrNoEtcd is returned (wrapped) by StartEtcd when EtcdBinary is missing,
// so that tests can skip with a message naming the package.
var ErrNoEtcd = errors.New("etcd not installed (install the Debian package etcd-server)")

// EtcdOptions configures StartEtcd. The zero value is one member with
// 50 ms heartbeats and a 500 ms election timeout, which makes etcd's minimum
// lease TTL ceil(1.5 × 500 ms) = 1 s.
type EtcdOptions struct {
	// Members is 1 (default) or 3.
	Members int
	// HeartbeatMS and ElectionMS are --heartbeat-interval and
	// --election-timeout in milliseconds; 0 means 50 and 500.
	HeartbeatMS, ElectionMS int
	// ExtraArgs are appended to every member's command line.
	ExtraArgs []string
}

// Etcd is an etcd cluster the lab started on 127.0.0.1: each member's data
// directory is Dir/etcd/NAME.etcd and its log Dir/NAME.log.
type Etcd struct {
	lab     *Lab
	opt     EtcdOptions
	members []*etcdMember
	cluster string // --initial-cluster
}

type etcdMember struct {
	name, dataDir      string
	clientURL, peerURL string
	mu                 sync.Mutex
	proc               *Proc
	stopped            bool // SIGSTOPped
}

// StartEtcd starts an etcd cluster and returns once every member answers
// /health. Every member is killed (SIGKILL, by PID) at Close.
func (l *Lab) StartEtcd(opt EtcdOptions) (*Etcd, error) {
	if _, err := os.Stat(EtcdBinary); err != nil {
		return nil, fmt.Errorf("start etcd: %s: %w", EtcdBinary, ErrNoEtcd)
	}
	if opt.Members == 0 {
		opt.Members = 1
	}
	if opt.Members != 1 && opt.Members != 3 {
		return nil, fmt.Errorf("start etcd: %d members: want 1 or 3", opt.Members)
	}
	if opt.HeartbeatMS == 0 {
		opt.HeartbeatMS = 50
	}
	if opt.ElectionMS == 0 {
		opt.ElectionMS = 500
	}
	ports, err := freePorts(2 * opt.Members)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	e := &Etcd{lab: l, opt: opt}
	var cluster []string
	for i := 0; i < opt.Members; i++ {
		l.mu.Lock()
		n := len(l.procs)
		l.mu.Unlock()
		m := &etcdMember{
			name:      fmt.Sprintf("etcd%d-%d", i, n),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		}
		m.dataDir = filepath.Join(l.Dir, "etcd", m.name+".etcd")
		e.members = append(e.members, m)
		cluster = append(cluster, m.name+"="+m.peerURL)
	}
	e.cluster = strings.Join(cluster, ",")
	if err := os.MkdirAll(filepath.Join(l.Dir, "etcd"), 0o755); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	if err := l.onClose("etcd", e.stopAll); err != nil {
		return nil, err
	}
	for i := range e.members {
		if err := e.start(i, "new"); err != nil {
			return nil, err
		}
	}
	for i := range e.members {
		if err := e.waitHealthy(i); err != nil {
			return nil, err
		}
	}
	l.Log.Info("etcd up", "members", opt.Members, "endpoints", strings.Join(e.Endpoints(), ","))
	return e, nil
}

// freePorts returns n distinct TCP ports free on 127.0.0.1 a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (e *Etcd) start(i int, state string) error {
	m := e.members[i]
	args := []string{
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL,
		"--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL,
		"--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", e.cluster,
		"--initial-cluster-state", state,
		"--initial-cluster-token", e.lab.Prefix,
		"--heartbeat-interval", strconv.Itoa(e.opt.HeartbeatMS),
		"--election-timeout", strconv.Itoa(e.opt.ElectionMS),
		"--logger", "zap",
	}
	args = append(args, e.opt.ExtraArgs...)
	cmd := exec.Command(EtcdBinary, args...)
	p, err := e.lab.startProc(m.name, cmd, nil)
	if err != nil {
		return fmt.Errorf("start etcd member %d: %w", i, err)
	}
	m.mu.Lock()
	m.proc, m.stopped = p, false
	m.mu.Unlock()
	return nil
}

func (e *Etcd) waitHealthy(i int) error {
	m := e.members[i]
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	err := Poll(DaemonTimeout, func() error {
		if p.Exited() {
			return fmt.Errorf("exited: %v", p.Wait())
		}
		return e.Healthy(i)
	})
	if err != nil {
		return fmt.Errorf("etcd member %d (%s) not ready: %w\n%s", i, m.clientURL, err, Tail(p.LogPath, 20))
	}
	return nil
}

// Healthy asks member i's /health endpoint (true only with a raft leader).
func (e *Etcd) Healthy(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.members[i].clientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"true"`) {
		return fmt.Errorf("health: %s %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// Endpoints are the members' client URLs, in member order.
func (e *Etcd) Endpoints() []string {
	var eps []string
	for _, m := range e.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// Members is the number of members.
func (e *Etcd) Members() int { return len(e.members) }

// PID is member i's process id (0 if it is not running).
func (e *Etcd) PID(i int) int {
	m := e.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || m.proc.Exited() {
		return 0
	}
	return m.proc.PID
}

// LogTail is the last n lines of member i's log.
func (e *Etcd) LogTail(i, n int) string {
	m := e.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return "(not started)"
	}
	return Tail(m.proc.LogPath, n)
}

// Kill sends SIGKILL to member i's PID and waits until it has exited.
func (e *Etcd) Kill(i int) error {
	m := e.members[i]
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil || p.Exited() {
		return nil
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-time.After(StopTimeout):
		return fmt.Errorf("etcd member %d (pid %d): still running after SIGKILL", i, p.PID)
	}
	e.lab.Log.Info("etcd member killed", "member", i, "pid", p.PID)
	return nil
}

// Restart starts member i again on its data directory and ports (after Kill,
// or killing it first) and waits until it answers /health. With a
// three-member cluster /health needs a quorum.
func (e *Etcd) Restart(i int) error {
	if err := e.Kill(i); err != nil {
		return err
	}
	if err := e.start(i, "existing"); err != nil {
		return err
	}
	return e.waitHealthy(i)
}

// Stop freezes member i with SIGSTOP: its sockets stay open but nothing
// answers, as with a hung machine. Cont resumes it.
func (e *Etcd) Stop(i int) error { return e.signalStop(i, syscall.SIGSTOP, true) }

// Cont resumes a member frozen by Stop.
func (e *Etcd) Cont(i int) error { return e.signalStop(i, syscall.SIGCONT, false) }

func (e *Etcd) signalStop(i int, sig syscall.Signal, stopped bool) error {
	m := e.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return fmt.Errorf("etcd member %d not started", i)
	}
	if err := m.proc.Signal(sig); err != nil {
		return err
	}
	m.stopped = stopped
	return nil
}

// stopAll kills every member by PID. etcd members stopped with SIGTERM wait
// for their peers (leadership transfer) for seconds, and the data directory
// is the lab's scratch, so there is nothing to flush.
func (e *Etcd) stopAll() error {
	var errs []error
	for i, m := range e.members {
		m.mu.Lock()
		stopped := m.stopped
		m.mu.Unlock()
		if stopped {
			_ = e.Cont(i)
		}
		if err := e.Kill(i); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
