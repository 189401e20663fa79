// Command backendd is the tiny HTTP backend of the end-to-end lab: GET /
// answers "NAME\n" after a fixed amount of CPU work, so a backend's CPU
// quota bounds its throughput; GET /health reports health, which a test can
// force to fail (POST /health/fail, POST /health/ok, or -health-file).
//
// Keep-alive is off by default: every request then comes on a new
// connection, which is what exercises per-connection load balancing.
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
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address:port to listen on")
	name := flag.String("name", "", "backend name returned by GET / (default: hostname)")
	work := flag.Int("work", 20000, "SHA-256 rounds of CPU work per GET / request")
	healthFile := flag.String("health-file", "", "if set and this file exists, /health returns 503")
	keepAlive := flag.Bool("keepalive", false, "allow HTTP keep-alive")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *name == "" {
		h, _ := os.Hostname()
		*name = h
	}
	if err := run(*listen, &Server{Name: *name, Work: *work, HealthFile: *healthFile}, *keepAlive, log); err != nil {
		log.Error("backendd", "err", err)
		os.Exit(1)
	}
}

func run(addr string, s *Server, keepAlive bool, log *slog.Logger) error {
	if s.Work < 0 {
		return fmt.Errorf("-work %d: must be >= 0", s.Work)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	srv.SetKeepAlivesEnabled(keepAlive)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("backendd listening", "addr", ln.Addr().String(), "name", s.Name, "work", s.Work)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
