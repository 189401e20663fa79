//go:build integration

package agentcheck_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
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
)

const haproxyBin = "/usr/sbin/haproxy"

// logBuffer collects a daemon's output for failure messages.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// daemon is a process the test started; stop ends it by its PID and waits.
type daemon struct {
	name     string
	cmd      *exec.Cmd
	log      *logBuffer
	exited   chan error
	stopOnce sync.Once
	stopErr  error
}

func startDaemon(t *testing.T, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: name, cmd: exec.Command(args[0], args[1:]...), log: &logBuffer{}, exited: make(chan error, 1)}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	return d
}

// stop sends SIGTERM, then SIGKILL after a bound, and returns the exit error; later calls
// return the same.
func (d *daemon) stop() error {
	d.stopOnce.Do(func() { d.stopErr = d.terminate() })
	return d.stopErr
}

func (d *daemon) terminate() error {
	select {
	case err := <-d.exited:
		return fmt.Errorf("%s had already exited: %v", d.name, err)
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		// HAProxy in the foreground (-db) dies of the signal itself rather than exiting 0.
		if ee, ok := err.(*exec.ExitError); ok {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				return nil
			}
		}
		return err
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		return fmt.Errorf("%s ignored SIGTERM for 10s, killed", d.name)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// agentReply connects to the probe's agent port as HAProxy does and returns the line.
func agentReply(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

// serverState runs "show servers state BACKEND" on HAProxy's stats socket and returns the
// named server's columns by header name.
func serverState(sock, backend, server string) (map[string]string, error) {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "show servers state "+backend+"\n"); err != nil {
		return nil, err
	}
	out, err := io.ReadAll(c) // HAProxy closes after one command when not in prompt mode
	if err != nil {
		return nil, err
	}
	var header []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "# "); ok && header == nil {
			header = strings.Fields(h)
			continue
		}
		f := strings.Fields(line)
		if header == nil || len(f) != len(header) {
			continue
		}
		row := map[string]string{}
		for i, name := range header {
			row[name] = f[i]
		}
		if row["srv_name"] == server {
			return row, nil
		}
	}
	return nil, fmt.Errorf("no server %s/%s in:\n%s", backend, server, out)
}

// TestHAProxyFollowsProbe runs the real probe with [agent_check] and Debian's haproxy with
// one server whose agent is the probe, and checks that HAProxy's effective weight, drain
// state and operational state follow what the probe measures and answers.
func TestHAProxyFollowsProbe(t *testing.T) {
	if _, err := os.Stat(haproxyBin); err != nil {
		t.Fatalf("haproxy is required for this test (apt-get install haproxy): %v", err)
	}
	dir := t.TempDir()
	probeBin := filepath.Join(dir, "probe")
	if out, err := exec.Command("go", "build", "-o", probeBin, "flowweight/probe").CombinedOutput(); err != nil {
		t.Fatalf("go build probe: %v\n%s", err, out)
	}

	// The collector: a UDP socket nobody reads; the probe only needs somewhere to send.
	sink, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()

	// The backend's service, whose health the test toggles.
	var healthy atomic.Bool
	healthy.Store(true)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	}))
	defer web.Close()
	webAddr := web.Listener.Addr().(*net.TCPAddr)

	// Load is made from idle client connections to the service: with conn = 1 and
	// max_conns = 4, each held connection takes 25 points off the percentage, so the
	// expected weights do not depend on what else this machine is doing.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	hold := func() {
		c, err := net.Dial("tcp", webAddr.String())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}

	keyFile := filepath.Join(dir, "probe.key")
	if err := os.WriteFile(keyFile, []byte("haproxy-integration-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfgFile := filepath.Join(dir, "probe.toml")
	cfg := strings.Join([]string{
		`backend_id = "haproxy-it"`,
		`collector = "` + sink.LocalAddr().String() + `"`,
		`key_file = "` + keyFile + `"`,
		`interval = "300ms"`,
		`jitter = 0.0`,
		`service_ports = [` + strconv.Itoa(webAddr.Port) + `]`,
		`drain_file = "` + filepath.Join(dir, "run", "drain") + `"`,
		`log_level = "debug"`,
		`[health]`,
		`url = "` + web.URL + `/healthz"`,
		`timeout = "250ms"`,
		`[agent_check]`,
		`listen = "` + agentAddr + `"`,
		`cpu = 0.0`,
		`mem = 0.0`,
		`conn = 1.0`,
		`max_conns = 4`,
		`floor_percent = 1`,
	}, "\n") + "\n"
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	hold()

	probe := startDaemon(t, "probe", probeBin, "-config", cfgFile)
	var haproxy *daemon
	sock := filepath.Join(dir, "haproxy.sock")
	defer func() {
		if haproxy != nil {
			if t.Failed() {
				if st, err := serverState(sock, "be_web", "web1"); err == nil {
					t.Logf("haproxy server state: %v", st)
				}
			}
			if err := haproxy.stop(); err != nil {
				t.Logf("haproxy: %v", err)
			}
		}
		if err := probe.stop(); err != nil {
			t.Errorf("probe did not exit cleanly on SIGTERM: %v", err)
		}
		if t.Failed() {
			if haproxy != nil {
				t.Logf("haproxy log:\n%s", haproxy.log.String())
			}
			t.Logf("probe log:\n%s", probe.log.String())
		}
	}()

	// waitFor polls cond until it holds or the bound passes; cond says what it last saw.
	waitFor := func(what string, within time.Duration, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(within)
		last := ""
		for {
			ok, seen := cond()
			if ok {
				return
			}
			if seen != last {
				t.Logf("waiting for %s: %s", what, seen)
				last = seen
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within %v; last seen: %s", what, within, seen)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	reply := func() string {
		r, err := agentReply(agentAddr)
		if err != nil {
			return "error: " + err.Error()
		}
		return r
	}
	waitFor("the probe's first agent reply", 10*time.Second, func() (bool, string) {
		r := reply()
		return strings.HasSuffix(r, "\n"), fmt.Sprintf("%q", r)
	})

	const configured = 50 // weight on the server line; HAProxy scales it by the percentage
	hcfg := filepath.Join(dir, "haproxy.cfg")
	hbody := strings.Join([]string{
		"global",
		"  stats socket " + sock + " mode 600 level admin",
		"  pidfile " + filepath.Join(dir, "haproxy.pid"),
		"defaults",
		"  mode tcp",
		"  timeout connect 1s",
		"  timeout client 5s",
		"  timeout server 5s",
		"backend be_web",
		"  server web1 " + webAddr.String() + " weight " + strconv.Itoa(configured) +
			" agent-check agent-port " + agentAddr[strings.LastIndex(agentAddr, ":")+1:] + " agent-inter 500ms",
	}, "\n") + "\n"
	if err := os.WriteFile(hcfg, []byte(hbody), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxyBin, "-c", "-f", hcfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	haproxy = startDaemon(t, "haproxy", haproxyBin, "-f", hcfg, "-db")

	state := func() (map[string]string, string) {
		st, err := serverState(sock, "be_web", "web1")
		if err != nil {
			return nil, "error: " + err.Error()
		}
		return st, fmt.Sprintf("op_state=%s admin_state=%s uweight=%s iweight=%s check_status=%s",
			st["srv_op_state"], st["srv_admin_state"], st["srv_uweight"], st["srv_iweight"], st["srv_check_status"])
	}
	// weightFollows waits until the probe answers "up ready P%" with P == want and HAProxy
	// shows the server up, ready, with effective weight configured×P/100 (integer division,
	// as HAProxy computes it).
	weightFollows := func(want int) {
		t.Helper()
		waitFor(fmt.Sprintf("weight %d%% in HAProxy", want), 15*time.Second, func() (bool, string) {
			r := reply()
			var p int
			if _, err := fmt.Sscanf(r, "up ready %d%%\n", &p); err != nil {
				return false, fmt.Sprintf("probe %q", r)
			}
			st, seen := state()
			seen = fmt.Sprintf("probe %q; haproxy %s", r, seen)
			if st == nil {
				return false, seen
			}
			iw, _ := strconv.Atoi(st["srv_iweight"])
			uw, _ := strconv.Atoi(st["srv_uweight"])
			return p == want && iw == configured && uw == configured*p/100 &&
				st["srv_op_state"] == "2" && st["srv_admin_state"] == "0", seen
		})
	}

	// (1) The effective weight follows the probe's load.
	weightFollows(75) // one connection of four
	hold()
	weightFollows(50) // two of four
	t.Logf("weights followed: 75%% → %d, 50%% → %d", configured*75/100, configured*50/100)

	// (2) Drain and undrain, by the drain file and by signal.
	drained := func(want bool) {
		t.Helper()
		waitFor(fmt.Sprintf("drained=%v in HAProxy", want), 10*time.Second, func() (bool, string) {
			r := reply()
			st, seen := state()
			seen = fmt.Sprintf("probe %q; haproxy %s", r, seen)
			if st == nil {
				return false, seen
			}
			admin, _ := strconv.ParseUint(st["srv_admin_state"], 0, 32)
			const fdrain = 0x08 // SRV_ADMF_FDRAIN
			return (admin&fdrain != 0) == want && (r == "up drain\n") == want, seen
		})
	}
	for _, step := range []struct {
		name string
		do   func() error
		want bool
	}{
		{"probe drain", func() error { return exec.Command(probeBin, "drain", "-config", cfgFile).Run() }, true},
		{"probe undrain", func() error { return exec.Command(probeBin, "undrain", "-config", cfgFile).Run() }, false},
		{"SIGUSR1", func() error { return probe.cmd.Process.Signal(syscall.SIGUSR1) }, true},
		{"SIGUSR2", func() error { return probe.cmd.Process.Signal(syscall.SIGUSR2) }, false},
	} {
		start := time.Now()
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		drained(step.want)
		t.Logf("%s: HAProxy drained=%v after %v", step.name, step.want, time.Since(start).Round(time.Millisecond))
		if !step.want {
			weightFollows(50)
		}
	}

	// (3) A failing health check takes the server down by agent; recovery brings it back.
	healthy.Store(false)
	start := time.Now()
	waitFor("server down by agent", 10*time.Second, func() (bool, string) {
		r := reply()
		st, seen := state()
		seen = fmt.Sprintf("probe %q; haproxy %s", r, seen)
		return st != nil && st["srv_op_state"] == "0" && strings.HasPrefix(r, "down ready #health check failed"), seen
	})
	t.Logf("health failed: HAProxy marked the server down after %v", time.Since(start).Round(time.Millisecond))
	healthy.Store(true)
	start = time.Now()
	weightFollows(50)
	t.Logf("health restored: HAProxy marked the server up after %v", time.Since(start).Round(time.Millisecond))

	// (4) A stopped probe leaves HAProxy with its last answer: failing to reach the agent is
	// not a check failure, and the leaving report does not drain.
	if err := probe.stop(); err != nil {
		t.Fatalf("probe did not exit cleanly on SIGTERM: %v", err)
	}
	for end := time.Now().Add(4 * 500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		st, seen := state()
		if st == nil || st["srv_op_state"] != "2" || st["srv_admin_state"] != "0" || st["srv_uweight"] != strconv.Itoa(configured*50/100) {
			t.Fatalf("after the probe stopped, HAProxy changed the server: %s", seen)
		}
	}
}
