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
	"strings"
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

Flags:
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == "status" {
		os.Exit(statusCommand(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "key" {
		os.Exit(keyCommand(os.Args[2:], os.Stdout, os.Stderr))
	}
	fs := flag.NewFlagSet("controller", flag.ExitOnError)
	cfgPath := fs.String("config", "/etc/flowweight/controller.toml", "configuration file")
	check := fs.Bool("check-config", false, "validate the configuration and exit")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	jsonLogs := fs.Bool("log-json", false, "log JSON lines instead of text")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\nSignals: SIGHUP re-reads the configuration (as does a change of the file); SIGTERM stops.\n")
	}
	_ = fs.Parse(os.Args[1:])

	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *check {
		for _, w := range cfg.Warnings() {
			fmt.Printf("%s: warning: %s\n", *cfgPath, w)
		}
		if err := checkKeys(cfg); err != nil {
			fmt.Fprintf(os.Stderr, "%s: push keys:\n%v\n", *cfgPath, err)
			os.Exit(2)
		}
		fmt.Printf("%s: OK (%d services)\n", *cfgPath, len(cfg.Services))
		return
	}
	log := newLogger(*level, *jsonLogs)
	for _, w := range cfg.Warnings() {
		log.Warn("configuration weakens push authentication", "config", *cfgPath, "warning", w)
	}
	if err := run(cfg, *cfgPath, log); err != nil {
		log.Error("controller stopped", "err", err)
		os.Exit(1)
	}
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

func run(cfg *config.Config, path string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := balancer.NewMetrics()
	if err := m.Register(reg); err != nil {
		return err
	}
	b, err := balancer.New(cfg, balancer.Options{Logger: log, Metrics: m})
	if err != nil {
		return err
	}
	var apiSrv *api.Server
	if cfg.API.Listen != "" {
		apiSrv, err = api.NewServer(b, reg, api.OptionsFrom(cfg.API, log, reg))
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
	go watchConfig(ctx, b, apiSrv, path, log)
	return b.Run(ctx, nil)
}

// watchConfig reloads the configuration on SIGHUP and when the file's modification time or
// size changes (checked every 2 s: no inotify dependency, and it works on every file system).
// An invalid file changes nothing and is logged with the key at fault.
func watchConfig(ctx context.Context, b *balancer.Balancer, apiSrv *api.Server, path string, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	stamp := func() string {
		fi, err := os.Stat(path)
		if err != nil {
			return ""
		}
		return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
	}
	last := stamp()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		why := ""
		select {
		case <-ctx.Done():
			return
		case <-hup:
			why = "SIGHUP"
		case <-t.C:
			s := stamp()
			if s == last || s == "" {
				continue
			}
			why = "file changed"
		}
		last = stamp()
		cfg, err := config.Load(path)
		if err == nil {
			err = apiSrv.CheckReload(cfg) // the API's part first: a bad token refuses the whole reload
		}
		if err == nil {
			err = b.Reload(cfg)
		}
		if err == nil {
			err = apiSrv.Reload(cfg) // new token, allowed hosts and body limit
		}
		if err != nil {
			log.Error("configuration not reloaded; the running configuration is kept", "trigger", why, "err", err)
			b.RecordEvent("config", "reload rejected: "+firstLine(err.Error()))
			continue
		}
		log.Info("configuration reloaded", "trigger", why, "services", len(cfg.Services))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		rest := strings.TrimSpace(s[i+1:])
		if j := strings.IndexByte(rest, '\n'); j >= 0 {
			rest = rest[:j]
		}
		return s[:i] + " " + rest
	}
	return s
}
