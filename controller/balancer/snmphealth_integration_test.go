//go:build integration

package balancer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"flowweight/collector"
	"flowweight/collector/poll"
	"flowweight/controller/config"
	"flowweight/weights"
)

// startSnmpdV2c starts Debian's snmpd on a free loopback port with a random v2c community,
// as collector/snmp's integration tests do, and returns its address and community. The
// cleanup kills the one process it started.
func startSnmpdV2c(t *testing.T) (addr, community string) {
	t.Helper()
	const bin = "/usr/sbin/snmpd"
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("snmpd is required for this integration test (apt-get install snmpd): %v", err)
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = pc.LocalAddr().String()
	pc.Close()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	community = "fw" + hex.EncodeToString(b)
	dir := t.TempDir()
	conf := filepath.Join(dir, "snmpd.conf")
	if err := os.WriteFile(conf, []byte("rocommunity "+community+" 127.0.0.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	persist := filepath.Join(dir, "persist")
	if err := os.Mkdir(persist, 0o700); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "snmpd.log")
	cmd := exec.Command(bin, "-f", "-Lf", logPath, "-C", "-c", conf, "-p", filepath.Join(dir, "snmpd.pid"),
		"-m", "", "-I", "-smux", "udp:"+addr)
	cmd.Env = append(os.Environ(), "SNMP_PERSISTENT_DIR="+persist, "MIBS=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("snmpd log:\n%s", log)
		}
	})
	return addr, community
}

// udpService is a UDP responder on a fixed loopback port that can be stopped and started
// again on the same port: the service whose health the collector checks.
type udpService struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	pc   net.PacketConn
}

func (u *udpService) start() {
	u.t.Helper()
	addr := u.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		u.t.Fatal(err)
	}
	u.addr = pc.LocalAddr().String()
	u.mu.Lock()
	u.pc = pc
	u.mu.Unlock()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if string(buf[:n]) == "\x00ping" {
				_, _ = pc.WriteTo([]byte("pong\xff"), from)
			}
		}
	}()
}

func (u *udpService) stop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pc != nil {
		u.pc.Close()
		u.pc = nil
	}
}

// TestSNMPBackendUDPHealth runs the collector's source of an SNMP backend (a real snmpd on
// loopback) whose health check is udp against a local responder: the backend comes up,
// goes down with the refusal named when the responder stops (ICMP port unreachable), and
// comes back when it answers again. No Open vSwitch: the balancer is not run, only the
// source and the pool it feeds.
func TestSNMPBackendUDPHealth(t *testing.T) {
	snmpAddr, community := startSnmpdV2c(t)
	svc := &udpService{t: t}
	svc.start()
	t.Cleanup(svc.stop)
	_, port, _ := net.SplitHostPort(svc.addr)
	text := fmt.Sprintf(`
[api]
listen = ""
[collector]
push_listen = "127.0.0.1:0"
poll_interval = "500ms"
health_timeout = "300ms"
health_fast_interval = "20ms"
fail_threshold = 3
rise_threshold = 2
[[service]]
name = "dns"
vip = "10.77.0.100"
port = 53
group_id = 1
  [[service.backend]]
  name = "dns1"
  ip = "127.0.0.1"
  source = "snmp"
    [service.backend.snmp]
    address = %q
    version = "v2c"
    community = %q
    timeout = "300ms"
    retries = 0
    [service.backend.health]
    type = "udp"
    port = %s
    send_hex = "00 70 69 6e 67"
    expect_hex = "70 6f 6e 67 ff"
`, snmpAddr, community, port)
	cfg, err := config.Parse("t.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runner := poll.New(poll.Config{Sink: b.pool})
	runner.Set(snmpJobs(cfg))
	runner.Start(ctx)
	t.Cleanup(func() { cancel(); runner.Wait() })

	waitFor := func(what string, ok func(collector.State) bool) collector.State {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, _ := b.pool.Get("dns1")
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30s; state %s, last health %+v, reports %d", what, st.Status, st.LastHealth, st.Reports)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	healthy := func(st collector.State) bool {
		return (st.Status == weights.StatusWarming || st.Status == weights.StatusUp) && st.LastHealth.OK && st.HasMetrics
	}
	st := waitFor("up with the responder answering", healthy)
	if st.LastHealth.Latency <= 0 {
		t.Errorf("a passing udp check without latency: %+v", st.LastHealth)
	}

	svc.stop()
	st = waitFor("down with the responder stopped", func(st collector.State) bool { return st.Status == weights.StatusDown })
	if want := "udp " + svc.addr + ": no answer: connection refused (ICMP port unreachable"; !strings.Contains(st.LastHealth.Err, want) {
		t.Errorf("down for %q, want a reason with %q", st.LastHealth.Err, want)
	}

	svc.start()
	waitFor("back with the responder answering again", healthy)
}
