// Command bench measures flowweight on the real Open vSwitch lab (e2e/scenario): the share
// of new connections each backend actually receives for pinned weights, the established
// connections broken per reweight in conntrack and stateless mode, and the latency of
// bounded load through the VIP under equal, oracle, dynamic (1/AL) and headroom weights,
// including a hidden-capacity run (equal quotas, neighbours using about half of two
// backends' CPU) where headroom is also compared with the best static split of a search
// through the switch. peers, step, overload and hidden-peers compare flowweight with what a
// user would deploy instead, HAProxy's leastconn (with and without weights) and the fixed
// split, on the same backends under an open-loop Poisson load (docs/e2e.md, "Against the
// peers").
//
// It needs root and the lab's daemons (see docs/e2e.md, "Balancing benchmarks"); it prints
// markdown tables.
//
//	go run ./cmd/bench -run share,disruption,quality,hidden
//	flock /tmp/flowweight-daemons.lock go run ./cmd/bench -run peers -repeat 3 -levels 0.4,0.8
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"flowweight/e2e/scenario"
	"flowweight/weights"
)

func main() {
	run := flag.String("run", "share,disruption,quality,hidden", "comma-separated experiments: share, disruption, quality, hidden, portreuse, peers, step, overload, hidden-peers, dispatch, udp, warmup")
	conns := flag.Int("conns", 2000, "new connections per share measurement (bounded)")
	long := flag.Int("long", 100, "long-lived connections in the disruption run")
	reweights := flag.Int("reweights", 10, "reweights in the disruption run")
	measure := flag.Duration("measure", 20*time.Second, "length of each measured load run in quality/hidden")
	hiddenBudget := flag.Duration("hidden-budget", 12*time.Minute, "time bound of the hidden run; its static search skips the splits that would overrun it")
	noServiceCPU := flag.Bool("no-service-cpu", false, "start the probes without [service] (no service_cpu): headroom then falls back to 1/AL")
	margins := flag.String("plan-margins", "", "comma-separated weighting.plan_margin values: quality and hidden add a headroom run for each (the default margin's run is always there)")
	pressures := flag.String("pressures", "", "comma-separated weighting.pressure values: quality and hidden add a headroom run for each (the default's run is always there)")
	levels := flag.String("levels", "", "comma-separated offered loads as fractions of the measured capacity, for quality and hidden (default 0.4,0.8 and 0.5,0.8)")
	repeat := flag.Int("repeat", 0, "measure each level's runs this many times, each time in an order rotated by one, and compare medians (default 1 for quality and hidden, 3 for peers, step and overload)")
	policies := flag.String("policies", "", "quality and hidden: comma-separated label prefixes of the runs to measure (for example \"oracle,headroom\"); default all")
	peerQuotas := flag.String("peer-quotas", "0.125,0.25,0.5", "peers, step, overload: the backends' CPU quotas (cores), declared right")
	work := flag.Int("work", 0, "peers, step, overload: backendd -work rounds per request; 0: tuned so a request costs -request-cpu")
	requestCPU := flag.Duration("request-cpu", 2*time.Millisecond, "peers, step, overload: the backend CPU one request should cost, when -work is 0")
	flag.StringVar(&traceDir, "trace", "", "peers, step, overload: write each flowweight run's per-backend weights and signals, every 250 ms, to a file in this directory")
	flag.IntVar(&sourceAddrs, "sources", 0, "peers, step, overload: send the connections from this many more client addresses in turn (0: the client's own; at most 50)")
	idle := flag.Duration("idle", 20*time.Second, "step: the idle time before the step")
	flag.DurationVar(&fastLoopPeriod, "fast-loop", fastLoopPeriod, "peers, step, overload, hidden-peers, dispatch: the probes' in_flight_interval, and the controller's in_flight_period in the fast-loop runs")
	flag.Parse()
	if fastLoopPeriod < weights.MinInFlightPeriod || fastLoopPeriod > weights.MaxInFlightPeriod || fastLoopPeriod%time.Millisecond != 0 {
		fmt.Fprintf(os.Stderr, "bench: -fast-loop %v: want whole milliseconds from %v to %v (the controller's in_flight_period)\n",
			fastLoopPeriod, weights.MinInFlightPeriod, weights.MaxInFlightPeriod)
		os.Exit(2)
	}
	if *repeat < 0 || *repeat > 20 {
		fmt.Fprintf(os.Stderr, "bench: -repeat %d: want 1 to 20\n", *repeat)
		os.Exit(2)
	}

	var err error
	binDir, err = os.MkdirTemp("", "fwbench-bin-")
	if err != nil {
		fatal("temp dir", err)
	}
	defer os.RemoveAll(binDir)
	// SIGINT or SIGTERM: stop the running scenarios (and what they started) before exiting,
	// rather than leave them holding the host's switch.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		slog.Error("interrupted: stopping what the bench started", "signal", sig.String())
		teardowns.runAll()
		os.RemoveAll(binDir)
		os.Exit(130)
	}()
	bins, err := scenario.Build(binDir)
	if err != nil {
		fatal("build", err)
	}
	b := &bench{bins: bins, conns: *conns, long: *long, reweights: *reweights, measure: *measure,
		hiddenBudget: *hiddenBudget, noServiceCPU: *noServiceCPU, repeat: *repeat,
		work: *work, requestCPU: *requestCPU, idle: *idle}
	if b.peerQuotas, err = parseQuotas(*peerQuotas); err != nil {
		fmt.Fprintf(os.Stderr, "bench: -peer-quotas: %v\n", err)
		os.Exit(2)
	}
	if sourceAddrs < 0 || sourceAddrs > 50 {
		fmt.Fprintf(os.Stderr, "bench: -sources %d: want 0 to 50\n", sourceAddrs)
		os.Exit(2)
	}
	if *work < 0 || *requestCPU <= 0 || *idle < 0 {
		fmt.Fprintf(os.Stderr, "bench: -work %d, -request-cpu %v, -idle %v: want -work >= 0, -request-cpu > 0, -idle >= 0\n", *work, *requestCPU, *idle)
		os.Exit(2)
	}
	for _, p := range strings.Split(*policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			b.policies = append(b.policies, p)
		}
	}
	b.margins = fractions("-plan-margins", *margins, func(v float64) bool { return v >= 0 && v < 1 }, "[0,1)")
	b.pressures = fractions("-pressures", *pressures, func(v float64) bool { return v >= 0 && v <= 1 }, "[0,1]")
	for _, l := range strings.Split(*levels, ",") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		v, err := strconv.ParseFloat(l, 64)
		if err != nil || !(v > 0 && v <= 1) {
			fmt.Fprintf(os.Stderr, "bench: -levels: %q is not a load in (0,1]\n", l)
			os.Exit(2)
		}
		b.levels = append(b.levels, v)
	}
	fmt.Printf("# flowweight lab benchmarks, %s, %s\n\n", time.Now().UTC().Format(time.RFC3339), hostLine())
	for _, name := range strings.Split(*run, ",") {
		var err error
		t0 := time.Now()
		switch strings.TrimSpace(name) {
		case "share":
			err = b.share()
		case "disruption":
			err = b.disruption()
		case "quality":
			err = b.quality()
		case "hidden":
			err = b.hidden()
		case "portreuse":
			err = b.portReuse()
		case "peers":
			err = b.peers()
		case "step":
			err = b.step()
		case "overload":
			err = b.overload()
		case "hidden-peers":
			err = b.hiddenPeers()
		case "dispatch":
			err = b.dispatchCost()
		case "udp":
			err = b.udpCost()
		case "warmup":
			err = b.warmupJoin()
		case "":
			continue
		default:
			err = fmt.Errorf("unknown experiment %q", name)
		}
		if err != nil {
			fatal(name, err)
		}
		slog.Info("experiment done", "name", name, "took", time.Since(t0).Round(time.Second))
	}
}

// binDir holds the built binaries; fatal removes it too, since os.Exit skips defers.
var binDir string

func fatal(what string, err error) {
	if teardowns.interrupted() {
		// The signal handler is tearing down, which is likely what made this step fail: it
		// exits when done, and exiting here would cut it short.
		select {}
	}
	slog.Error("bench failed", "step", what, "err", err)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(1)
}

func hostLine() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	n := strings.Count(string(data), "\nprocessor") + 1
	if len(data) == 0 {
		n = 0
	}
	return fmt.Sprintf("%d CPUs", n)
}

type bench struct {
	bins                   scenario.Binaries
	conns, long, reweights int
	measure                time.Duration
	hiddenBudget           time.Duration
	noServiceCPU           bool
	margins                []string  // extra headroom runs, one per plan_margin
	pressures              []string  // extra headroom runs, one per weighting.pressure
	levels                 []float64 // offered loads for quality and hidden; nil: each one's own
	repeat                 int       // repetitions of each level
	policies               []string  // label prefixes of the runs to measure; nil: all
	peerQuotas             []float64 // peers, step, overload: the backends' quotas
	work                   int       // backendd -work for the peer runs; 0: calibrate
	requestCPU             time.Duration
	idle                   time.Duration // step: idle before the step
}

// repeatOr is -repeat, or def when it was not given.
func (b *bench) repeatOr(def int) int {
	if b.repeat > 0 {
		return b.repeat
	}
	return def
}

// parseQuotas reads -peer-quotas: at least two CPU quotas in cores, each in (0, 64].
func parseQuotas(list string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0 && v <= 64) {
			return nil, fmt.Errorf("%q is not a quota in (0,64] cores", f)
		}
		out = append(out, v)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%q: want at least two quotas", list)
	}
	return out, nil
}

// levelsOr is the offered loads from -levels, or def.
func (b *bench) levelsOr(def ...float64) []float64 {
	if len(b.levels) > 0 {
		return b.levels
	}
	return def
}

// start brings up one scenario in a fresh short directory; the caller closes it with stop.
func (b *bench) start(o scenario.Options) (*scenario.Scenario, func(), error) {
	defer teardowns.begin()() // an interrupt waits for this start to register its teardown
	dir, err := os.MkdirTemp("", "fwb-")
	if err != nil {
		return nil, nil, err
	}
	o.Dir = dir
	o.Bins = b.bins
	logf, err := os.Create(filepath.Join(os.TempDir(), filepath.Base(dir)+".log"))
	if err != nil {
		return nil, nil, err
	}
	o.Log = logf
	t0 := time.Now()
	s, err := scenario.Start(o)
	if err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("scenario start (log %s): %w", logf.Name(), err)
	}
	slog.Info("scenario up", "took", time.Since(t0).Round(time.Millisecond), "mode", o.Mode, "quotas", o.Quotas, "log", logf.Name())
	return s, teardowns.add(func() {
		if err := s.Close(); err != nil {
			slog.Error("scenario close", "err", err)
		}
		logf.Close()
		os.Remove(logf.Name())
		os.RemoveAll(dir)
	}), nil
}

// fractions splits a comma-separated flag value into its numbers, kept as written (they go
// into the controller's TOML as they are), and exits naming the flag on one outside want.
func fractions(flagName, list string, ok func(float64) bool, want string) []string {
	var out []string
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		v, err := strconv.ParseFloat(m, 64)
		if err != nil || !ok(v) {
			fmt.Fprintf(os.Stderr, "bench: %s: %q is not a number in %s\n", flagName, m, want)
			os.Exit(2)
		}
		out = append(out, m)
	}
	return out
}
