package push

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"flowweight/collector/report"
)

// Sink receives accepted reports. The backend pool implements it.
//
// Accept is called synchronously from the server's single read loop, so it
// must return quickly (no I/O, no waiting on other goroutines) or datagrams
// queue up in the socket buffer and are eventually dropped. The server
// reuses r for the next datagram: Accept must not retain r or any pointer
// into it after it returns; copying what it needs is the sink's job (all
// fields are values or immutable strings, so `v := *r` is a full copy).
type Sink interface {
	Accept(r *report.Report, from netip.AddrPort)
}

// Config configures a Server.
type Config struct {
	// Listen is the UDP address to bind, e.g. ":9750" or "127.0.0.1:0".
	// Required.
	Listen string
	// KeyFor returns the shared key of a configured backend. It is called
	// for every datagram with the claimed (unauthenticated) id, from the
	// read loop, so it must be fast and safe for concurrent use with
	// whatever updates it on a config reload. Required.
	KeyFor func(id string) ([]byte, bool)
	// ClockSkew is how far a report's time may be from Now, either way.
	// Default (when <= 0): report.DefaultClockSkew (30 s).
	ClockSkew time.Duration
	// Now is the collector's clock. Default: time.Now.
	Now func() time.Time
	// Logger receives rate-limited rejection lines. Default: discard.
	Logger *slog.Logger
}

// LogEvery is the least time between two log lines for the same rejection
// reason; the lines in between are counted and reported as "suppressed" on
// the next one. A flood of garbage must not flood the log.
const LogEvery = 10 * time.Second

// Server is the push protocol's UDP server. Create it with New, run it with
// Serve. The counters may be read from any goroutine.
type Server struct {
	cfg   Config
	sink  Sink
	conn  *net.UDPConn
	guard *report.Guard

	// Read-loop state: used only by the goroutine in Serve (or a benchmark
	// calling handle directly).
	opener report.Opener
	rep    report.Report

	serving   atomic.Bool
	closeOnce sync.Once
	closeErr  error

	accepted   atomic.Uint64
	rejected   [len(report.Reasons)]atomic.Uint64
	readErrors atomic.Uint64

	logMu      sync.Mutex
	lastLog    [len(report.Reasons) + 1]time.Time // +1: socket read errors
	suppressed [len(report.Reasons) + 1]uint64
}

// New validates cfg and binds the socket, so Addr is known before Serve.
func New(cfg Config, sink Sink) (*Server, error) {
	var errs []error
	if cfg.Listen == "" {
		errs = append(errs, errors.New("push: Listen is empty, want a UDP address such as \":9750\""))
	}
	if cfg.KeyFor == nil {
		errs = append(errs, errors.New("push: KeyFor is nil"))
	}
	if sink == nil {
		errs = append(errs, errors.New("push: sink is nil"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	addr, err := net.ResolveUDPAddr("udp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("push: listen address %q: %w", cfg.Listen, err)
	}
	conn, err := net.ListenUDP("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("push: listen on %q: %w", cfg.Listen, err)
	}
	// Thousands of probes whose intervals line up arrive as bursts; the default socket buffer
	// (~200 KiB, a few hundred datagrams) drops them. The kernel caps this at net.core.rmem_max.
	_ = conn.SetReadBuffer(ReadBuffer)
	g := report.NewGuard(cfg.ClockSkew)
	cfg.ClockSkew = g.Window()
	return &Server{cfg: cfg, sink: sink, conn: conn, guard: g}, nil
}

// ReadBuffer is the socket receive buffer the server asks for.
const ReadBuffer = 4 << 20

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.conn.LocalAddr() }

// Serve reads datagrams until ctx is done, then closes the socket and
// returns nil. It returns an error only if the socket fails for another
// reason, or if Serve was already called. Rejected datagrams are counted and
// logged (rate-limited) and never stop the loop.
func (s *Server) Serve(ctx context.Context) error {
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("push: Serve called twice")
	}
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	defer s.Close()
	// One byte more than the protocol allows, so an oversized datagram is
	// seen as such instead of silently truncated to a valid-looking size.
	buf := make([]byte, report.MaxDatagram+1)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("push: socket %s closed: %w", s.Addr(), err)
			}
			// Transient (e.g. ENOMEM): count, log, keep serving.
			s.readErrors.Add(1)
			s.logLimited(len(report.Reasons), "push socket read failed", "addr", s.Addr().String(), "err", err)
			continue
		}
		s.handle(buf[:n], netip.AddrPortFrom(from.Addr().Unmap(), from.Port()))
	}
}

// Close closes the socket; Serve then returns. Safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.conn.Close() })
	return s.closeErr
}

// handle is the whole per-datagram path: verify, decode, replay check,
// sink. It is separate from the read loop so the benchmark measures it
// without a socket.
func (s *Server) handle(b []byte, from netip.AddrPort) {
	err := s.opener.Open(b, s.cfg.KeyFor, &s.rep)
	if err == nil {
		err = s.guard.Check(&s.rep, s.cfg.Now())
	}
	if err != nil {
		s.reject(err, from)
		return
	}
	s.sink.Accept(&s.rep, from)
	s.accepted.Add(1)
}

func reasonIndex(r report.Reason) int {
	for i, x := range report.Reasons {
		if x == r {
			return i
		}
	}
	return -1
}

func (s *Server) reject(err error, from netip.AddrPort) {
	var e *report.Error
	reason, id := report.ReasonMalformed, ""
	if errors.As(err, &e) {
		reason, id = e.Reason, e.BackendID
	}
	i := reasonIndex(reason)
	if i < 0 { // cannot happen with the reasons report defines
		i = reasonIndex(report.ReasonMalformed)
	}
	s.rejected[i].Add(1)
	s.logLimited(i, "push report rejected", "reason", string(reason), "backend", id, "from", from.String(), "err", err)
}

// logLimited logs at most one line per slot per LogEvery, carrying the
// number of lines suppressed since the previous one.
func (s *Server) logLimited(slot int, msg string, args ...any) {
	now := s.cfg.Now()
	s.logMu.Lock()
	if last := s.lastLog[slot]; !last.IsZero() && now.Sub(last) < LogEvery && now.Sub(last) > -LogEvery {
		s.suppressed[slot]++
		s.logMu.Unlock()
		return
	}
	n := s.suppressed[slot]
	s.lastLog[slot], s.suppressed[slot] = now, 0
	s.logMu.Unlock()
	s.cfg.Logger.Warn(msg, append(args, "suppressed", n)...)
}

// Forget drops the replay state of a backend removed from the
// configuration (see report.Guard.Forget). Safe to call while serving.
func (s *Server) Forget(backendID string) { s.guard.Forget(backendID) }

// Accepted is the number of reports handed to the sink.
func (s *Server) Accepted() uint64 { return s.accepted.Load() }

// Rejected returns the number of rejected datagrams per reason, with every
// reason present (zero or not) so exported metrics have all their labels.
func (s *Server) Rejected() map[report.Reason]uint64 {
	m := make(map[report.Reason]uint64, len(report.Reasons))
	for i, r := range report.Reasons {
		m[r] = s.rejected[i].Load()
	}
	return m
}

// ReadErrors is the number of failed socket reads other than shutdown.
func (s *Server) ReadErrors() uint64 { return s.readErrors.Load() }
