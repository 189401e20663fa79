// Command controller is flowweight's controller: it collects backend load (probe push
// reports or SNMP), computes weights, and writes them to Open vSwitch select groups over
// OpenFlow 1.3, each rewrite confirmed by a Barrier reply.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"flowweight/controller/api"
	"flowweight/controller/balancer"
	"flowweight/controller/config"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const usage = `usage: controller [flags]            run the controller
       controller -check-config [-config FILE]
       controller status [-api URL]     show services and backends as a table
       controller key [-config FILE] [-out KEYFILE] BACKEND
                                        print (or write) a probe's push key file
       controller reload -allow-removal [-config FILE]   confirm a reload refused for removing too much
       controller history [-state FILE] [-show N]        list the applied configurations (or print version N)
       controller rollback [-allow-removal] [N]          apply version N again (default: the previous one)
       controller drain [-api URL] [-token-file FILE] [-wait [-timeout D]] BACKEND
                                        drain a backend; with -wait, until it is safe to stop
       controller undrain [-api URL] [-token-file FILE] BACKEND

Flags:
`

// subcommands are the controller's commands besides running it, by their first argument; each
// gets the arguments after its name and returns the exit status.
var subcommands = map[string]func(args []string) int{
	"status":   statusCommand,
	"key":      func(args []string) int { return keyCommand(args, os.Stdout, os.Stderr) },
	"reload":   reloadCommand,
	"history":  func(args []string) int { return historyCommand(args, os.Stdout, os.Stderr) },
	"rollback": func(args []string) int { return rollbackCommand(args, os.Stdout, os.Stderr) },
	"drain":    func(args []string) int { return drainMain(args, true) },
	"undrain":  func(args []string) int { return drainMain(args, false) },
}

// drainMain runs drain or undrain until done or interrupted (SIGINT, SIGTERM).
func drainMain(args []string, drain bool) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return drainCommand(ctx, args, drain, os.Stdout, os.Stderr)
}

func main() {
	if len(os.Args) > 1 {
		if cmd, ok := subcommands[os.Args[1]]; ok {
			os.Exit(cmd(os.Args[2:]))
		}
	}
	fs := flag.NewFlagSet("controller", flag.ExitOnError)
	cfgPath := fs.String("config", "/etc/flowweight/controller.toml", "configuration file")
	check := fs.Bool("check-config", false, "validate the configuration and exit")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	jsonLogs := fs.Bool("log-json", false, "log JSON lines instead of text")
	statePath := fs.String("state", defaultState, "state file: operator drains, learned capacity, replay marks (\"\": keep none across restarts)")
	poll := fs.Duration("config-poll", 0, "poll the configuration's content this often instead of inotify (file systems inotify does not see, e.g. NFS); 0: inotify")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\nSignals: SIGHUP re-reads the configuration (as does a change of the file); SIGTERM stops.\n")
	}
	_ = fs.Parse(os.Args[1:])

	data, err := config.ReadFile(*cfgPath) // read once: what is parsed is what the watcher compares with
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// LoadData, not Parse: the files the configuration names (api.token_file, health
	// checks' tls_ca) are read and checked now, as a reload reads them.
	cfg, err := config.LoadData(*cfgPath, data)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	secretWarnings := configSecretWarnings(cfg, *cfgPath)
	if *check {
		for _, w := range append(append(append(cfg.Warnings(), cfg.HealthWarnings()...), secretWarnings...), cfg.HAWarnings()...) {
			fmt.Printf("%s: warning: %s\n", *cfgPath, w)
		}
		if err := checkKeys(cfg); err != nil {
			fmt.Fprintf(os.Stderr, "%s: push keys:\n%v\n", *cfgPath, err)
			os.Exit(2)
		}
		fmt.Printf("%s: OK (%d services)\n", *cfgPath, len(cfg.Services))
		if len(cfg.Services) == 0 {
			fmt.Fprintf(os.Stderr, "%s: warning: no service: the controller would balance nothing\n", *cfgPath)
		}
		return
	}
	log := newLogger(*level, *jsonLogs)
	for _, w := range cfg.Warnings() {
		log.Warn("configuration weakens push authentication", "config", *cfgPath, "warning", w)
	}
	for _, w := range secretWarnings {
		log.Warn("configuration exposes a secret", "config", *cfgPath, "warning", w)
	}
	for _, w := range cfg.HAWarnings() {
		log.Warn("configuration leaves HA open to fake switches", "config", *cfgPath, "warning", w)
	}
	if len(cfg.Services) == 0 {
		log.Warn("the configuration has no service: no VIP is balanced, and VIP flows a previous run installed (they carry the controller's cookie) are removed from every switch that connects", "file", *cfgPath)
	}
	if err := run(cfg, *cfgPath, runFiles{data: data, state: *statePath, poll: *poll}, log); err != nil {
		log.Error("controller stopped", "err", err)
		os.Exit(1)
	}
}

// configSecretWarnings are cfg.SecretWarnings for the file at path as it is now.
func configSecretWarnings(cfg *config.Config, path string) []string {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // just read; a file gone since is the next reload's business
	}
	return cfg.SecretWarnings(fi.Mode().Perm())
}

func newLogger(level string, json bool) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: l}
	if json {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// registerMetrics puts on reg what /metrics serves besides the API's own counters: the Go
// runtime's, the process's and the balancer's collectors. The dashboard's test
// (configs/grafana-dashboard.json) checks its queries against the same set.
func registerMetrics(reg prometheus.Registerer, m *balancer.Metrics) error {
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return m.Register(reg)
}

// runFiles are run's inputs beyond the parsed configuration.
type runFiles struct {
	data  []byte // the configuration file as parsed
	state string // state file path
	poll  time.Duration
}

func run(cfg *config.Config, path string, files runFiles, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	reg := prometheus.NewRegistry()
	m := balancer.NewMetrics()
	if err := registerMetrics(reg, m); err != nil {
		return err
	}
	opt := balancer.Options{Logger: log, Metrics: m, StatePath: files.state}
	if cfg.HA != nil {
		e, err := newElector(ctx, cfg, log)
		if err != nil {
			return err
		}
		defer e.Close()
		opt.Elector = e
		log.Info("high availability on etcd", "endpoints", cfg.HA.Etcd, "name", cfg.HA.Name, "prefix", cfg.HA.Prefix,
			"lease", cfg.HA.Lease, "fingerprint", cfg.Fingerprint())
	}
	b, err := balancer.New(cfg, opt)
	if err != nil {
		return err
	}
	var apiSrv *api.Server
	if cfg.API.Listen != "" {
		apiSrv, err = api.NewServer(b.View(), reg, api.OptionsFrom(cfg.API, log, reg))
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", cfg.API.Listen)
		if err != nil {
			return fmt.Errorf("api.listen: %w", err)
		}
		go func() {
			if err := apiSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("api server", "err", err)
			}
		}()
		defer apiSrv.Close()
		log.Info("api listening", "addr", ln.Addr().String())
	}
	var also balancer.Reloadable
	if apiSrv != nil {
		also = apiSrv
	}
	hist := newConfigHistory(files.state, log)
	abs := path
	if a, err := filepath.Abs(path); err == nil {
		abs = a
	}
	hist.applied(abs, files.data, "start", cfg.Controller.ConfigHistory)
	go watchConfig(ctx, b, also, path, files.state, files.data, files.poll, hist, log)
	return b.Run(ctx, nil)
}
