package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"flowweight/e2e/lab"
	"flowweight/e2e/scenario"
)

// haproxyBin is Debian's HAProxy (scripts/deps.sh installs it).
const haproxyBin = "/usr/sbin/haproxy"

// haproxyServer is one backend line of haproxy.cfg.
type haproxyServer struct {
	name, addr string
	weight     int // 0: no weight keyword (HAProxy's default, 1)
	// slowstart is HAProxy's timed ramp of a server that comes up (its warm-up); 0: none.
	slowstart time.Duration
}

// haproxyCheck are the health checks HAProxy gets: the same as each flowweight probe's
// (GET /health every second, 500 ms timeout, down after 3 failures, up after 2
// successes), so that neither side can evict a backend the other could not.
const haproxyCheck = "check inter 1s fastinter 100ms fall 3 rise 2"

// haproxyConfig renders haproxy.cfg for a peer of flowweight: TCP mode (no HTTP parsing,
// as the switch does none), least connections, listening on listen, with the servers given.
// Health checks mirror the probes' (haproxyCheck). No log target: a log line per connection
// would cost HAProxy CPU the switch does not spend; in the foreground (-db) HAProxy still
// writes its warnings to stderr, server state changes ("is DOWN") among them.
func haproxyConfig(listen string, servers []haproxyServer) (string, error) {
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return "", fmt.Errorf("haproxy listen %q: %w", listen, err)
	}
	if len(servers) == 0 {
		return "", fmt.Errorf("haproxy: no servers")
	}
	var b strings.Builder
	b.WriteString("global\n    maxconn 4096\n\n")
	b.WriteString("defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n    timeout check 500ms\n\n")
	fmt.Fprintf(&b, "frontend fe\n    bind %s\n    default_backend pool\n\n", listen)
	b.WriteString("backend pool\n    balance leastconn\n    option httpchk GET /health\n")
	for _, s := range servers {
		if s.name == "" || strings.ContainsAny(s.name, " \t\n#") {
			return "", fmt.Errorf("haproxy server name %q: want a word", s.name)
		}
		if _, _, err := net.SplitHostPort(s.addr); err != nil {
			return "", fmt.Errorf("haproxy server %s address %q: %w", s.name, s.addr, err)
		}
		if s.weight < 0 || s.weight > 256 {
			return "", fmt.Errorf("haproxy server %s weight %d: want 1 to 256 (0: none)", s.name, s.weight)
		}
		fmt.Fprintf(&b, "    server %s %s %s", s.name, s.addr, haproxyCheck)
		if s.weight > 0 {
			fmt.Fprintf(&b, " weight %d", s.weight)
		}
		if s.slowstart < 0 || s.slowstart%time.Millisecond != 0 {
			return "", fmt.Errorf("haproxy server %s slowstart %v: want whole milliseconds >= 0", s.name, s.slowstart)
		}
		if s.slowstart > 0 {
			fmt.Fprintf(&b, " slowstart %dms", s.slowstart.Milliseconds())
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// haproxyWeights scales declared capacities to HAProxy's integer weights, the largest 256
// (its maximum), so the ratios survive rounding as closely as HAProxy allows; none below 1.
func haproxyWeights(caps []float64) ([]int, error) {
	top := 0.0
	for i, c := range caps {
		if !(c > 0) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("capacity %d is %v: want > 0", i, c)
		}
		top = max(top, c)
	}
	out := make([]int, len(caps))
	for i, c := range caps {
		out[i] = max(1, int(math.Round(256*c/top)))
	}
	return out, nil
}

// haproxyPeer is one HAProxy started for the bench in the client's namespace.
type haproxyPeer struct {
	label  string
	listen string // address:port inside the client's namespace
	p      *lab.Proc
	cfg    string
}

// startHAProxy writes the peer's config into dir, checks it with `haproxy -c`, starts
// HAProxy in the client's namespace on 127.0.0.1:port and waits until it accepts. weights
// nil: none. The bench stops it by PID (Stop); the lab's Close would too.
func startHAProxy(s *scenario.Scenario, dir, label string, port int, weights []int) (*haproxyPeer, error) {
	return startHAProxySlow(s, dir, label, port, weights, 0)
}

// startHAProxySlow is startHAProxy with every server's slowstart set.
func startHAProxySlow(s *scenario.Scenario, dir, label string, port int, weights []int, slowstart time.Duration) (*haproxyPeer, error) {
	if _, err := os.Stat(haproxyBin); err != nil {
		return nil, fmt.Errorf("%s: %w (scripts/deps.sh installs it)", haproxyBin, err)
	}
	var servers []haproxyServer
	for i, be := range s.Backends {
		sv := haproxyServer{name: be.Name, addr: net.JoinHostPort(be.Host.Addr().String(), strconv.Itoa(scenario.BackendPort)), slowstart: slowstart}
		if weights != nil {
			sv.weight = weights[i]
		}
		servers = append(servers, sv)
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	text, err := haproxyConfig(listen, servers)
	if err != nil {
		return nil, err
	}
	name := "haproxy-" + strconv.Itoa(port)
	cfg := filepath.Join(dir, name+".cfg")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command(haproxyBin, "-c", "-q", "-f", cfg).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("haproxy -c %s: %w\n%s", cfg, err, out)
	}
	p, err := s.Lab.Start(name, s.Client.Command(context.Background(), haproxyBin, "-db", "-f", cfg), nil)
	if err != nil {
		return nil, err
	}
	h := &haproxyPeer{label: label, listen: listen, p: p, cfg: cfg}
	err = lab.Poll(10*time.Second, func() error {
		if p.Exited() {
			return fmt.Errorf("haproxy exited: %v\n%s", p.Wait(), lab.Tail(p.LogPath, 10))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := s.Client.DialContext(ctx, "tcp", listen)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	slog.Info("haproxy started", "label", label, "pid", p.PID, "listen", listen, "config", cfg, "log", p.LogPath)
	return h, nil
}

// downs counts the servers HAProxy has logged going down so far.
func (h *haproxyPeer) downs() int {
	data, err := os.ReadFile(h.p.LogPath)
	if err != nil {
		return 0
	}
	return countDowns(string(data))
}

// countDowns counts HAProxy's warnings of a server going down in its stderr; the same event
// sent to a log target ("<1>Server ... is DOWN") is not counted again.
func countDowns(log string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "[WARNING]") && strings.Contains(l, ": Server ") && strings.Contains(l, " is DOWN") {
			n++
		}
	}
	return n
}

// Stop ends this HAProxy by its PID.
func (h *haproxyPeer) Stop() error { return h.p.Stop() }
