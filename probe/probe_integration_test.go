//go:build integration

package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
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

	"github.com/shirou/gopsutil/v4/mem"

	"flowweight/internal/report"
)

// lockedBuffer collects the probe's log for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProbeBinary builds the real probe, runs it against a UDP socket and a local HTTP
// service, and checks its reports with the collector's own codec and replay guard.
func TestProbeBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "probe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	sink, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()

	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("status: ready\n"))
	}))
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	// Three idle client connections: the service port has three ESTABLISHED server sockets.
	for range 3 {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}

	key := []byte("integration-key-0123456789abcdef")
	keyFile := filepath.Join(dir, "probe.key")
	if err := os.WriteFile(keyFile, append(key, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	drainFile := filepath.Join(dir, "run", "drain")
	const interval = 300 * time.Millisecond
	cfg := filepath.Join(dir, "probe.toml")
	body := strings.Join([]string{
		`backend_id = "it-web1"`,
		`collector = "` + sink.LocalAddr().String() + `"`,
		`key_file = "` + keyFile + `"`,
		`interval = "` + interval.String() + `"`,
		`jitter = 0.0`,
		`service_ports = [` + portStr + `]`,
		`in_flight_interval = "50ms"`,
		`drain_file = "` + drainFile + `"`,
		`log_level = "debug"`,
		`[health]`,
		`url = "` + srv.URL + `/healthz"`,
		`timeout = "250ms"`,
		`body_contains = "ready"`,
	}, "\n") + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}

	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("probe log:\n%s", logs.String())
		}
	}()

	guard := report.NewGuard(0)
	var lastSeq uint64
	// recv returns the next full report. The in-flight reports between them
	// (in_flight_interval 50ms) are checked for their sequence and counted.
	inflight := 0
	recv := func() report.Report {
		t.Helper()
		for {
			buf := make([]byte, 1024)
			sink.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := sink.ReadFrom(buf)
			if err != nil {
				t.Fatalf("no report: %v", err)
			}
			var r report.Report
			if err := report.Open(buf[:n], func(id string) ([]byte, bool) { return key, id == "it-web1" }, &r); err != nil {
				t.Fatalf("open: %v", err)
			}
			if err := guard.Check(&r, time.Now()); err != nil {
				t.Fatalf("guard: %v", err)
			}
			if r.Seq != lastSeq+1 {
				t.Errorf("seq %d after %d", r.Seq, lastSeq)
			}
			lastSeq = r.Seq
			if r.Signals&report.SignalInFlight != 0 {
				inflight++
				continue
			}
			return r
		}
	}
	// waitFor reads reports until one satisfies ok, within max reports.
	waitFor := func(what string, max int, ok func(report.Report) bool) report.Report {
		t.Helper()
		for range max {
			if r := recv(); ok(r) {
				return r
			}
		}
		t.Fatalf("no report with %s within %d reports", what, max)
		return report.Report{}
	}

	vm, err := mem.VirtualMemoryWithContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := recv()
	if r.BackendID != "it-web1" || r.Seq != 1 || r.Interval != interval || r.Flags != report.FlagHealthOK {
		t.Errorf("first report: %+v", r)
	}
	if r.CPUCount < 1 || r.CPUCount != float64(int(r.CPUCount)) || r.CPUUtil < 0 || r.CPUUtil > 1 {
		t.Errorf("cpu: %v of %v cores", r.CPUUtil, r.CPUCount)
	}
	if r.MemBytes != vm.Total || r.MemUtil <= 0 || r.MemUtil >= 1 {
		t.Errorf("memory: %v of %d bytes, host has %d", r.MemUtil, r.MemBytes, vm.Total)
	}
	if r.Conns != 3 {
		t.Errorf("conns %d, want 3", r.Conns)
	}
	if r.HealthStatus != 200 || r.HealthError != "" || r.HealthLatency <= 0 || r.HealthLatency > 250*time.Millisecond {
		t.Errorf("health: %d %q %v", r.HealthStatus, r.HealthError, r.HealthLatency)
	}
	if d := time.Since(r.Time); d < 0 || d > 5*time.Second {
		t.Errorf("report time %v is %v from now", r.Time, d)
	}
	before := inflight
	r2 := recv()
	if gap := r2.Time.Sub(r.Time); gap < interval/2 || gap > 3*interval {
		t.Errorf("reports %v apart, interval %v", gap, interval)
	}
	if inflight == before {
		t.Errorf("no in-flight report between two full reports %v apart (in_flight_interval 50ms)", r2.Time.Sub(r.Time))
	}

	healthy.Store(false)
	r = waitFor("a failed health check", 3, func(r report.Report) bool { return r.HealthStatus == 503 })
	if r.Flags&report.FlagHealthOK != 0 || !strings.Contains(r.HealthError, "503") {
		t.Errorf("unhealthy report: %+v", r)
	}
	healthy.Store(true)
	waitFor("health back", 3, func(r report.Report) bool { return r.Flags&report.FlagHealthOK != 0 })

	// SIGUSR1 drains at once: the report it triggers arrives before the next interval's.
	cmd.Process.Signal(syscall.SIGUSR1)
	start := time.Now()
	waitFor("drain after SIGUSR1", 2, func(r report.Report) bool { return r.Flags&report.FlagDrain != 0 })
	if took := time.Since(start); took > interval {
		t.Errorf("drain took %v to be reported, interval %v", took, interval)
	}
	cmd.Process.Signal(syscall.SIGUSR2)
	waitFor("undrain after SIGUSR2", 2, func(r report.Report) bool { return r.Flags&report.FlagDrain == 0 })

	// The drain file, as `probe drain` / `probe undrain` write it.
	if out, err := exec.Command(bin, "drain", "-config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("probe drain: %v %s", err, out)
	}
	waitFor("drain from the drain file", 4, func(r report.Report) bool { return r.Flags&report.FlagDrain != 0 })
	if out, err := exec.Command(bin, "undrain", "-config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("probe undrain: %v %s", err, out)
	}
	waitFor("undrain from the drain file", 4, func(r report.Report) bool { return r.Flags&report.FlagDrain == 0 })

	cmd.Process.Signal(syscall.SIGTERM)
	last := waitFor("leaving", 3, func(r report.Report) bool { return r.Flags&report.FlagLeaving != 0 })
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("probe exit: %v", err)
		}
		exited <- err
	case <-time.After(5 * time.Second):
		t.Fatal("probe did not exit after SIGTERM")
	}
	t.Logf("last report seq %d flags %#x; %d reports; cpu %.3f of %v, mem %.3f of %s bytes",
		last.Seq, uint16(last.Flags), last.Seq, last.CPUUtil, last.CPUCount, last.MemUtil, strconv.FormatUint(last.MemBytes, 10))
}

// TestProbeBinaryServiceCPU: with a [service] pidfile the real probe sends version-2 reports
// carrying the service's own CPU; when the pidfile names a process that has exited (a stale
// pidfile), the signal is absent, not zero, and comes back when the pidfile is fixed.
func TestProbeBinaryServiceCPU(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "probe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sink, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	key := []byte("integration-key-0123456789abcdef")
	keyFile := filepath.Join(dir, "probe.key")
	if err := os.WriteFile(keyFile, append(key, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	// The service is this test process: it spins below while the probe measures it.
	pidFile := filepath.Join(dir, "service.pid")
	writePID := func(pid int) {
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writePID(os.Getpid())
	cfg := filepath.Join(dir, "probe.toml")
	body := strings.Join([]string{
		`backend_id = "it-svc"`,
		`collector = "` + sink.LocalAddr().String() + `"`,
		`key_file = "` + keyFile + `"`,
		`interval = "200ms"`,
		`jitter = 0.0`,
		`[service]`,
		`pidfile = "` + pidFile + `"`,
	}, "\n") + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopSpin := make(chan struct{})
	spun := make(chan struct{})
	go func() { // bounded: stopped at the end, and never longer than 30 s
		defer close(spun)
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
			select {
			case <-stopSpin:
				return
			default:
			}
		}
	}()
	defer func() {
		close(stopSpin)
		<-spun
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("probe log:\n%s", logs.String())
		}
	}()

	waitFor := func(what string, max int, ok func(report.Report) bool) report.Report {
		t.Helper()
		buf := make([]byte, 1024)
		for range max {
			sink.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := sink.ReadFrom(buf)
			if err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
			var r report.Report
			if err := report.Open(buf[:n], func(id string) ([]byte, bool) { return key, id == "it-svc" }, &r); err != nil {
				t.Fatalf("open: %v", err)
			}
			if ok(r) {
				return r
			}
		}
		t.Fatalf("no report with %s within %d reports", what, max)
		return report.Report{}
	}
	has := func(r report.Report) bool { return r.Signals&report.SignalServiceCPU != 0 }
	r := waitFor("the service's CPU", 10, has)
	// The spinning goroutine keeps about one core busy: well above nothing on any core count.
	if r.Version != 2 || r.ServiceCPU <= 0.05/r.CPUCount || r.ServiceCPU > 1 {
		t.Fatalf("version %d, service cpu %v of %v cores", r.Version, r.ServiceCPU, r.CPUCount)
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	writePID(gone.Process.Pid)
	r = waitFor("no service CPU for a stale pidfile", 10, func(r report.Report) bool { return !has(r) })
	if r.ServiceCPU != 0 {
		t.Fatalf("absent signal with a value: %+v", r)
	}
	writePID(os.Getpid())
	waitFor("the service's CPU again", 10, has)
}
