//go:build integration

package snmp

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
)

const snmpdPath = "/usr/sbin/snmpd"

// snmpd is one net-snmp agent started by a test, listening on loopback only.
type snmpd struct {
	addr      string
	community string
	user      string
	authPass  string
	privPass  string
	logPath   string
	cmd       *exec.Cmd
}

func randomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// freeUDPPort asks the kernel for an unused loopback UDP port. Another
// process may take it before snmpd binds it; startSnmpd retries then.
func freeUDPPort(tb testing.TB) int { return freeUDPPortOn(tb, "udp4", "127.0.0.1:0") }

func freeUDPPortOn(tb testing.TB, network, addr string) int {
	tb.Helper()
	c, err := net.ListenPacket(network, addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// startSnmpd starts Debian's snmpd in the foreground with a generated config
// (-C: no /etc/snmp files), its persistent state and pid file in a temp dir,
// a random v2c community and a v3 authPriv user (SHA + AES). It waits until
// the agent answers and registers a cleanup that kills it by PID and, when
// the test failed, prints its log.
func startSnmpd(tb testing.TB) *snmpd { tb.Helper(); return startSnmpdOn(tb, false) }

// startSnmpdOn starts snmpd on 127.0.0.1, or on [::1] when v6 (transport udp6, the v2c
// community granted to ::1 only).
func startSnmpdOn(tb testing.TB, v6 bool) *snmpd {
	tb.Helper()
	if _, err := os.Stat(snmpdPath); err != nil {
		tb.Fatalf("snmpd is required for the integration tests (apt-get install snmpd): %v", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		d, err := trySnmpd(tb, v6)
		if err == nil {
			return d
		}
		lastErr = err
		tb.Logf("snmpd attempt %d: %v", attempt+1, err)
	}
	tb.Fatalf("snmpd did not come up: %v", lastErr)
	return nil
}

func trySnmpd(tb testing.TB, v6 bool) (*snmpd, error) {
	dir := tb.TempDir()
	host, transport, community := "127.0.0.1", "udp:", "rocommunity"
	if v6 {
		host, transport, community = "::1", "udp6:", "rocommunity6"
	}
	port := freeUDPPortOn(tb, map[bool]string{false: "udp4", true: "udp6"}[v6], net.JoinHostPort(host, "0"))
	d := &snmpd{
		addr:      net.JoinHostPort(host, strconv.Itoa(port)),
		community: "fw" + randomHex(tb, 8),
		user:      "fwuser",
		authPass:  "auth" + randomHex(tb, 8),
		privPass:  "priv" + randomHex(tb, 8),
		logPath:   filepath.Join(dir, "snmpd.log"),
	}
	conf := fmt.Sprintf("%s %s %s\ncreateUser %s SHA %s AES %s\nrouser %s priv\n",
		community, d.community, host, d.user, d.authPass, d.privPass, d.user)
	confPath := filepath.Join(dir, "snmpd.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	persist := filepath.Join(dir, "persist")
	if err := os.Mkdir(persist, 0o700); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(snmpdPath, "-f", "-Lf", d.logPath, "-C", "-c", confPath,
		"-p", filepath.Join(dir, "snmpd.pid"), "-m", "", "-I", "-smux", transport+d.addr)
	// MIBS= and -m "": numeric OIDs only, no MIB parsing noise in the log.
	// -I -smux: no SMUX listener on 127.0.0.1:199, which another agent may hold.
	cmd.Env = append(os.Environ(), "SNMP_PERSISTENT_DIR="+persist, "MIBS=")
	// If the test binary dies, the kernel kills the agent too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", snmpdPath, err)
	}
	d.cmd = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		// Only the PID this test started; after it exited, os.Process
		// knows and does not signal a reused PID.
		_ = cmd.Process.Kill()
		<-exited
	}

	g := &gosnmp.GoSNMP{Target: host, Port: uint16(port),
		Community: d.community, Version: gosnmp.Version2c, Timeout: 200 * time.Millisecond, Retries: 0}
	if err := g.Connect(); err != nil {
		stop()
		return nil, err
	}
	defer g.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err // let stop() see it
			log, _ := os.ReadFile(d.logPath)
			stop()
			return nil, fmt.Errorf("snmpd on %s exited early (%v); log:\n%s", d.addr, err, log)
		default:
		}
		if _, err := g.Get([]string{oidSysUpTime}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			log, _ := os.ReadFile(d.logPath)
			return nil, fmt.Errorf("snmpd on %s never answered within 10s; log:\n%s", d.addr, log)
		}
	}
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			log, _ := os.ReadFile(d.logPath)
			tb.Logf("snmpd %s log:\n%s", d.addr, log)
		}
	})
	return d, nil
}

func mustAtoi(tb testing.TB, s string) int {
	tb.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func (d *snmpd) v2c(ports ...uint16) Target {
	return Target{Address: d.addr, Version: "v2c", Community: d.community, Timeout: time.Second, Retries: 1, ServicePorts: ports}
}

func (d *snmpd) v3(ports ...uint16) Target {
	return Target{Address: d.addr, Version: "v3", User: d.user, AuthProtocol: "SHA", AuthPassphrase: d.authPass,
		PrivProtocol: "AES", PrivPassphrase: d.privPass, Timeout: time.Second, Retries: 1, ServicePorts: ports}
}

func newPollerT(tb testing.TB, tg Target) *Poller {
	tb.Helper()
	p, err := NewPoller(tg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// procCPUs counts "processor" lines in /proc/cpuinfo.
func procCPUs(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, _, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "processor" {
			n++
		}
	}
	return n
}

// meminfo returns the /proc/meminfo fields in kB.
func meminfo(t *testing.T) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out
}

func TestSnmpdCapacityV2cAndV3(t *testing.T) {
	d := startSnmpd(t)
	cpus := procCPUs(t)
	mem := meminfo(t)
	for name, tg := range map[string]Target{"v2c": d.v2c(), "v3": d.v3()} {
		t.Run(name, func(t *testing.T) {
			s, err := newPollerT(t, tg).Poll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s sample: %+v", name, s)
			if s.CPUCount != float64(cpus) {
				t.Errorf("CPUCount %v, /proc/cpuinfo has %d processors", s.CPUCount, cpus)
			}
			if want := mem["MemTotal"] * 1024; s.MemBytes != want {
				t.Errorf("MemBytes %d, /proc/meminfo MemTotal is %d bytes", s.MemBytes, want)
			}
			// memAvailReal is MemFree; with buffers and cache added back
			// the utilisation should track MemAvailable.
			now := meminfo(t)
			want := 1 - float64(now["MemAvailable"])/float64(now["MemTotal"])
			if s.MemUtil < want-0.05 || s.MemUtil > want+0.05 || s.MemUtil < 0 || s.MemUtil > 1 {
				t.Errorf("MemUtil %.4f, 1-MemAvailable/MemTotal is %.4f", s.MemUtil, want)
			}
			if s.ConnSource != ConnSourceTCPCurrEstab {
				t.Errorf("ConnSource %q without service ports", s.ConnSource)
			}
		})
	}
}

// TestSnmpdIPv6: the poller polls an snmpd that listens on [::1] only, v2c and v3, through
// the Target address form the configuration takes ("[::1]:port").
func TestSnmpdIPv6(t *testing.T) {
	d := startSnmpdOn(t, true)
	if !strings.HasPrefix(d.addr, "[::1]:") {
		t.Fatalf("snmpd address %q is not on [::1]", d.addr)
	}
	cpus := procCPUs(t)
	for name, tg := range map[string]Target{"v2c": d.v2c(), "v3": d.v3()} {
		t.Run(name, func(t *testing.T) {
			s, err := newPollerT(t, tg).Poll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if s.CPUCount != float64(cpus) {
				t.Errorf("CPUCount %v over IPv6, /proc/cpuinfo has %d processors", s.CPUCount, cpus)
			}
		})
	}
}

func TestSnmpdV3WrongCredentials(t *testing.T) {
	d := startSnmpd(t)
	t.Run("auth passphrase", func(t *testing.T) {
		tg := d.v3()
		tg.AuthPassphrase = "wrong-" + d.authPass
		start := time.Now()
		_, err := newPollerT(t, tg).Poll(context.Background())
		elapsed := time.Since(start)
		if err == nil {
			t.Fatal("poll with a wrong auth passphrase succeeded")
		}
		t.Logf("error after %v: %v", elapsed, err)
		want := fmt.Sprintf("snmp %s: v3 authentication failed for user %s", d.addr, d.user)
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want ErrAuth and %q", err, want)
		}
		if bound := tg.Timeout * time.Duration(tg.Retries+1); elapsed > bound {
			t.Errorf("took %v, more than Timeout*(Retries+1) = %v", elapsed, bound)
		}
	})
	t.Run("unknown user", func(t *testing.T) {
		tg := d.v3()
		tg.User = "nosuchuser"
		_, err := newPollerT(t, tg).Poll(context.Background())
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "nosuchuser") {
			t.Errorf("error %v, want ErrAuth naming the user", err)
		}
	})
	t.Run("priv passphrase", func(t *testing.T) {
		// net-snmp drops what it cannot decrypt: this can only be a
		// timeout, whose message says what else it may mean.
		tg := d.v3()
		tg.PrivPassphrase = "wrong-" + d.privPass
		tg.Timeout, tg.Retries = 300*time.Millisecond, 1
		_, err := newPollerT(t, tg).Poll(context.Background())
		if !errors.Is(err, ErrNoResponse) || !strings.Contains(err.Error(), "PrivPassphrase") || !strings.Contains(err.Error(), d.addr) {
			t.Errorf("error %v, want ErrNoResponse naming the address and PrivPassphrase", err)
		}
	})
}

func TestSnmpdUnreachable(t *testing.T) {
	// A closed port (ICMP port unreachable) and a port that swallows every
	// request (a socket this test holds and never answers from).
	silent, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	closed := "127.0.0.1:" + strconv.Itoa(freeUDPPort(t))
	for _, tc := range []struct {
		name, addr, version string
	}{
		{"closed port v2c", closed, "v2c"},
		{"closed port v3", closed, "v3"},
		{"silent v2c", silent.LocalAddr().String(), "v2c"},
		{"silent v3", silent.LocalAddr().String(), "v3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := Target{Address: tc.addr, Version: tc.version, Community: "public", User: "fwuser",
				AuthProtocol: "SHA", AuthPassphrase: "authpass1", PrivProtocol: "AES", PrivPassphrase: "privpass1",
				Timeout: 300 * time.Millisecond, Retries: 2}
			start := time.Now()
			_, err := newPollerT(t, tg).Poll(context.Background())
			elapsed := time.Since(start)
			if err == nil {
				t.Fatal("poll of an unreachable agent succeeded")
			}
			t.Logf("error after %v: %v", elapsed, err)
			if !strings.Contains(err.Error(), "snmp "+tc.addr) {
				t.Errorf("error %q does not name the address %s", err, tc.addr)
			}
			// 50 ms for scheduling on a shared 2-core machine.
			if bound := tg.Timeout*time.Duration(tg.Retries+1) + 50*time.Millisecond; elapsed > bound {
				t.Errorf("took %v, more than Timeout*(Retries+1) = %v", elapsed, bound)
			}
		})
	}
}

// waitRawCounters waits until the agent has filled its ssCpuRaw counters
// (0 until its first 5 s refresh), asking at most 30 times.
func waitRawCounters(t *testing.T, d *snmpd) {
	t.Helper()
	g := &gosnmp.GoSNMP{Target: "127.0.0.1", Port: uint16(mustAtoi(t, d.addr[strings.LastIndexByte(d.addr, ':')+1:])),
		Community: d.community, Version: gosnmp.Version2c, Timeout: time.Second, Retries: 1}
	if err := g.Connect(); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for try := 0; try < 30; try++ {
		pkt, err := g.Get([]string{oidSsCpuRawIdle})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := pkt.Variables[0].Value.(uint); ok && v > 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatal("ssCpuRawIdle still 0 after 15 s")
}

func TestSnmpdCPUUtilisation(t *testing.T) {
	d := startSnmpd(t)
	waitRawCounters(t, d)
	p := newPollerT(t, d.v2c())
	first, err := p.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if first.CPUSource == CPUSourceUCDRaw {
		t.Fatalf("first poll claims a counter delta: %+v", first)
	}

	// Busy loop on every CPU until the agent's next refresh shows up in a
	// poll: bounded to 15 s and 15 polls.
	var stop atomic.Bool
	var wg sync.WaitGroup
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; i < procCPUs(t); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(1)
			for !stop.Load() && time.Now().Before(deadline) {
				for j := 0; j < 1e5; j++ {
					x = x*6364136223846793005 + 1
				}
			}
			_ = x
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	var s Sample
	for poll := 0; poll < 15; poll++ {
		time.Sleep(time.Second)
		if s, err = p.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s.CPUSource == CPUSourceUCDRaw {
			break
		}
	}
	stop.Store(true)
	t.Logf("sample after busy loop: %+v", s)
	if !s.CPUKnown || s.CPUSource != CPUSourceUCDRaw {
		t.Fatalf("no counter delta after busy looping: %+v", s)
	}
	if s.CPUUtil <= 0 || s.CPUUtil > 1 {
		t.Errorf("CPUUtil %v, want in (0,1]", s.CPUUtil)
	}
}

// loopbackConns opens a listener (network "tcp4" on 127.0.0.1, or "tcp" on
// ":0", which Go makes a dual-stack IPv6 socket) and n connections to it
// over 127.0.0.1. Connections from anywhere else are closed at once. All
// sockets close at test cleanup.
func loopbackConns(t *testing.T, network string, n int) uint16 {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "tcp" {
		addr = ":0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, n)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err != nil || !ap.Addr().Unmap().IsLoopback() {
				c.Close()
				continue
			}
			accepted <- c
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(int(port)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		select {
		case sc := <-accepted:
			t.Cleanup(func() { sc.Close() })
		case <-time.After(5 * time.Second):
			t.Fatalf("listener %s never accepted connection %d", ln.Addr(), i+1)
		}
	}
	return port
}

func TestSnmpdConnections(t *testing.T) {
	// Connections exist before the agent starts, so its first look at its
	// TCP tables (tcpConnectionTable is cached for up to a minute) has them.
	const n = 5
	port4 := loopbackConns(t, "tcp4", n)
	portDual := loopbackConns(t, "tcp", n)
	d := startSnmpd(t)

	for _, tc := range []struct {
		name       string
		tg         Target
		wantSource string
		min        uint32
	}{
		{"IPv4 listener", d.v2c(port4), ConnSourceTCPConnTable, n},
		{"dual-stack listener", d.v2c(portDual), ConnSourceTCPConnectionTable, n},
		{"both listeners v3", d.v3(port4, portDual), ConnSourceTCPConnectionTable, 2 * n},
		{"all ports", d.v2c(), ConnSourceTCPCurrEstab, 4 * n}, // both ends are local
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPollerT(t, tc.tg)
			var s Sample
			var err error
			// Bounded retries in case the agent's caches lag: 20 x 0.5 s.
			for try := 0; try < 20; try++ {
				if s, err = p.Poll(context.Background()); err != nil {
					t.Fatal(err)
				}
				if s.Conns >= tc.min {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			t.Logf("%s: %+v", tc.name, s)
			if s.ConnSource != tc.wantSource || s.Conns < tc.min {
				t.Errorf("Conns %d from %q, want >= %d from %s", s.Conns, s.ConnSource, tc.min, tc.wantSource)
			}
		})
	}
}

// BenchmarkPollSnmpd measures one full Poll against a real snmpd on
// loopback: scalar GET and hrProcessorTable walk, plus the tcpConnTable walk
// for an IPv4 listener's port, and also the tcpConnectionTable walk for a
// port with no IPv4 listener (port 1).
func BenchmarkPollSnmpd(b *testing.B) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	port4 := uint16(ln.Addr().(*net.TCPAddr).Port)
	d := startSnmpd(b)
	for _, tc := range []struct {
		name string
		tg   Target
	}{
		{"v2c-ipv4-listener", d.v2c(port4)},
		{"v2c-no-ipv4-listener", d.v2c(1)},
		{"v3-no-ipv4-listener", d.v3(1)},
		{"v2c-no-ports", d.v2c()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := newPollerT(b, tc.tg)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Poll(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSnmpdWalkBound: against the real agent, a TCP table longer than MaxConnRows stops the
// walk (gosnmp's BulkWalk callback returns ErrTooManyRows) and fails the poll naming the
// agent, the OID and the bound; with room to spare the same poll succeeds.
func TestSnmpdWalkBound(t *testing.T) {
	port := loopbackConns(t, "tcp4", 5) // listener + 5 × two ends in tcpConnTable
	d := startSnmpd(t)
	tg := d.v2c(port)
	tg.MaxConnRows = 3
	_, err := newPollerT(t, tg).Poll(context.Background())
	if !errors.Is(err, ErrTooManyRows) {
		t.Fatalf("err = %v, want ErrTooManyRows", err)
	}
	for _, want := range []string{d.addr, oidTCPConnState, "3 connection rows"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	tg.MaxConnRows = 0
	if s, err := newPollerT(t, tg).Poll(context.Background()); err != nil || s.Conns < 5 {
		t.Fatalf("with the default bound: %+v, %v", s, err)
	}
}
