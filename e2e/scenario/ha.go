package scenario

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"flowweight/e2e/lab"
)

// EtcdAddr is the first etcd member's client address inside "ctl" (Options.Controllers > 1);
// member m listens on port 2379+10000·m.
const EtcdAddr = "127.0.0.1:2379"

func etcdClient(m int) string { return fmt.Sprintf("http://127.0.0.1:%d", 2379+10000*m) }
func etcdPeer(m int) string   { return fmt.Sprintf("http://127.0.0.1:%d", 2380+10000*m) }

// apiAddrOf is controller i's API address inside "ctl".
func apiAddrOf(i int) string {
	if i == 0 {
		return APIAddr
	}
	return "127.0.0.1:" + strconv.Itoa(9090+i)
}

// pushAddrOf is controller i's push address.
func pushAddrOf(o Options, i int) string {
	return net.JoinHostPort(o.addr(ctlHost).String(), strconv.Itoa(PushPort+i))
}

// controllerFile names controller i's files: controller.EXT for the first (as without HA),
// controllerI.EXT for the others; ext "" names the process.
func controllerFile(i int, ext string) string {
	name := "controller"
	if i > 0 {
		name += strconv.Itoa(i)
	}
	if ext != "" {
		name += "." + ext
	}
	return name
}

// controllerIndex recovers the index from a socket path SocketOf made.
func controllerIndex(o Options, sock string) int {
	base := strings.TrimSuffix(filepath.Base(sock), ".sock")
	if n, err := strconv.Atoi(strings.TrimPrefix(base, "controller")); err == nil && n > 0 && n < o.Controllers {
		return n
	}
	return 0
}

// SocketOf is the unix socket controller i listens on.
func (s *Scenario) SocketOf(i int) string {
	if i == 0 {
		return s.Socket
	}
	return filepath.Join(s.OVS.RunDir, controllerFile(i, "sock"))
}

// ConfigPathOf is controller i's controller.toml.
func (s *Scenario) ConfigPathOf(i int) string {
	if i == 0 {
		return s.ConfigPath
	}
	return filepath.Join(s.Opts.Dir, controllerFile(i, "toml"))
}

// StatePathOf is controller i's state file (-state); its configuration history is next to it
// (controller history, controller rollback).
func (s *Scenario) StatePathOf(i int) string {
	return filepath.Join(s.Lab.Dir, controllerFile(i, "state"))
}

// haTOML adds controller i's [ha] section: the scenario's etcd members, its own name, the
// lease.
func haTOML(o Options, text string, i int) string {
	eps := make([]string, o.EtcdMembers)
	for m := range eps {
		eps[m] = strconv.Quote(etcdClient(m))
	}
	return text + fmt.Sprintf("\n[ha]\netcd = [%s]\nname = \"c%d\"\nprefix = \"/flowweight/scenario\"\nlease = %q\ndial_timeout = \"2s\"\n",
		strings.Join(eps, ", "), i, o.Lease.String())
}

// startEtcd runs the etcd-server members inside "ctl", with a 50 ms heartbeat and a 500 ms
// election timeout: the minimum lease is then 1 s, and the lessor looks for expired leases
// every 500 ms, so a dead leader's key goes 1-1.5 s after its last keep-alive. It serves
// again from the data directories after KillEtcd.
func (s *Scenario) startEtcd() error {
	bin := "/usr/bin/etcd"
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("scenario: HA needs etcd-server (apt-get install etcd-server): %w", err)
	}
	n := s.Opts.EtcdMembers
	var cluster []string
	for m := range n {
		cluster = append(cluster, fmt.Sprintf("s%d=%s", m, etcdPeer(m)))
	}
	procs := make([]*lab.Proc, n)
	for m := range n {
		cmd := s.Ctl.Command(context.Background(), bin, "--name", fmt.Sprintf("s%d", m),
			"--data-dir", s.etcdDir(m),
			"--listen-client-urls", etcdClient(m), "--advertise-client-urls", etcdClient(m),
			"--listen-peer-urls", etcdPeer(m), "--initial-advertise-peer-urls", etcdPeer(m),
			"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new",
			"--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "warn")
		p, err := s.Lab.Start(fmt.Sprintf("etcd%d", m), cmd, nil)
		if err != nil {
			return fmt.Errorf("scenario: %w", err)
		}
		procs[m] = p
	}
	s.mu.Lock()
	s.etcd = procs
	s.mu.Unlock()
	for m, p := range procs {
		if err := s.waitEtcd(m, p); err != nil {
			return err
		}
	}
	return nil
}

// etcdDir is member m's data directory: in /dev/shm when there is one, since etcd fsyncs its
// log on every write and a busy 2-core test host's disk then stalls keep-alives past a 1 s
// lease (measured: a leader lost its lease for that alone); removed by Close.
func (s *Scenario) etcdDir(m int) string {
	base := s.Lab.Dir
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	d := filepath.Join(base, fmt.Sprintf("%s-etcd%d", s.Lab.Prefix, m))
	s.mu.Lock()
	if !slices.Contains(s.etcdDirs, d) {
		s.etcdDirs = append(s.etcdDirs, d)
	}
	s.mu.Unlock()
	return d
}

func (s *Scenario) waitEtcd(m int, p *lab.Proc) error {
	return lab.Poll(15*time.Second, func() error {
		if p.Exited() {
			return fmt.Errorf("scenario: etcd member %d exited: %v\n%s", m, p.Wait(), lab.Tail(p.LogPath, 20))
		}
		res, err := s.Ctl.HTTPClient(time.Second).Get(etcdClient(m) + "/health")
		if err != nil {
			return fmt.Errorf("scenario: etcd member %d not answering: %w", m, err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			return fmt.Errorf("scenario: etcd member %d /health: %s", m, res.Status)
		}
		return nil
	})
}

// StartEtcd starts the etcd-server members again (after KillEtcd) on their data directories.
func (s *Scenario) StartEtcd() error { return s.startEtcd() }

// KillEtcd ends every etcd member with SIGKILL.
func (s *Scenario) KillEtcd() error {
	s.mu.Lock()
	procs := s.etcd
	s.mu.Unlock()
	if len(procs) == 0 {
		return fmt.Errorf("scenario: no etcd")
	}
	for _, p := range procs {
		if err := p.Signal(syscall.SIGKILL); err != nil && !p.Exited() {
			return err
		}
		<-p.Done()
	}
	return nil
}

// HAView is a controller's /api/v1/ha.
type HAView struct {
	Enabled  bool              `json:"enabled"`
	Role     string            `json:"role"`
	Leader   string            `json:"leader"`
	Term     uint64            `json:"term"`
	Error    string            `json:"error"`
	Switches map[string]string `json:"switches"`
}

// HA is controller i's view of the election.
func (s *Scenario) HA(i int) (HAView, error) {
	var v HAView
	err := s.APIOf(i, "/api/v1/ha", &v)
	return v, err
}

// ControllerRoles reads the roles Open vSwitch gives each controller of the bridge
// (ovs-vsctl list Controller), by controller index: the switch's own word on who is master.
func (s *Scenario) ControllerRoles() (map[int]string, error) {
	out, err := s.OVS.Vsctl("--format=csv", "--no-headings", "--columns=target,role,is_connected", "list", "Controller")
	if err != nil {
		return nil, err
	}
	roles := map[int]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 {
			continue
		}
		target := strings.Trim(f[0], `"`)
		for i := range s.Opts.Controllers {
			if target == "unix:"+s.SocketOf(i) {
				role := f[1]
				if f[2] != "true" {
					role = "disconnected"
				}
				roles[i] = role
			}
		}
	}
	return roles, nil
}
