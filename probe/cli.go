package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"flowweight/internal/health"
	"flowweight/internal/report"
	"flowweight/probe/agent"
	"flowweight/probe/agentcheck"
	"flowweight/probe/config"
)

const usage = `Usage:
  probe [-config FILE]                  run the probe (until SIGTERM or SIGINT)
  probe -check-config [-config FILE]    validate the config and key file, then exit
  probe drain [-config FILE]            create the drain file: report this backend as draining
  probe undrain [-config FILE]          remove the drain file

The probe samples CPU, memory, established connections on the service ports, optional NIC
throughput and an HTTP health check of the local service every interval, and sends one
HMAC-authenticated UDP datagram to the collector (to every one, with collectors = [...]).
After a failed check it checks and reports every health.fast_interval until
health.fast_rise checks in a row pass. With
[agent_check] listen set, it also answers HAProxy's agent check with up/down, ready/drain
and a weight percentage.

Signals to a running probe:
  SIGUSR1   drain now (reported at once)
  SIGUSR2   undrain now
  SIGTERM, SIGINT   send a last report flagged leaving, then exit 0

Flags:
`

// run is the whole command; main only passes os.Args and exits with its result
// (0 success, 1 failure, 2 usage error).
func run(args []string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 && (args[0] == "drain" || args[0] == "undrain") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", config.DefaultPath, "configuration `file`")
	check := fs.Bool("check-config", false, "validate the configuration and key file, then exit")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout) // asked-for help goes to stdout, so it can be paged
			fs.Usage()
			return 0
		}
	}
	if err := fs.Parse(args); err != nil {
		return 2 // the flag package has printed the problem and the usage
	}
	if fs.NArg() > 0 {
		if cmd == "" && (fs.Arg(0) == "drain" || fs.Arg(0) == "undrain") {
			// "probe -config F drain" as well as "probe drain -config F".
			cmd = fs.Arg(0)
		} else {
			fmt.Fprintf(stderr, "probe: unexpected argument %q\n", fs.Arg(0))
			fs.Usage()
			return 2
		}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "probe: %v\n", err)
		return 1
	}
	switch {
	case *check:
		if err := checkRuntime(cfg); err != nil {
			fmt.Fprintf(stderr, "probe: %s: %v\n", *cfgPath, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: OK\n", *cfgPath)
		return 0
	case cmd == "drain":
		return setDrain(cfg, true, stdout, stderr)
	case cmd == "undrain":
		return setDrain(cfg, false, stdout, stderr)
	}
	return runAgent(cfg, stderr)
}

// checkRuntime checks what the config file alone cannot: the key file and the cgroup.
func checkRuntime(cfg config.Config) error {
	var errs []error
	if _, err := report.LoadKey(cfg.KeyFile); err != nil {
		errs = append(errs, fmt.Errorf("key_file: %w", err))
	}
	if _, _, err := buildSources(cfg); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func setDrain(cfg config.Config, drain bool, stdout, stderr io.Writer) int {
	if drain {
		if err := os.MkdirAll(filepath.Dir(cfg.DrainFile), 0o755); err != nil {
			fmt.Fprintf(stderr, "probe: drain_file: %v\n", err)
			return 1
		}
		msg := fmt.Sprintf("drained by `probe drain` at %s\n", time.Now().UTC().Format(time.RFC3339))
		if err := os.WriteFile(cfg.DrainFile, []byte(msg), 0o644); err != nil {
			fmt.Fprintf(stderr, "probe: drain_file: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "created %s: the probe reports draining within one interval (%v); SIGUSR1 does it at once\n", cfg.DrainFile, cfg.Interval)
		return 0
	}
	if err := os.Remove(cfg.DrainFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "probe: drain_file: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "removed %s: the probe reports undrained within one interval (%v); SIGUSR2 does it at once\n", cfg.DrainFile, cfg.Interval)
	return 0
}

func runAgent(cfg config.Config, stderr io.Writer) int {
	level, _ := config.ParseLogLevel(cfg.LogLevel) // validated by Load
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("backend", cfg.BackendID)
	key, err := report.LoadKey(cfg.KeyFile)
	if err != nil {
		log.Error("cannot start", "err", fmt.Errorf("key_file: %w", err))
		return 1
	}
	sources, cg, err := buildSources(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	if cfg.Scope == config.ScopeCgroup {
		// Root is set when the cgroup was found through PID 1's mounts (ip netns exec).
		log.Info("cgroup", "version", cg.Version, "dir", cg.Dir, "cpu", cg.CPU, "cpuacct", cg.CPUAcct,
			"memory", cg.Memory, "via_root", cg.Root)
	}
	checker, err := buildHealth(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	collectors := cfg.CollectorAddrs()
	udp := agent.NewMultiSender(collectors) // starts resolving names now, before the first report
	defer udp.Close()
	var sender agent.Sender = udp
	if cfg.AgentCheck.Listen != "" {
		tap, stopAgentCheck, err := startAgentCheck(cfg.AgentCheck, key, udp, log)
		if err != nil {
			log.Error("cannot start", "err", err)
			return 1
		}
		defer stopAgentCheck() // after Run: the leaving report's answer is served until then
		sender = tap
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	drain := make(chan bool, 1)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	go func() {
		for {
			select {
			case s := <-sigs:
				select {
				case drain <- s == syscall.SIGUSR1:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()

	a := &agent.Agent{
		BackendID: cfg.BackendID,
		Key:       key,
		Interval:  cfg.Interval,
		Jitter:    cfg.Jitter,
		DrainFile: cfg.DrainFile,
		Sources:   sources,
		Sender:    sender,
		Clock:     agent.RealClock{},
		Rand:      randFloat,
		Log:       log,
		BootNonce: agent.NewBootNonce(),

		// Only a check that can fail needs the fast pace; without a URL it never starts.
		FastInterval: cfg.Health.FastInterval,
		FastRise:     cfg.Health.FastRise,
	}
	if inflight := inFlightCounter(cfg); inflight != nil {
		a.InFlightInterval, a.InFlight = cfg.InFlightInterval, inflight
		a.Recount = recountConns(cfg) // busy or hung: ESTABLISHED only
	}
	if checker != nil {
		a.Health = checker
	}
	log.Info("probe started", "collectors", collectors, "interval", cfg.Interval, "scope", cfg.Scope,
		"service_ports", cfg.ServicePorts, "in_flight_interval", a.InFlightInterval, "health_url", health.RedactURL(cfg.Health.URL),
		"fast_interval", cfg.Health.FastInterval,
		"agent_check", cfg.AgentCheck.Listen)
	if err := a.Run(ctx, drain); err != nil {
		log.Error("probe stopped", "err", err)
		return 1
	}
	log.Info("probe stopped", "sent", a.Stats.Sent.Load(), "send_errors", a.Stats.SendErrors.Load())
	for _, s := range udp.Senders {
		log.Info("collector", "collector", s.Addr, "sent", s.Sent.Load(), "send_errors", s.Errors.Load())
	}
	return 0
}

// startAgentCheck listens for HAProxy's agent check and returns the sender that feeds it every
// report, and a function that stops it and waits for the connections in flight.
func startAgentCheck(cfg config.AgentCheck, key []byte, next agent.Sender, log *slog.Logger) (agent.Sender, func(), error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("agent_check.listen: %w", err)
	}
	checkers, err := config.ParseCheckers(cfg.Checkers) // validated by Load
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("agent_check.checkers: %w", err)
	}
	srv := &agentcheck.Server{Log: log, Checkers: checkers}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error("agent check stopped", "listen", cfg.Listen, "err", err)
		}
	}()
	tap := &agentcheck.Tap{
		Next:    next,
		Key:     key,
		Server:  srv,
		Weigher: agentcheck.Weigher{CPU: cfg.CPU, Mem: cfg.Mem, Conn: cfg.Conn, MaxConns: cfg.MaxConns, Floor: cfg.FloorPercent},
	}
	return tap, func() { cancel(); <-done }, nil
}
