// Command backendd is the tiny HTTP backend of the end-to-end lab: GET /
// answers "NAME\n" after a fixed amount of CPU work, so a backend's CPU
// quota bounds its throughput; GET /health reports health, which a test can
// force to fail (POST /health/fail, POST /health/ok, or -health-file).
//
// -also-ports serves the same HTTP handler on more TCP ports of -listen's address (one
// backend behind several ports of a VIP); -udp-port answers UDP datagrams there with
// "NAME PAYLOAD" (ServeUDP), a UDP service whose client can tell which backend answered.
//
// Keep-alive is off by default: every request then comes on a new
// connection, which is what exercises per-connection load balancing.
//
// With -burn-cores it serves nothing and is a noisy neighbour instead: a
// duty-cycled CPU burner that uses about that many cores (at most 1) for
// -burn-for, in periods of -burn-period (see Burner), e.g. started in a
// backend's cgroup beside its backendd:
//
//	backendd -burn-cores 0.25 -burn-period 100ms -burn-for 15m
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
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address:port to listen on")
	name := flag.String("name", "", "backend name returned by GET / (default: hostname)")
	work := flag.Int("work", 20000, "SHA-256 rounds of CPU work per GET / request")
	healthFile := flag.String("health-file", "", "if set and this file exists, /health returns 503")
	keepAlive := flag.Bool("keepalive", false, "allow HTTP keep-alive")
	alsoPorts := flag.String("also-ports", "", "comma-separated TCP ports of -listen's address that serve the same HTTP handler")
	udpPort := flag.Int("udp-port", 0, "if > 0: UDP port of -listen's address answering each datagram with \"NAME PAYLOAD\"")
	coldFactor := flag.Int("cold-factor", 1, "a cold start: requests cost this many times -work for the first -cold-for")
	coldFor := flag.Duration("cold-for", 0, "how long the cold start lasts from backendd's start")
	burnCores := flag.Float64("burn-cores", 0, "if > 0: serve nothing, burn about this much CPU (cores, at most 1) and exit after -burn-for")
	burnPeriod := flag.Duration("burn-period", 100*time.Millisecond, "burn mode: the duty cycle's period")
	burnFor := flag.Duration("burn-for", 0, "burn mode: how long to burn (required, at most 24h)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *burnCores != 0 {
		if err := burn(&Burner{Cores: *burnCores, Period: *burnPeriod, For: *burnFor}, log); err != nil {
			log.Error("backendd burn", "err", err)
			os.Exit(1)
		}
		return
	}
	if *name == "" {
		h, _ := os.Hostname()
		*name = h
	}
	ports, err := parsePorts(*alsoPorts, *udpPort)
	if err != nil {
		log.Error("backendd", "err", err)
		os.Exit(2)
	}
	if *coldFactor < 1 || *coldFactor > 1000 || *coldFor < 0 || *coldFor > 24*time.Hour {
		log.Error("backendd", "err", fmt.Sprintf("-cold-factor %d -cold-for %v: want a factor 1-1000 and 0-24h", *coldFactor, *coldFor))
		os.Exit(2)
	}
	srv := &Server{Name: *name, Work: *work, HealthFile: *healthFile, ColdFactor: *coldFactor, ColdUntil: time.Now().Add(*coldFor)}
	if err := run(*listen, ports, srv, *keepAlive, log); err != nil {
		log.Error("backendd", "err", err)
		os.Exit(1)
	}
}

// burn runs the burner until -burn-for has passed or SIGTERM/SIGINT, and logs what it used.
func burn(b *Burner, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log.Info("backendd burning", "cores", b.Cores, "period", b.Period, "for", b.For)
	st, err := b.Run(ctx)
	if err != nil {
		return err
	}
	log.Info("backendd burn done", "periods", st.Periods, "cpu", st.CPU.Round(time.Millisecond),
		"elapsed", st.Elapsed.Round(time.Millisecond), "cores", fmt.Sprintf("%.3f", st.Cores()))
	return nil
}

// extraPorts are the ports backendd serves besides -listen.
type extraPorts struct {
	tcp []int
	udp int
}

// parsePorts reads -also-ports and -udp-port; errors name the flag.
func parsePorts(also string, udp int) (extraPorts, error) {
	var p extraPorts
	if udp < 0 || udp > 65535 {
		return p, fmt.Errorf("-udp-port %d outside 0-65535", udp)
	}
	p.udp = udp
	for f := range strings.SplitSeq(also, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 65535 {
			return p, fmt.Errorf("-also-ports: %q is not a port 1-65535", f)
		}
		p.tcp = append(p.tcp, n)
	}
	return p, nil
}

func run(addr string, extra extraPorts, s *Server, keepAlive bool, log *slog.Logger) error {
	if s.Work < 0 {
		return fmt.Errorf("-work %d: must be >= 0", s.Work)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	srv.SetKeepAlivesEnabled(keepAlive)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	for _, port := range extra.tcp {
		a := net.JoinHostPort(host, strconv.Itoa(port))
		l, err := net.Listen("tcp", a)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listen %s: %w", a, err)
		}
		log.Info("backendd listening", "addr", a)
		go func() { _ = srv.Serve(l) }() // Shutdown closes it
	}
	if extra.udp != 0 {
		a := net.JoinHostPort(host, strconv.Itoa(extra.udp))
		pc, err := net.ListenPacket("udp", a)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listen udp %s: %w", a, err)
		}
		log.Info("backendd answering udp", "addr", a)
		go func() {
			if err := s.ServeUDP(ctx, pc); err != nil {
				log.Error("backendd udp", "err", err)
			}
		}()
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("backendd listening", "addr", ln.Addr().String(), "name", s.Name, "work", s.Work, "cold_factor", s.ColdFactor, "cold_until", s.ColdUntil)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
