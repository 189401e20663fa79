package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"flowweight/collector"
	"flowweight/collector/push"
	"flowweight/collector/snmp"
	"flowweight/internal/report"
)

// phase is one measured stretch of the cost run.
type phase struct {
	cpu     time.Duration // this process's CPU over the window
	agent   time.Duration // snmpd's CPU over the window (SNMP phases only)
	updates int           // backend updates that reached the pool
	failed  int
	// sockets is the host's TCP sockets (in use + time-wait, /proc/net/sockstat)
	// at the start and end of the window: the tcpConnTable walk grows with them.
	sockets [2]int
}

// perUpdate is the collector's CPU per backend update, less the process's
// idle CPU over a window of the same length (Go runtime housekeeping that
// the process spends whatever it does). It is 0 when nothing was updated.
func perUpdate(p phase, idle time.Duration) time.Duration {
	if p.updates == 0 {
		return 0
	}
	net := p.cpu - idle
	if net < 0 {
		net = 0
	}
	return net / time.Duration(p.updates)
}

// cost measures the collector side of the two ingest paths, one after the
// other in this process, each for -periods periods of -period: every period
// each of N backends is updated once, through the collector's SNMP poller
// (N pollers, one UDP session each, all against the one real snmpd at -snmp)
// or through N simulated probes (a child process, so the sealing and sending
// is not counted) pushing sealed reports to a real push.Server. Both feed a
// real collector.Pool. CPU is getrusage(RUSAGE_SELF) around each window.
func cost(args []string) error {
	fs := flag.NewFlagSet("cost", flag.ContinueOnError)
	addr := fs.String("snmp", "", "snmpd address host:port (required)")
	community := fs.String("community", "", "v2c community (required)")
	port := fs.Int("service-port", 0, "TCP port with an IPv4 listener whose connections a poll counts (required)")
	agentPID := fs.Int("snmpd-pid", 0, "snmpd's PID, to report its CPU per poll (0: not reported)")
	ns := fs.String("n", "1,10,50", "comma-separated backend counts")
	period := fs.Duration("period", 500*time.Millisecond, "update period")
	periods := fs.Int("periods", 8, "measured periods per method and N")
	if err := fs.Parse(args); err != nil {
		return err
	}
	counts, err := parseCounts(*ns)
	if err != nil {
		return err
	}
	if *addr == "" || *community == "" || *port <= 0 {
		return errors.New("-snmp, -community and -service-port are required")
	}
	if *period <= 0 || *periods <= 0 || *periods > 1000 {
		return errors.New("-period must be > 0 and -periods in 1..1000")
	}
	window := time.Duration(*periods) * *period
	withPort := snmpTarget(*addr, *community, *port)
	allPorts := snmpTarget(*addr, *community, 0)
	if err := waitSNMP(withPort, 10*time.Second); err != nil {
		return err
	}

	idle, err := idlePhase(window)
	if err != nil {
		return err
	}
	fmt.Printf("update period %v, %d periods (%v) per method and N; idle CPU of this process over %v: %.0f µs (subtracted below)\n\n",
		*period, *periods, window, window, us(idle))
	fmt.Println("| backends N | updates per method | SNMP, per-port conns (tcpConnTable): collector CPU | SNMP, tcpCurrEstab: collector CPU | push: collector CPU | SNMP/push (per-port) | SNMP/push (tcpCurrEstab) | snmpd CPU per poll (per-port) | host TCP sockets (per-port phase) |")
	fmt.Println("|---:|---:|---|---|---|---:|---:|---:|---:|")
	var rows []costRow
	for _, n := range counts {
		sp, err := snmpPhase(withPort, n, *period, *periods, *agentPID)
		if err != nil {
			return err
		}
		se, err := snmpPhase(allPorts, n, *period, *periods, 0)
		if err != nil {
			return err
		}
		pp, err := pushPhase(n, *period, *periods)
		if err != nil {
			return err
		}
		for _, x := range []struct {
			name string
			p    phase
		}{{"snmp per-port", sp}, {"snmp tcpCurrEstab", se}, {"push", pp}} {
			if x.p.failed > 0 || x.p.updates != n**periods {
				return fmt.Errorf("%s, N=%d: %d updates, %d failed, want %d updates", x.name, n, x.p.updates, x.p.failed, n**periods)
			}
		}
		cell := func(p phase) string {
			return fmt.Sprintf("%.1f ms total, **%.0f µs/update**", ms(p.cpu), us(perUpdate(p, idle)))
		}
		ratio := func(a, b phase) string {
			pb := perUpdate(b, idle)
			if pb <= 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.1f×", float64(perUpdate(a, idle))/float64(pb))
		}
		agent := "not measured"
		if *agentPID > 0 {
			agent = fmt.Sprintf("%.0f µs (%.0f ms in 10 ms ticks)", us(sp.agent/time.Duration(sp.updates)), ms(sp.agent))
		}
		fmt.Printf("| %d | %d | %s | %s | %s | %s | %s | %s | %d → %d |\n", n, sp.updates, cell(sp), cell(se), cell(pp), ratio(sp, pp), ratio(se, pp), agent,
			sp.sockets[0], sp.sockets[1])
		rows = append(rows, costRow{n: n, perPort: sp, currEstab: se, push: pp})
	}
	if len(rows) > 1 {
		fmt.Println()
		fmt.Println("Marginal cost of one more backend update (the fixed cost of waking up each period cancels out):")
		fmt.Println()
		for i := 1; i < len(rows); i++ {
			a, b := rows[i-1], rows[i]
			mp, ok1 := marginal(a.perPort, b.perPort)
			me, ok2 := marginal(a.currEstab, b.currEstab)
			mu, ok3 := marginal(a.push, b.push)
			if !ok1 || !ok2 || !ok3 {
				continue
			}
			r := func(x time.Duration) string {
				if mu <= 0 {
					return "n/a"
				}
				return fmt.Sprintf("%.0f×", float64(x)/float64(mu))
			}
			fmt.Printf("- N %d → %d: SNMP per-port %.0f µs, SNMP tcpCurrEstab %.0f µs, push %.1f µs per update (SNMP/push %s and %s)\n",
				a.n, b.n, us(mp), us(me), us(mu), r(mp), r(me))
		}
	}
	return nil
}

// costRow is one N's three measurements.
type costRow struct {
	n                        int
	perPort, currEstab, push phase
}

// marginal is the CPU per extra update between two runs of the same method
// over windows of the same length: (cpuB-cpuA)/(updatesB-updatesA). The
// per-period costs that do not grow with N (timers, the scheduler waking a
// parked thread, the runtime's housekeeping) cancel. ok is false when b has
// no more updates than a.
func marginal(a, b phase) (time.Duration, bool) {
	du := b.updates - a.updates
	if du <= 0 {
		return 0, false
	}
	return (b.cpu - a.cpu) / time.Duration(du), true
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// idlePhase is this process's CPU over window while it does nothing.
func idlePhase(window time.Duration) (time.Duration, error) {
	c0, err := cpuSelf()
	if err != nil {
		return 0, err
	}
	time.Sleep(window)
	c1, err := cpuSelf()
	return c1 - c0, err
}

func newPool(names []string) *collector.Pool {
	p := collector.NewPool(collector.Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: time.Minute,
		Warmup: 30 * time.Second, Alpha: 0.3})
	p.SetBackends(names)
	return p
}

func backendNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench%03d", i)
	}
	return names
}

// snmpPhase polls the agent as n backends: one Poller each, every poll fed to
// the pool as the collector does (Observe). One unmeasured round first, so
// sessions, the pool's backends and the pollers' CPU baselines exist.
func snmpPhase(t snmp.Target, n int, period time.Duration, periods, agentPID int) (phase, error) {
	names := backendNames(n)
	pool := newPool(names)
	pollers := make([]*snmp.Poller, n)
	for i := range pollers {
		p, err := snmp.NewPoller(t)
		if err != nil {
			return phase{}, err
		}
		defer p.Close()
		pollers[i] = p
	}
	var ph phase
	round := func(count bool) {
		for i, p := range pollers {
			ctx, cancel := context.WithTimeout(context.Background(), period)
			s, err := p.Poll(ctx)
			cancel()
			if !count {
				continue
			}
			if err != nil {
				ph.failed++
				if ph.failed == 1 {
					fmt.Fprintf(os.Stderr, "snmp poll failed: %v\n", err)
				}
				continue
			}
			pool.Observe(names[i], collector.Sample{CPUUtil: s.CPUUtil, MemUtil: s.MemUtil, Conns: float64(s.Conns),
				CPUCount: s.CPUCount, MemBytes: float64(s.MemBytes), HasCPU: s.CPUKnown})
			ph.updates++
		}
	}
	round(false)
	var a0 time.Duration
	if agentPID > 0 {
		var err error
		if a0, err = procCPU(agentPID); err != nil {
			return phase{}, err
		}
	}
	ph.sockets[0] = tcpSockets()
	c0, err := cpuSelf()
	if err != nil {
		return phase{}, err
	}
	start := time.Now()
	for k := 0; k < periods; k++ {
		time.Sleep(time.Until(start.Add(time.Duration(k) * period)))
		round(true)
	}
	time.Sleep(time.Until(start.Add(time.Duration(periods) * period)))
	c1, err := cpuSelf()
	if err != nil {
		return phase{}, err
	}
	ph.cpu = c1 - c0
	ph.sockets[1] = tcpSockets()
	if agentPID > 0 {
		a1, err := procCPU(agentPID)
		if err != nil {
			return phase{}, err
		}
		ph.agent = a1 - a0
	}
	return ph, nil
}

// benchKey is backend i's HMAC key, derived from a per-run seed that parent
// and child share on the command line (a benchmark key, never a real one).
func benchKey(seed string, i int) []byte {
	k := sha256.Sum256([]byte(seed + ":" + strconv.Itoa(i)))
	return k[:]
}

// pushPhase runs a real push.Server feeding a pool, and a child process of
// n simulated probes; it measures only its own process.
func pushPhase(n int, period time.Duration, periods int) (phase, error) {
	names := backendNames(n)
	pool := newPool(names)
	seed := strconv.FormatInt(time.Now().UnixNano(), 36)
	keys := make(map[string][]byte, n)
	for i, name := range names {
		keys[name] = benchKey(seed, i)
	}
	srv, err := push.New(push.Config{Listen: "127.0.0.1:0", KeyFor: func(id string) ([]byte, bool) {
		k, ok := keys[id]
		return k, ok
	}}, pool)
	if err != nil {
		return phase{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() { cancel(); <-served }()

	self, err := os.Executable()
	if err != nil {
		return phase{}, err
	}
	cmd := exec.Command(self, "pushsend", "-addr", srv.Addr().String(), "-n", strconv.Itoa(n),
		"-period", period.String(), "-periods", strconv.Itoa(periods), "-seed", seed)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return phase{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return phase{}, err
	}
	if err := cmd.Start(); err != nil {
		return phase{}, fmt.Errorf("start %s pushsend: %w", self, err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The child sends one unmeasured round, then says "ready".
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		return phase{}, fmt.Errorf("pushsend child: want \"ready\", got %q: %v", line, err)
	}
	if err := waitAccepted(srv, uint64(n), 5*time.Second); err != nil {
		return phase{}, fmt.Errorf("warm-up round: %w", err)
	}
	c0, err := cpuSelf()
	if err != nil {
		return phase{}, err
	}
	start := time.Now()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return phase{}, fmt.Errorf("pushsend child: %w", err)
	}
	time.Sleep(time.Until(start.Add(time.Duration(periods) * period)))
	want := uint64(n * (periods + 1))
	waitErr := waitAccepted(srv, want, 2*time.Second)
	c1, err := cpuSelf()
	if err != nil {
		return phase{}, err
	}
	if err := cmd.Wait(); err != nil {
		return phase{}, fmt.Errorf("pushsend child: %w", err)
	}
	ph := phase{cpu: c1 - c0, updates: int(srv.Accepted()) - n}
	for reason, c := range srv.Rejected() {
		if c > 0 {
			fmt.Fprintf(os.Stderr, "push: %d reports rejected as %s\n", c, reason)
			ph.failed += int(c)
		}
	}
	if waitErr != nil {
		fmt.Fprintf(os.Stderr, "push: %v\n", waitErr)
	}
	var reports uint64
	for _, st := range pool.Snapshot(nil) {
		reports += st.Reports
	}
	if reports != srv.Accepted() {
		return phase{}, fmt.Errorf("push: pool counted %d reports, server accepted %d", reports, srv.Accepted())
	}
	return ph, nil
}

// waitAccepted waits until the server has accepted want reports, for at most limit.
func waitAccepted(srv *push.Server, want uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for srv.Accepted() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("server accepted %d of %d reports within %v", srv.Accepted(), want, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// pushSend is the child of cost: n probes' worth of sealed reports, one
// round right away (unmeasured), then "ready" on stdout, then, after "go" on
// stdin, -periods rounds one -period apart. A round sends every backend's
// report back to back, as probes whose intervals line up would.
func pushSend(args []string) error {
	fs := flag.NewFlagSet("pushsend", flag.ContinueOnError)
	addr := fs.String("addr", "", "push server address")
	n := fs.Int("n", 1, "backends")
	period := fs.Duration("period", time.Second, "time between rounds")
	periods := fs.Int("periods", 1, "rounds after go")
	seed := fs.String("seed", "", "key seed shared with the parent")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" || *seed == "" || *n <= 0 || *n > 1000 || *periods <= 0 || *periods > 1000 || *period <= 0 {
		return errors.New("-addr and -seed are required; -n and -periods in 1..1000, -period > 0")
	}
	conn, err := net.Dial("udp", *addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	names := backendNames(*n)
	keys := make([][]byte, *n)
	for i := range keys {
		keys[i] = benchKey(*seed, i)
	}
	nonce := uint64(time.Now().UnixNano())
	var seq uint64
	buf := make([]byte, 0, report.MaxDatagram)
	round := func() error {
		seq++
		for i, name := range names {
			r := report.Report{BackendID: name, BootNonce: nonce + uint64(i), Seq: seq, Time: time.Now(),
				Interval: *period, Flags: report.FlagHealthOK, CPUUtil: 0.25, CPUCount: 2, MemUtil: 0.4,
				MemBytes: 24 << 30, Conns: uint32(i), HealthLatency: 300 * time.Microsecond, HealthStatus: 200}
			b, err := r.AppendSeal(buf[:0], keys[i])
			if err != nil {
				return err
			}
			if _, err := conn.Write(b); err != nil {
				return fmt.Errorf("send to %s: %w", *addr, err)
			}
		}
		return nil
	}
	if err := round(); err != nil {
		return err
	}
	fmt.Println("ready")
	goLine := make(chan error, 1)
	go func() {
		s, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err == nil && strings.TrimSpace(s) != "go" {
			err = fmt.Errorf("stdin: want \"go\", got %q", s)
		}
		goLine <- err
	}()
	select {
	case err := <-goLine:
		if err != nil {
			return err
		}
	case <-time.After(30 * time.Second):
		return errors.New("no \"go\" on stdin within 30s")
	}
	start := time.Now()
	for k := 0; k < *periods; k++ {
		time.Sleep(time.Until(start.Add(time.Duration(k) * *period)))
		if err := round(); err != nil {
			return err
		}
	}
	return nil
}

// tcpSockets is the host's TCP sockets in use plus those in time-wait, from
// /proc/net/sockstat, or -1 when it cannot be read.
func tcpSockets() int {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return -1
	}
	n, err := parseSockstatTCP(string(b))
	if err != nil {
		return -1
	}
	return n
}

// parseSockstatTCP sums "inuse" and "tw" of the "TCP:" line of
// /proc/net/sockstat ("TCP: inuse 5 orphan 0 tw 60 alloc 9 mem 3").
func parseSockstatTCP(text string) (int, error) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "TCP:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		total, seen := 0, 0
		for i := 0; i+1 < len(f); i += 2 {
			if f[i] != "inuse" && f[i] != "tw" {
				continue
			}
			v, err := strconv.Atoi(f[i+1])
			if err != nil || v < 0 {
				return 0, fmt.Errorf("sockstat TCP %s %q: want a count", f[i], f[i+1])
			}
			total += v
			seen++
		}
		if seen != 2 {
			return 0, fmt.Errorf("sockstat TCP line %q: want inuse and tw", line)
		}
		return total, nil
	}
	return 0, errors.New("sockstat: no TCP line")
}
