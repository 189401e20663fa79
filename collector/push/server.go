package push

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"flowweight/internal/report"
)

// Sink receives accepted reports. The backend pool implements it.
//
// Accept is called synchronously from the server's readers (Config.Readers),
// several at once for different backends, so it must be safe for concurrent
// use and return quickly (no I/O, no waiting on other goroutines) or
// datagrams queue up in the socket buffer and are eventually dropped. One
// backend's reports are never handed over concurrently, and arrive in the
// order the replay guard accepted them: a sink that orders reports by
// (BootNonce, Seq), as collector.Pool does, relies on that. The server
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
	// for every datagram with the claimed (unauthenticated) id, from all
	// the readers at once, so it must be fast and safe for concurrent use
	// (with itself and with whatever updates it on a config reload), and
	// must not keep the id string past its return (see report.Open).
	// Required.
	KeyFor func(id string) ([]byte, bool)
	// ClockSkew is how far a report's time may be from Now, either way.
	// Default (when <= 0): report.DefaultClockSkew (30 s).
	ClockSkew time.Duration
	// Now is the collector's clock. Default: time.Now.
	Now func() time.Time
	// Logger receives rate-limited rejection lines. Default: discard.
	Logger *slog.Logger
	// SourceFailRate and SourceFailBurst bound the datagrams a source
	// address (IPv4, or IPv6 /64) may have refused (any reason) before the
	// rest are shed unread: a token bucket per source, SourceFailBurst
	// deep, refilled at SourceFailRate a second. Defaults:
	// DefaultSourceFailRate, DefaultSourceFailBurst. A backend's datagrams
	// from one of its own addresses (SetBackendAddrs, or its last accepted
	// report's) are never shed by it, so a probe keeps flowing when a
	// flooder forges its address or shares its /64; see trust.go.
	SourceFailRate  float64
	SourceFailBurst int
	// BackendFailRate and BackendFailBurst bound the failed verifications a
	// backend's own address may cost for that backend (a token bucket per
	// exact address): past them only datagrams carrying the backend's live
	// boot are verified. Defaults: DefaultBackendFailRate,
	// DefaultBackendFailBurst.
	BackendFailRate  float64
	BackendFailBurst int
	// Readers is how many goroutines read and verify datagrams at once.
	// One reader is bound by one core (a system call per batch of
	// datagrams and an HMAC per datagram), so more readers than cores gain
	// nothing; fewer leave cores idle when probes report faster than one
	// core verifies. On Linux each reader has a socket of its own, bound
	// to Listen with SO_REUSEPORT: the kernel spreads sources over them by
	// address and port, so one probe's datagrams go to one reader, in
	// order, and a flood from one source fills one reader's buffer, not
	// all of them. Elsewhere the readers share one socket. Default (<= 0):
	// runtime.GOMAXPROCS(0), at most MaxReaders.
	Readers int
}

// ReasonShed counts, in Rejected, datagrams dropped unread because their
// source address had used up its failure budget (Config.SourceFailRate).
const ReasonShed report.Reason = "shed"

// LogEvery is the least time between two log lines for the same rejection
// reason; the lines in between are counted and reported as "suppressed" on
// the next one. A flood of garbage must not flood the log.
const LogEvery = 10 * time.Second

// Server is the push protocol's UDP server. Create it with New, run it with
// Serve. The counters may be read from any goroutine.
type Server struct {
	cfg   Config
	sink  Sink
	conns []*net.UDPConn // one per reader on Linux, else one shared
	guard *report.Guard

	// readers hold what each read loop owns (socket buffers, the opener
	// and its report); readers[0] also serves handle, for tests and the
	// benchmarks that call it without a socket.
	readers   []*reader
	readBatch int // datagrams per read where the system reads batches

	serving   atomic.Bool
	closeOnce sync.Once
	closeErr  error

	limit        *sourceLimit // locks itself
	backendLimit *sourceLimit // failures of backends' own addresses, by exact address; trust.go
	trust        atomic.Pointer[trustSet]
	drops        dropList // under dropMu; see droplist.go
	// dropMu guards drops; dropNext mirrors drops.next so the readers check
	// for expired entries without the lock.
	dropMu   sync.Mutex
	dropNext atomic.Int64

	kernelListed atomic.Int64

	// order serialises one backend's replay check and sink call: two
	// readers holding reports of one backend (its probe changed source
	// port, or someone replays them from elsewhere) must hand them to the
	// sink in the order the guard accepted them, or a report the guard
	// took as older could overwrite a newer one in the sink. Striped by a
	// hash of the backend id, so different backends rarely wait.
	orderSeed maphash.Seed
	order     [orderStripes]paddedMutex

	// good maps a backend id to its last accepted report's address and
	// boot (trust.go): only authenticated or configured ids enter, so it
	// holds at most the configured backends. goodAddrs and goodNets count
	// the addresses, and IPv6 /64s, it holds. Written by the readers and
	// RestoreReplayMarks, deleted from by Forget.
	goodMu    sync.RWMutex
	good      map[string]*goodEntry
	goodAddrs map[netip.Addr]int
	goodNets  map[[8]byte]int

	rejected   [slotShed + 1]atomic.Uint64
	readErrors atomic.Uint64

	logMu      sync.Mutex
	lastLog    [slotReadError + 1]time.Time
	suppressed [slotReadError + 1]uint64
}

// orderStripes is the number of locks of Server.order, a power of two.
const orderStripes = 256

// paddedMutex keeps each stripe on a cache line of its own, so readers
// locking different stripes do not contend for the line.
type paddedMutex struct {
	sync.Mutex
	_ [64 - 8]byte
}

// MaxReaders bounds Config.Readers.
const MaxReaders = 64

// reader is one read loop's own state.
type reader struct {
	s        *Server
	conn     *net.UDPConn
	opener   report.Opener
	rep      report.Report
	batch    batch // platform-specific buffers (socket_*.go)
	accepted atomic.Uint64
	_        [64]byte // counters of different readers on different cache lines
}

// Counter and log slots: one per report.Reason, then these.
const (
	slotShed      = len(report.Reasons)
	slotReadError = slotShed + 1
)

// New validates cfg and binds the socket(s), so Addr is known before Serve.
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
	if cfg.Readers <= 0 {
		cfg.Readers = runtime.GOMAXPROCS(0)
	}
	cfg.Readers = min(cfg.Readers, MaxReaders)
	conns, err := listen(cfg.Listen, cfg.Readers)
	if err != nil {
		return nil, err
	}
	for _, c := range conns {
		// Thousands of probes whose intervals line up arrive as bursts; the default socket buffer
		// (~200 KiB, a few hundred datagrams) drops them. The kernel caps this at net.core.rmem_max.
		_ = c.SetReadBuffer(ReadBuffer)
	}
	g := report.NewGuard(cfg.ClockSkew)
	cfg.ClockSkew = g.Window()
	if cfg.SourceFailRate <= 0 {
		cfg.SourceFailRate = DefaultSourceFailRate
	}
	if cfg.SourceFailBurst <= 0 {
		cfg.SourceFailBurst = DefaultSourceFailBurst
	}
	if cfg.BackendFailRate <= 0 {
		cfg.BackendFailRate = DefaultBackendFailRate
	}
	if cfg.BackendFailBurst <= 0 {
		cfg.BackendFailBurst = DefaultBackendFailBurst
	}
	s := &Server{cfg: cfg, sink: sink, conns: conns, guard: g, readBatch: defaultReadBatch, orderSeed: maphash.MakeSeed(),
		limit: newSourceLimit(cfg.SourceFailRate, cfg.SourceFailBurst), backendLimit: newSourceLimit(cfg.BackendFailRate, cfg.BackendFailBurst),
		good: map[string]*goodEntry{}, goodAddrs: map[netip.Addr]int{}, goodNets: map[[8]byte]int{}}
	s.backendLimit.exact = true
	for i := range cfg.Readers {
		s.readers = append(s.readers, &reader{s: s, conn: conns[i%len(conns)], opener: report.Opener{Brief: true}})
	}
	return s, nil
}

// ReadBuffer is the socket receive buffer the server asks for, per socket.
const ReadBuffer = 4 << 20

// resolve checks a listen address before any socket is bound.
func resolve(addr string) error {
	if _, err := net.ResolveUDPAddr("udp", addr); err != nil {
		return fmt.Errorf("push: listen address %q: %w", addr, err)
	}
	return nil
}

func listenError(addr string, err error) error {
	return fmt.Errorf("push: listen on %q: %w", addr, err)
}

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.conns[0].LocalAddr() }

// Serve reads datagrams until ctx is done, then closes the socket(s) and
// returns nil. It returns an error only if a socket fails for another
// reason, or if Serve was already called. Rejected datagrams are counted and
// logged (rate-limited) and never stop the readers.
func (s *Server) Serve(ctx context.Context) error {
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("push: Serve called twice")
	}
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	defer s.Close()
	errc := make(chan error, len(s.readers))
	for _, r := range s.readers {
		go func() { errc <- r.serve(ctx) }()
	}
	var first error
	for range s.readers {
		if err := <-errc; err != nil && first == nil {
			first = err
			s.Close() // the others return too
		}
	}
	return first
}

// serve is one read loop.
func (r *reader) serve(ctx context.Context) error {
	s := r.s
	for {
		err := r.read()
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("push: socket %s closed: %w", s.Addr(), err)
		}
		// Transient (e.g. ENOMEM): count, log, keep serving.
		s.readErrors.Add(1)
		s.logLimited(slotReadError, "push socket read failed", "addr", s.Addr().String(), "err", err)
	}
}

// Close closes the socket(s); Serve then returns. Safe to call more than
// once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for _, c := range s.conns {
			errs = append(errs, c.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// handle runs the per-datagram path on the first reader's state, for tests
// and benchmarks without a socket.
func (s *Server) handle(b []byte, from netip.AddrPort) { s.readers[0].handle(b, from, s.cfg.Now()) }

// handle is the whole per-datagram path: framing, the source's failure
// budget, key and tag, decode, replay check, sink. It is separate from the
// read loop so the benchmark measures it without a socket.
//
// Cheapest first: framing needs no key and allocates nothing; a source
// that has spent its failure budget is then shed before the key lookup and
// the HMAC; failures allocate nothing either (the opener is Brief) unless a
// log line is due. A datagram for a backend from one of its own addresses
// is judged by that address's budget instead (trust.go).
//
// now is when the datagram was read; the datagrams of one batch share it,
// which saves a clock read per datagram and differs by microseconds.
func (r *reader) handle(b []byte, from netip.AddrPort, now time.Time) {
	s := r.s
	src := from.Addr()
	s.expireDrops(now)
	t := now.UnixNano()
	id, reason := report.Frame(b)
	if reason != "" {
		s.refuse(reasonIndex(reason), now, b, from)
		if !s.limit.fail(src, t) {
			s.dropSource(src, now)
		}
		return
	}
	own := s.bound(id, src)
	if own {
		if !s.ownVerify(id, src, b, t) {
			s.shed(src, from, now, string(id))
			return
		}
	} else if !s.limit.allow(src, t) {
		s.shed(src, from, now, string(id))
		return
	}
	err := r.opener.Open(b, s.cfg.KeyFor, &r.rep)
	if err == nil {
		mu := &s.order[maphash.String(s.orderSeed, r.rep.BackendID)&(orderStripes-1)]
		mu.Lock()
		if err = s.guard.Check(&r.rep, now); err == nil {
			s.noteGood(r.rep.BackendID, src, r.rep.BootNonce, r.rep.Seq)
			s.sink.Accept(&r.rep, from)
			r.accepted.Add(1)
		}
		mu.Unlock()
		if err == nil {
			return
		}
	}
	s.refuse(reasonIndex(reasonOf(err)), now, b, from)
	if own {
		s.backendLimit.fail(src, t) // never the kernel list: the probe sends from here
		return
	}
	if !s.limit.fail(src, t) {
		s.dropSource(src, now)
	}
}

// shed counts a datagram dropped unread and puts its source on the kernel's
// drop list, unless it is a backend's own address (dropSource).
func (s *Server) shed(src netip.Addr, from netip.AddrPort, now time.Time, id string) {
	s.rejected[slotShed].Add(1)
	s.dropSource(src, now)
	if s.logDue(slotShed, now) {
		s.logLine(slotShed, "push datagrams shed: their source keeps sending rejected ones",
			"from", from.String(), "backend", id, "kernel_drop_list", s.kernelListed.Load())
	}
}

func (s *Server) lastGood(id []byte, src netip.Addr) bool {
	s.goodMu.RLock()
	e := s.good[string(id)] // no allocation for the lookup
	ok := e != nil && e.addr == src
	s.goodMu.RUnlock()
	return ok
}

// reasonOf is report.ReasonOf without its allocation for the usual case:
// Open and Check return a *report.Error itself.
func reasonOf(err error) report.Reason {
	if e, ok := err.(*report.Error); ok {
		return e.Reason
	}
	return report.ReasonOf(err)
}

func reasonIndex(r report.Reason) int {
	for i, x := range report.Reasons {
		if x == r {
			return i
		}
	}
	return -1
}

// refuse counts a rejected datagram under its reason and, when a line is
// due, logs it with the details: the datagram is opened again with a plain
// (not Brief) Open, or checked again, which costs nothing in between lines.
func (s *Server) refuse(i int, now time.Time, b []byte, from netip.AddrPort) {
	if i < 0 { // cannot happen with the reasons report defines
		i = reasonIndex(report.ReasonMalformed)
	}
	s.rejected[i].Add(1)
	if !s.logDue(i, now) {
		return
	}
	var r report.Report
	err := report.Open(b, s.cfg.KeyFor, &r)
	if err == nil { // it failed the Guard; say why without recording anything
		err = s.guardReason(&r, now)
	}
	var e *report.Error
	id := ""
	if errors.As(err, &e) {
		id = e.BackendID
	}
	s.logLine(i, "push report rejected", "reason", string(report.Reasons[i]), "backend", id, "from", from.String(), "err", err)
}

// guardReason explains a Guard rejection of r for the log. Check would
// record r if it were accepted now, so it runs on a copy of the state.
func (s *Server) guardReason(r *report.Report, now time.Time) error {
	g := report.NewGuard(s.guard.Window())
	if m, ok := s.guard.Marks()[r.BackendID]; ok {
		_ = g.Restore(map[string]report.Mark{r.BackendID: m})
	}
	if err := g.Check(r, now); err != nil {
		return err
	}
	return fmt.Errorf("report of backend %q refused by the replay guard", r.BackendID)
}

// logLimited logs at most one line per slot per LogEvery.
func (s *Server) logLimited(slot int, msg string, args ...any) {
	if s.logDue(slot, s.cfg.Now()) {
		s.logLine(slot, msg, args...)
	}
}

// logDue reports whether a line for slot may be written now, counting it
// as suppressed when not.
func (s *Server) logDue(slot int, now time.Time) bool {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if last := s.lastLog[slot]; !last.IsZero() && now.Sub(last) < LogEvery && now.Sub(last) > -LogEvery {
		s.suppressed[slot]++
		return false
	}
	s.lastLog[slot] = now
	return true
}

// logLine writes a line that logDue allowed, with the number of lines
// suppressed since the previous one.
func (s *Server) logLine(slot int, msg string, args ...any) {
	s.logMu.Lock()
	n := s.suppressed[slot]
	s.suppressed[slot] = 0
	s.logMu.Unlock()
	s.cfg.Logger.Warn(msg, append(args, "suppressed", n)...)
}

// Forget drops the replay state of a backend removed from the
// configuration (see report.Guard.Forget). Safe to call while serving.
func (s *Server) Forget(backendID string) {
	s.guard.Forget(backendID)
	s.forgetGood(backendID)
}

// ReplayMarks returns every backend's replay state, for the controller to
// persist (see report.Guard.Marks). Safe to call while serving.
func (s *Server) ReplayMarks() map[string]report.Mark { return s.guard.Marks() }

// RestoreReplayMarks loads marks saved by ReplayMarks, before Serve. Marks
// of backends KeyFor has no key for are dropped (a backend removed while
// the controller was down starts afresh, as after Forget). Malformed marks,
// and marks dated after the collector's clock plus the skew window (no
// accepted report can be: the clock went back, or the file was damaged, and
// such a mark would refuse the probe's new boots), are skipped and named in
// the error; the rest are restored regardless.
//
// Marks are trusted state: whoever can write the file they are kept in can
// lock probes out (a huge seq), so keep it as private as a key file.
func (s *Server) RestoreReplayMarks(marks map[string]report.Mark) error {
	limit := s.cfg.Now().Add(s.guard.Window()).UnixNano()
	keep := make(map[string]report.Mark, len(marks))
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(marks)) {
		m := marks[id]
		if _, ok := s.cfg.KeyFor(id); !ok {
			continue
		}
		if t := markNewest(m); t > limit {
			errs = append(errs, fmt.Errorf("replay mark of backend %q ignored: dated %s, after the collector's clock + %s",
				id, time.Unix(0, t).UTC().Format(time.RFC3339Nano), s.guard.Window()))
			continue
		}
		keep[id] = m
	}
	err := s.guard.Restore(keep)
	for id, m := range s.guard.Marks() { // what Restore took
		if len(m.Epochs) > 0 {
			s.seedEpoch(id, m.Epochs[0].BootNonce, m.Epochs[0].TopSeq)
		}
	}
	return errors.Join(append(errs, err)...)
}

func markNewest(m report.Mark) int64 {
	t := m.Floor
	for _, e := range m.Epochs {
		t = max(t, e.Newest, e.Capped, e.Floor)
	}
	return t
}

// Accepted is the number of reports handed to the sink.
func (s *Server) Accepted() uint64 {
	var n uint64
	for _, r := range s.readers {
		n += r.accepted.Load()
	}
	return n
}

// Rejected returns the number of rejected datagrams per reason, with every
// reason present (zero or not) so exported metrics have all their labels:
// each report.Reason, and ReasonShed.
func (s *Server) Rejected() map[report.Reason]uint64 {
	m := make(map[report.Reason]uint64, len(report.Reasons)+1)
	for i, r := range report.Reasons {
		m[r] = s.rejected[i].Load()
	}
	m[ReasonShed] = s.rejected[slotShed].Load()
	return m
}

// KernelDrops is the number of datagrams the kernel dropped on the push
// socket(s): its receive buffer was full, or the source was on the drop list
// of flooding sources (MaxKernelDrops, KernelDropFor). ok is false where
// the kernel does not tell (not Linux).
func (s *Server) KernelDrops() (n uint64, ok bool) {
	for _, c := range s.conns {
		d, ok := kernelDrops(c)
		if !ok {
			return 0, false
		}
		n += uint64(d)
	}
	return n, true
}

// ReadErrors is the number of failed socket reads other than shutdown.
func (s *Server) ReadErrors() uint64 { return s.readErrors.Load() }
