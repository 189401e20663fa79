// Command fleet measures one controller serving many switches and many backends, against one
// real ovs-vswitchd running many bridges (each its own datapath id, no hosts, no uplink).
//
// It runs the controller in this process (controller/balancer, the code the binary runs) so it
// can read each switch's syncer status, and simulated probes that push authenticated reports
// at 1 Hz over loopback. It prints markdown; docs/benchmarks.md ("Fleet") has the commands and
// the figures.
//
//	go run ./cmd/fleet -switches 100 -services 10 -backends 4 -changes 100 -silent
//	go run ./cmd/fleet -switches 1 -services 1000 -backends 10 -hold 60s
//	go run ./cmd/fleet -switches 10 -flap 60s
//
// It needs root and Open vSwitch (scripts/deps.sh), and takes the lab's one-switch-per-host
// lock like every test that starts ovs-vswitchd.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"flowweight/controller/balancer"
	"flowweight/controller/config"
	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"
	"flowweight/e2e/lab"
	"flowweight/internal/report"
	"flowweight/weights"

	"github.com/prometheus/client_golang/prometheus"
)

type options struct {
	switches, services, backends, changes int
	silent, noCounters                    bool
	hold, flap                            time.Duration
	dir, cpuprofile, memprofile           string
}

func main() {
	var o options
	flag.IntVar(&o.switches, "switches", 100, "bridges in the one ovs-vswitchd, all connected to the controller")
	flag.IntVar(&o.services, "services", 10, "services (VIPs)")
	flag.IntVar(&o.backends, "backends", 4, "backends per service")
	flag.IntVar(&o.changes, "changes", 100, "weight changes to time on every switch (0: none)")
	flag.BoolVar(&o.silent, "silent", false, "also connect a peer that completes the handshake and then stops reading")
	flag.BoolVar(&o.noCounters, "no-counters", false, "collector.throughput_from = \"none\": no per-period flow counter reads")
	flag.DurationVar(&o.hold, "hold", 0, "run the probes this long after programming and report the update period, CPU, RSS and report loss")
	flag.DurationVar(&o.flap, "flap", 0, "reconnect one extra switch every second for this long, and report goroutines, heap and metric series before and after")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the timed weight changes to this file")
	flag.StringVar(&o.memprofile, "memprofile", "", "write a heap profile at the end of -hold to this file, and FILE.N at each sample of -flap")
	flag.Parse()
	if o.switches < 0 || o.switches > 250 || o.services < 1 || o.backends < 1 || o.backends > 1000 || o.services*o.backends > 100000 {
		fmt.Fprintln(os.Stderr, "fleet: want 0-250 switches, at least one service, 1-1000 backends per service, at most 100,000 backends")
		os.Exit(2)
	}
	if o.memprofile != "" {
		runtime.MemProfileRate = 4096 // fine enough to see what a flap leaves behind
	}
	dir, err := os.MkdirTemp("", "fwfleet-")
	if err != nil {
		fatal("temp dir", err)
	}
	defer os.RemoveAll(dir)
	o.dir = dir
	if err := run(o); err != nil {
		fatal("fleet", err)
	}
}

func fatal(what string, err error) {
	fmt.Fprintf(os.Stderr, "fleet: %s: %v\n", what, err)
	os.Exit(1)
}

// configText is a controller configuration with every backend's MAC and port pinned (the
// bridges have no hosts: nothing to learn) under the static policy with no step limit, so one
// drain is one weight change written in one update.
func configText(o options, keyFile string) string {
	var sb strings.Builder
	throughput := "switch"
	if o.noCounters {
		throughput = "none"
	}
	fmt.Fprintf(&sb, `[controller]
listen = "127.0.0.1:0"
update_period = "1s"
readback_period = "30s"
[api]
listen = ""
[collector]
push_listen = "127.0.0.1:0"
key_file = %q
stale_after = "5s"
throughput_from = %q
[weighting]
policy = "static"
max_step = 1.0
warmup = "1s"
`, keyFile, throughput)
	for i := range o.services {
		fmt.Fprintf(&sb, "[[service]]\nname = \"svc%d\"\nvip = \"10.%d.%d.250\"\nport = 80\ngroup_id = %d\n", i, 100+i/250, i%250, i+1)
		for j := range o.backends {
			n := i*o.backends + j
			fmt.Fprintf(&sb, "  [[service.backend]]\n  name = \"be%d\"\n  ip = \"10.%d.%d.%d\"\n  mac = \"02:00:%02x:%02x:%02x:%02x\"\n  switch_port = %d\n",
				n, 200+n/62500, (n/250)%250, n%250+1, byte(n>>24), byte(n>>16), byte(n>>8), byte(n), j+1)
		}
	}
	return sb.String()
}

func run(o options) error {
	key := []byte("fleet-bench-key-0123456789abcdef")
	keyFile := filepath.Join(o.dir, "push.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return err
	}
	cfg, err := config.Parse("fleet.toml", []byte(configText(o, keyFile)))
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	m := balancer.NewMetrics()
	if err := m.Register(reg); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(o.dir, "controller.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	b, err := balancer.New(cfg, balancer.Options{Logger: slog.New(slog.NewJSONHandler(logf, nil)), Metrics: m})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type addrs struct{ of, push net.Addr }
	ready := make(chan addrs, 1)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, func(of, push net.Addr) { ready <- addrs{of, push} }) }()
	var a addrs
	select {
	case a = <-ready:
	case err := <-done:
		return fmt.Errorf("controller: %w", err)
	}
	defer func() { cancel(); <-done }()

	var names []string
	for _, s := range cfg.Services {
		for _, be := range s.Backends {
			names = append(names, be.Name)
		}
	}
	probes, err := startProbes(ctx, a.push.String(), key, names)
	if err != nil {
		return err
	}
	if err := waitFor(30*time.Second, "every backend reported", func() bool {
		for _, st := range b.Pool().Snapshot(nil) {
			if st.Status == weights.StatusUnknown || st.Status == weights.StatusWarming {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}

	var ovs *lab.OVS
	if o.switches > 0 || o.flap > 0 {
		l, err := lab.New(filepath.Join(o.dir, "lab"), nil)
		if err != nil {
			return err
		}
		defer l.Close()
		if ovs, err = l.StartOVS(); err != nil {
			return err
		}
	}
	fmt.Printf("## Fleet: %d bridges in one ovs-vswitchd, %d services × %d backends\n\n", o.switches, o.services, o.backends)
	fmt.Printf("Machine: %d cores, %s, %s. Controller in process (controller/balancer), static policy, update period 1 s.\n\n",
		runtime.NumCPU(), cpuModel(), runtime.Version())

	start := time.Now()
	var bridges []*lab.Bridge
	for i := range o.switches {
		br, err := ovs.AddBridge("b"+strconv.Itoa(i), "", "secure")
		if err != nil {
			return err
		}
		bridges = append(bridges, br)
	}
	fmt.Printf("- %d bridges created in %s (ovs-vsctl, not the controller)\n", len(bridges), time.Since(start).Round(time.Millisecond))
	runtime.GC()
	heap0 := heapInUse()
	rss0 := rssBytes(os.Getpid())
	vsRSS0 := vswitchdRSS(ovs)

	// Cold: every bridge is told about the controller in one ovs-vsctl transaction.
	target := "tcp:" + a.of.String()
	args := []string{}
	for _, br := range bridges {
		args = append(args, "--", "set-controller", br.Name, target)
	}
	t0 := time.Now()
	if len(args) > 0 {
		if _, err := ovs.Vsctl(args...); err != nil {
			return err
		}
	}
	if err := waitFor(2*time.Minute, "every bridge programmed", func() bool {
		sts := b.View().SwitchStatuses()
		if len(sts) < o.switches {
			return false
		}
		for _, st := range sts {
			if st.Seq == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	cold := time.Since(t0)
	fmt.Printf("- cold: every bridge connected, read back, programmed and confirmed by barrier in **%s** (from set-controller; target ≤ 5 s)\n", cold.Round(time.Millisecond))
	if len(bridges) > 0 {
		if err := checkGroups(bridges, b, o); err != nil {
			return err
		}
		fmt.Printf("- checked with ovs-ofctl dump-groups on %d bridges: bucket weights equal the controller's\n", min(len(bridges), 5))
	}
	runtime.GC()
	heap1 := heapInUse()
	rss1 := rssBytes(os.Getpid())
	vsRSS1 := vswitchdRSS(ovs)
	if o.switches > 0 {
		fmt.Printf("- memory per switch: controller heap in use +%s, controller RSS +%s, ovs-vswitchd RSS +%s (after programming, over %d switches)\n",
			perSwitch(heap1-heap0, o.switches), perSwitch(rss1-rss0, o.switches), perSwitch(vsRSS1-vsRSS0, o.switches), o.switches)
	}

	if o.changes > 0 && o.switches > 0 {
		if err := timeChanges(b, reg, o, false); err != nil {
			return err
		}
	}
	if o.silent {
		silent, err := silentPeer(a.of.String(), silentDPID)
		if err != nil {
			return err
		}
		defer silent.Close()
		if err := waitFor(30*time.Second, "silent peer registered", func() bool { return hasSyncer(b, silentDPID) }); err != nil {
			return err
		}
		if o.changes > 0 && o.switches > 0 {
			if err := timeChanges(b, reg, o, true); err != nil {
				return err
			}
		}
		fmt.Printf("- the silent peer was still connected at the end: %v\n", hasSyncer(b, silentDPID))
	}
	if o.hold > 0 {
		if err := holdRun(b, reg, probes, o); err != nil {
			return err
		}
	}
	if o.flap > 0 {
		if err := flapRun(b, reg, ovs, target, o); err != nil {
			return err
		}
	}
	return nil
}

func vswitchdRSS(o *lab.OVS) int64 {
	if o == nil {
		return 0
	}
	return rssBytes(o.PID())
}

func perSwitch(d int64, n int) string {
	return fmt.Sprintf("%.1f KiB", float64(d)/float64(n)/1024)
}

// timeChanges drains and undrains svc0's first backend o.changes times and times each change
// from the drain call to the last switch holding the new weights, confirmed by barrier (a
// syncer publishes its planned weights only after the barrier replies).
func timeChanges(b *balancer.Balancer, reg *prometheus.Registry, o options, silent bool) error {
	rtt0 := histogram(reg, "flowweight_barrier_rtt_seconds")
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	if o.cpuprofile != "" && !silent {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var lat []time.Duration
	drained := false
	for i := range o.changes {
		drained = !drained
		t0 := time.Now()
		if err := b.Drain("be0", drained); err != nil {
			return err
		}
		if err := waitFor(30*time.Second, fmt.Sprintf("change %d on every switch", i), func() bool {
			sts := b.View().SwitchStatuses()
			n := 0
			for _, st := range sts {
				if st.DPID == silentDPID {
					continue
				}
				if !holds(st, drained) {
					return false
				}
				n++
			}
			return n >= o.switches
		}); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	rtt := histogram(reg, "flowweight_barrier_rtt_seconds")
	rttMean := 0.0
	if n := rtt.count - rtt0.count; n > 0 {
		rttMean = (rtt.sum - rtt0.sum) / float64(n)
	}
	cpuPer := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(len(lat))
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	extra := ""
	if silent {
		extra = ", with a silent peer (handshake done, then it never reads) connected beside them"
	}
	fmt.Printf("- one weight change (drain or undrain of one backend) confirmed by barrier on all %d bridges%s, over %d changes: p50 **%s**, p99 **%s**, max %s (target ≤ 50 ms)\n",
		o.switches, extra, len(lat), q(0.5).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
	fmt.Printf("  - per change: this process's CPU %s (controller, probes and this poller), mean barrier round trip per switch %.2f ms\n",
		cpuPer.Round(10*time.Microsecond), rttMean*1000)
	return nil
}

// holds reports whether st's planned weights for svc0 have be0 at zero (drained) or not.
func holds(st *switchsync.Status, drained bool) bool {
	for _, s := range st.Planned {
		if s.Name == "svc0" && len(s.Backends) > 0 {
			return (s.Backends[0].Weight == 0) == drained
		}
	}
	return false
}

// checkGroups compares the first bridges' select groups, as ovs-ofctl dump-groups prints
// them, with the groups the controller planned for each (bucket weights as a multiset: the
// slot layout's order is the planner's business).
func checkGroups(bridges []*lab.Bridge, b *balancer.Balancer, o options) error {
	byDPID := map[uint64]*switchsync.Status{}
	for _, st := range b.View().SwitchStatuses() {
		byDPID[st.DPID] = st
	}
	for _, br := range bridges[:min(len(bridges), 5)] {
		st := byDPID[br.DPID]
		if st == nil {
			return fmt.Errorf("bridge %s (%016x) has no syncer", br.Name, br.DPID)
		}
		want := map[uint32][]uint16{}
		for _, g := range dataplane.Desired(st.Planned, dataplane.Options{Normal: true, OVS: st.OVS}).Groups {
			for _, k := range g.Buckets {
				want[g.ID] = append(want[g.ID], k.Weight)
			}
		}
		out, err := br.DumpGroups()
		if err != nil {
			return err
		}
		groups, err := lab.ParseGroups(out)
		if err != nil {
			return err
		}
		if len(groups) != len(want) {
			return fmt.Errorf("bridge %s holds %d groups, the controller planned %d", br.Name, len(groups), len(want))
		}
		for _, g := range groups {
			var got []uint16
			for _, k := range g.Buckets {
				got = append(got, k.Weight)
			}
			w := slices.Clone(want[g.ID])
			slices.Sort(got)
			slices.Sort(w)
			if !slices.Equal(got, w) {
				return fmt.Errorf("bridge %s group %d: bucket weights %v, the controller planned %v", br.Name, g.ID, got, w)
			}
		}
	}
	return nil
}

// holdRun keeps the probes going for o.hold and reports the update's duration against its
// period, the process's CPU and RSS, and reports sent against accepted.
func holdRun(b *balancer.Balancer, reg *prometheus.Registry, p *probes, o options) error {
	upd0 := histogram(reg, "flowweight_update_duration_seconds")
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	t0 := time.Now()
	deadline := t0.Add(o.hold)
	var maxRSS int64
	for time.Now().Before(deadline) {
		time.Sleep(time.Second) // a sampling period of the RSS, not a wait for a condition
		maxRSS = max(maxRSS, rssBytes(os.Getpid()))
	}
	wall := time.Since(t0)
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	upd := histogram(reg, "flowweight_update_duration_seconds")
	if o.memprofile != "" {
		f, err := os.Create(o.memprofile)
		if err != nil {
			return err
		}
		runtime.GC()
		err = pprof.WriteHeapProfile(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	// Every report since the probes started, counted once they stopped and the last ones in
	// flight landed (or stopped landing).
	p.stop()
	sent := p.sent.Load()
	last, same := -1.0, 0
	_ = waitFor(10*time.Second, "in-flight reports", func() bool {
		a := counter(reg, "flowweight_push_reports_accepted_total")
		if a == last {
			same++
		} else {
			last, same = a, 0
		}
		return a >= float64(sent) || same > 2000
	})
	acc := counter(reg, "flowweight_push_reports_accepted_total")
	rejected := counter(reg, "flowweight_push_reports_rejected_total")
	n := upd.count - upd0.count
	mean := 0.0
	if n > 0 {
		mean = (upd.sum - upd0.sum) / float64(n)
	}
	fmt.Printf("- %d backends at 1 Hz for %s: %d updates (%.2f per second), mean update %.1f ms, longest bucket ≤ %s; CPU %.2f cores (controller and simulated probes in one process), peak RSS %.1f MiB; since the probes started: reports sent %d, accepted %.0f, rejected %.0f, lost %d\n",
		o.services*o.backends, wall.Round(time.Second), n, float64(n)/wall.Seconds(), mean*1000, upd.maxBucket(upd0),
		cpu.Seconds()/wall.Seconds(), float64(maxRSS)/(1<<20), sent, acc, rejected, int64(sent)-int64(acc))
	return nil
}

// flapRun reconnects one extra bridge every second for o.flap while the others serve: it
// times weight changes on the others during the flapping, and compares goroutines, heap and
// the switch series before, at each third, and after.
func flapRun(b *balancer.Balancer, reg *prometheus.Registry, ovs *lab.OVS, target string, o options) error {
	br, err := ovs.AddBridge("flap", target, "secure")
	if err != nil {
		return err
	}
	if err := waitFor(30*time.Second, "flapping bridge programmed", func() bool { return hasSwitch(b, br.DPID) }); err != nil {
		return err
	}
	nsample := 0
	sample := func() string {
		runtime.GC()
		if o.memprofile != "" {
			// One heap profile per sample: `go tool pprof -base FILE.0 FILE.3` shows what grew.
			if f, err := os.Create(fmt.Sprintf("%s.%d", o.memprofile, nsample)); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		nsample++
		return fmt.Sprintf("%d goroutines, heap %.1f MiB, %d switch series", runtime.NumGoroutine(), float64(heapInUse())/(1<<20),
			series(reg, "flowweight_switch_connected"))
	}
	samples := []string{sample()}
	errc := make(chan error, 1)
	flaps := 0
	go func() {
		end := time.Now().Add(o.flap)
		next := time.Now().Add(o.flap / 3)
		for time.Now().Before(end) {
			t := time.Now()
			if _, err := ovs.Vsctl("del-controller", br.Name); err != nil {
				errc <- err
				return
			}
			if err := waitFor(10*time.Second, "flapping bridge gone", func() bool { return !hasSyncer(b, br.DPID) }); err != nil {
				errc <- err
				return
			}
			if _, err := ovs.Vsctl("set-controller", br.Name, target); err != nil {
				errc <- err
				return
			}
			if err := waitFor(10*time.Second, "flapping bridge back", func() bool { return hasSwitch(b, br.DPID) }); err != nil {
				errc <- err
				return
			}
			flaps++
			if time.Now().After(next) {
				samples = append(samples, sample())
				next = next.Add(o.flap / 3)
			}
			if d := time.Second - time.Since(t); d > 0 {
				time.Sleep(d) // the flap's pace: once a second, as the hostile switch
			}
		}
		errc <- nil
	}()
	if o.changes > 0 && o.switches > 0 {
		fmt.Printf("- while one more bridge disconnects and reconnects every second:\n")
		if err := timeChanges(b, reg, o, false); err != nil {
			return err
		}
	}
	if err := <-errc; err != nil {
		return err
	}
	samples = append(samples, sample())
	fmt.Printf("- one bridge disconnected and reconnected %d times in %s beside %d others; before, at each third and after: %s\n",
		flaps, o.flap, o.switches, strings.Join(samples, " → "))
	return nil
}

const silentDPID = 0xdead0000beef

func hasSyncer(b *balancer.Balancer, dpid uint64) bool {
	for _, st := range b.View().SwitchStatuses() {
		if st.DPID == dpid {
			return true
		}
	}
	return false
}

func hasSwitch(b *balancer.Balancer, dpid uint64) bool {
	for _, st := range b.View().SwitchStatuses() {
		if st.DPID == dpid && st.Seq > 0 {
			return true
		}
	}
	return false
}

// probes sends one report per backend per second, each backend its own boot nonce and
// sequence, spread over the second as real probes' clocks are.
type probes struct {
	sent atomic.Uint64
	stop context.CancelFunc
}

func startProbes(ctx context.Context, addr string, key []byte, names []string) (*probes, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	if uc, ok := c.(*net.UDPConn); ok {
		_ = uc.SetWriteBuffer(4 << 20)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &probes{stop: cancel}
	seqs := make([]uint64, len(names))
	nonces := make([]uint64, len(names))
	for i := range nonces {
		nonces[i] = rand.Uint64() | 1
	}
	go func() {
		defer c.Close()
		var buf []byte
		const slices = 100 // the second in 10 ms slices, backends spread over them
		t := time.NewTicker(time.Second / slices)
		defer t.Stop()
		for tick := 0; ; tick++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for i := tick % slices; i < len(names); i += slices {
				seqs[i]++
				r := report.Report{BackendID: names[i], BootNonce: nonces[i], Seq: seqs[i], Time: time.Now(), Interval: time.Second,
					Flags: report.FlagHealthOK, CPUUtil: 0.3, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30, HealthStatus: 200}
				var err error
				buf, err = r.AppendSeal(buf[:0], key)
				if err != nil {
					continue
				}
				if _, err := c.Write(buf); err == nil {
					p.sent.Add(1)
				}
			}
		}
	}()
	return p, nil
}

// silentPeer completes an OpenFlow 1.3 handshake as datapath dpid, answers nothing after, and
// never reads again: the controller's writes to it back up.
func silentPeer(addr string, dpid uint64) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	msg := func(typ byte, xid uint32, body []byte) []byte {
		b := make([]byte, 8+len(body))
		b[0], b[1] = 4, typ
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		binary.BigEndian.PutUint32(b[4:], xid)
		copy(b[8:], body)
		return b
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(msg(0, 1, nil)); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	for {
		var h [8]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			c.Close()
			return nil, fmt.Errorf("silent peer handshake: %w", err)
		}
		body := make([]byte, int(binary.BigEndian.Uint16(h[2:]))-8)
		if _, err := io.ReadFull(br, body); err != nil {
			c.Close()
			return nil, err
		}
		if h[1] == 5 { // FEATURES_REQUEST
			f := make([]byte, 24)
			binary.BigEndian.PutUint64(f, dpid)
			if _, err := c.Write(msg(6, binary.BigEndian.Uint32(h[4:]), f)); err != nil {
				c.Close()
				return nil, err
			}
			_ = c.SetDeadline(time.Time{})
			return c, nil // and never read again
		}
	}
}

func waitFor(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Microsecond)
	}
	return nil
}

// heapInUse is the bytes of live objects when called right after runtime.GC (HeapAlloc):
// HeapInuse would count the spans' free slots too, which the runtime keeps and reuses.
func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// rssBytes reads VmRSS of pid from /proc (0 when unknown).
func rssBytes(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "unknown CPU"
}

func counter(reg *prometheus.Registry, name string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	return 0
}

func series(reg *prometheus.Registry, name string) int {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

type hist struct {
	count   uint64
	sum     float64
	buckets map[float64]uint64
}

func histogram(reg *prometheus.Registry, name string) hist {
	mfs, _ := reg.Gather()
	h := hist{buckets: map[float64]uint64{}}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			hh := m.GetHistogram()
			h.count += hh.GetSampleCount()
			h.sum += hh.GetSampleSum()
			for _, bk := range hh.GetBucket() {
				h.buckets[bk.GetUpperBound()] += bk.GetCumulativeCount()
			}
		}
	}
	return h
}

// maxBucket is the smallest bucket bound that holds every update since before.
func (h hist) maxBucket(before hist) string {
	n := h.count - before.count
	var bounds []float64
	for ub := range h.buckets {
		bounds = append(bounds, ub)
	}
	slices.Sort(bounds)
	for _, ub := range bounds {
		if h.buckets[ub]-before.buckets[ub] >= n {
			return (time.Duration(ub * float64(time.Second))).Round(10 * time.Microsecond).String()
		}
	}
	return "+Inf"
}
