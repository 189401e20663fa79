package ofswitch

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// Handler receives session events. Connected runs on the session's goroutine with the
// reader already running, so it may call Apply/Multipart (e.g. to resync); PacketIn calls
// start only after Connected returned and come from one goroutine per switch, in order;
// Disconnected comes last, after the final PacketIn, exactly once per Connected.
type Handler interface {
	Connected(sw *Switch)
	Disconnected(sw *Switch, err error)
	PacketIn(sw *Switch, pi PacketIn)
}

// Server accepts OpenFlow 1.3 switches and keeps one session per datapath id.
type Server struct {
	cfg Config
	h   Handler
	ln  net.Listener

	// Clock and timers, replaced by unit tests so that no test waits for real time.
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
	ticker func(time.Duration) (<-chan time.Time, func())

	mu       sync.Mutex
	switches map[uint64]*Switch
	shaking  map[net.Conn]shake  // connections still in the handshake
	shakeSeq uint64              // order of admission into shaking, for finding the oldest
	shakeSrc map[string]int      // connections in the handshake per sourceKey (not "")
	claiming map[uint64]bool     // datapath ids whose established session is being probed
	pins     map[uint64]*binding // datapath id -> the certificate identity that first claimed it (bindings.go)
	pinsOf   map[string]int      // bindings per certificate identity
	closed   bool
	wg       sync.WaitGroup

	plog           *peerLog // every peer-caused log line, per source and per datapath id
	faults         [numFaults]atomic.Uint64
	packetInDrops  atomic.Uint64
	errorsReceived atomic.Uint64
	handshakeFails atomic.Uint64
}

// Stats are the server's counters, for the binary to export.
type Stats struct {
	Switches         int    // live sessions
	PacketInDrops    uint64 // packet-ins dropped because a Handler fell behind
	ErrorsReceived   uint64 // OFPT_ERROR messages from switches, solicited or not
	HandshakeFailure uint64 // connections closed during HELLO/FEATURES
	// Faults counts, per Fault (every one present, zeros too), what peers did that was
	// refused, dropped or logged; the set of keys is fixed.
	Faults map[Fault]uint64
}

// NewServer validates cfg (after defaults) and starts listening, so Addr is known before
// Serve runs and a switch can be pointed at it.
func NewServer(cfg Config, h Handler) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("ofswitch: NewServer needs a Handler, got nil")
	}
	network, addr := "tcp", cfg.Listen
	if path, ok := strings.CutPrefix(cfg.Listen, "unix:"); ok {
		// Open vSwitch's active "unix:FILE" controller target: the switch reaches a controller
		// that lives in another network namespace (the lab) without any IP route to it.
		network, addr = "unix", path
		_ = os.Remove(path) // a socket left by a previous run
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("ofswitch: listen on %q: %w", cfg.Listen, err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	srv := &Server{
		cfg: cfg, h: h, ln: ln,
		now:   time.Now,
		after: time.After,
		ticker: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
		switches: make(map[uint64]*Switch),
		shaking:  make(map[net.Conn]shake),
		shakeSrc: make(map[string]int),
		claiming: make(map[uint64]bool),
		pins:     make(map[uint64]*binding),
		pinsOf:   make(map[string]int),
	}
	srv.plog = newPeerLog(func() time.Time { return srv.now() })
	return srv, nil
}

// fault counts f and logs msg for it, at most once per ratelog.Every per fault and source
// address (src, a sourceKey) and per datapath id (dpid, "" before the handshake told it).
func (s *Server) fault(f Fault, src, dpid, msg string, args ...any) {
	s.faults[f].Add(1)
	s.plog.Log(s.cfg.Logger, f.level(), f.String(), src, dpid, msg, append(args, "reason", f.String())...)
}

// Addr is the listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n := len(s.switches)
	s.mu.Unlock()
	faults := make(map[Fault]uint64, numFaults)
	for f := range numFaults {
		faults[f] = s.faults[f].Load()
	}
	return Stats{Switches: n, PacketInDrops: s.packetInDrops.Load(), ErrorsReceived: s.errorsReceived.Load(),
		HandshakeFailure: s.handshakeFails.Load(), Faults: faults}
}

// Switch returns the live session of a datapath.
func (s *Server) Switch(dpid uint64) (*Switch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sw, ok := s.switches[dpid]
	return sw, ok
}

// Switches returns the live sessions.
func (s *Server) Switches() []*Switch {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Switch, 0, len(s.switches))
	for _, sw := range s.switches {
		out = append(out, sw)
	}
	return out
}

// Serve accepts switches until ctx ends, then closes the listener and every session and
// returns nil once all their Disconnected calls are done. Any other accept failure is
// returned after the same clean-up.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	var serveErr error
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				serveErr = fmt.Errorf("ofswitch: accept on %v: %w", s.ln.Addr(), err)
			}
			break
		}
		if !s.startShake(c) {
			continue
		}
		s.wg.Add(1)
		go s.handle(c)
	}
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	live := make([]*Switch, 0, len(s.switches))
	for _, sw := range s.switches {
		live = append(live, sw)
	}
	for c := range s.shaking {
		c.Close()
	}
	s.mu.Unlock()
	for _, sw := range live {
		sw.close(ErrServerClosed)
	}
	s.wg.Wait()
	return serveErr
}

// shake is a connection in the handshake: its sourceKey, and when it was admitted (in order,
// and on the server's clock).
type shake struct {
	src string
	seq uint64
	at  time.Time
}

// staleHandshake is how long a connection may sit in a full handshake table before a newcomer
// may take its place. Switches on a LAN finish HELLO and FEATURES in milliseconds, TLS over a
// WAN in a few round trips; a connection that idles longer while others wait holds a slot it
// does not use. Holding the table against newcomers then takes more than 64 new connections
// every 250 ms, not 64 idle ones.
const staleHandshake = 250 * time.Millisecond

// startShake admits an accepted connection into the handshake, or closes it at once (before
// any goroutine or buffer: a connection flood costs an accept and a close) when
// Config.MaxHandshakes connections are in the handshake and it cannot take a slot from a
// source over its share.
//
// The per-source share (Config.MaxHandshakesPerSource) binds only when the table is full.
// One ovs-vswitchd connects all its bridges at once from one address, and its handshakes
// take milliseconds: capping every source at its share at all times sent 92 of 100 bridges
// into Open vSwitch's reconnect backoff (1 s, doubling to 8 s), and a cold start took a
// minute instead of a second. When the table is full, a connection from a source under its
// share closes the oldest handshake of the source holding the most, if that source is over
// its share: one host's idle connections, each held for up to HandshakeTimeout, cannot keep
// the switches of other hosts out, and a busy host loses only a handshake it retries. When no
// source is over its share (many sources, each at it), any newcomer takes the slot of the
// oldest handshake if it has idled longer than staleHandshake.
func (s *Server) startShake(c net.Conn) bool {
	src := sourceKey(c.RemoteAddr())
	s.mu.Lock()
	total, mine := len(s.shaking), s.shakeSrc[src]
	var victim net.Conn
	var victimSrc string
	now := s.now()
	ok := total < s.cfg.MaxHandshakes
	if !ok && src != "" && mine < s.cfg.MaxHandshakesPerSource {
		victim, victimSrc = s.oldestOfLargestLocked()
	}
	if !ok && victim == nil {
		victim, victimSrc = s.staleLocked(now)
	}
	if victim != nil {
		s.endShakeLocked(victim)
		ok = true
	}
	if ok {
		s.shakeSeq++
		s.shaking[c] = shake{src: src, seq: s.shakeSeq, at: now}
		if src != "" {
			s.shakeSrc[src]++
		}
	}
	s.mu.Unlock()
	if victim != nil {
		victim.Close()
		s.fault(FaultTooManyHandshakes, victimSrc, "", "handshake closed to make room: its source is over its share of the slots, or it idled past "+staleHandshake.String(),
			"remote", victim.RemoteAddr().String(), "source", victimSrc, "limit_per_source", s.cfg.MaxHandshakesPerSource,
			"for", c.RemoteAddr().String())
	}
	if ok {
		return true
	}
	if src != "" && mine >= s.cfg.MaxHandshakesPerSource {
		s.fault(FaultTooManyHandshakes, src, "", "connection refused: too many handshakes in progress, its source over its share",
			"remote", c.RemoteAddr().String(), "source", src, "limit", s.cfg.MaxHandshakes, "limit_per_source", s.cfg.MaxHandshakesPerSource)
	} else {
		s.fault(FaultTooManyHandshakes, src, "", "connection refused: too many handshakes in progress",
			"remote", c.RemoteAddr().String(), "limit", s.cfg.MaxHandshakes)
	}
	c.Close()
	return false
}

// oldestOfLargestLocked is the handshake admitted first from the source holding the most, if
// that source holds more than its share; s.mu is held. A scan of at most MaxHandshakes
// entries, and only when the table is full.
func (s *Server) oldestOfLargestLocked() (net.Conn, string) {
	top, most := "", s.cfg.MaxHandshakesPerSource
	for src, n := range s.shakeSrc {
		if n > most || (n == most && src < top && n > s.cfg.MaxHandshakesPerSource) {
			top, most = src, n
		}
	}
	if top == "" {
		return nil, ""
	}
	var oldest net.Conn
	var seq uint64
	for c, sh := range s.shaking {
		if sh.src == top && (oldest == nil || sh.seq < seq) {
			oldest, seq = c, sh.seq
		}
	}
	return oldest, top
}

// staleLocked is the oldest handshake if it has been in the table longer than staleHandshake
// at now; s.mu is held. A scan of at most MaxHandshakes entries, and only when the table is
// full and no source is over its share.
func (s *Server) staleLocked(now time.Time) (net.Conn, string) {
	var oldest net.Conn
	var sh shake
	for c, x := range s.shaking {
		if oldest == nil || x.seq < sh.seq {
			oldest, sh = c, x
		}
	}
	if oldest == nil || now.Sub(sh.at) <= staleHandshake {
		return nil, ""
	}
	return oldest, sh.src
}

// endShakeLocked takes c out of the handshake accounting; s.mu is held.
func (s *Server) endShakeLocked(c net.Conn) {
	sh, ok := s.shaking[c]
	if !ok {
		return
	}
	delete(s.shaking, c)
	if sh.src == "" {
		return
	}
	if s.shakeSrc[sh.src] <= 1 {
		delete(s.shakeSrc, sh.src) // the map holds only sources with a handshake in progress
	} else {
		s.shakeSrc[sh.src]--
	}
}

// handle runs one connection: handshake, the datapath claim, and the session until it
// ends. The accept loop has put c in s.shaking.
func (s *Server) handle(c net.Conn) {
	defer s.wg.Done()
	remote := c.RemoteAddr().String()
	log := s.cfg.Logger.With("remote", remote)
	s.mu.Lock()
	if s.closed {
		s.endShakeLocked(c)
		s.mu.Unlock()
		c.Close()
		return
	}
	s.mu.Unlock()
	sw, err := s.handshake(c)
	s.mu.Lock()
	s.endShakeLocked(c)
	s.mu.Unlock()
	if err != nil {
		s.handshakeFails.Add(1)
		s.fault(FaultHandshakeFailed, sourceKey(c.RemoteAddr()), "", "switch handshake failed", "remote", remote, "err", err)
		c.Close()
		return
	}
	sw.log = log.With("dpid", sw.String())
	if err := s.claim(sw); err != nil {
		f := FaultDuplicateDatapath
		switch {
		case errors.Is(err, ErrIdentityMismatch):
			f = FaultIdentityMismatch
		case errors.Is(err, ErrTooManySwitches):
			f = FaultTooManySwitches
		}
		if !errors.Is(err, ErrServerClosed) {
			s.fault(f, sw.src, sw.String(), "switch refused", "remote", remote, "dpid", sw.String(), "err", err)
		}
		c.Close()
		return
	}

	sw.lastRx.Store(s.now().UnixNano())
	var loops sync.WaitGroup
	readerDone := make(chan struct{})
	loops.Add(2)
	go func() {
		defer loops.Done()
		defer close(readerDone)
		sw.readLoop()
	}()
	go func() {
		defer loops.Done()
		sw.writeLoop()
	}()
	loops.Add(1)
	go func() {
		defer loops.Done()
		sw.keepalive()
	}()
	sw.loadDesc() // the writer runs: the DESC request goes through it
	// Debug: the Handler logs the session (rate-limited); these add the table details.
	sw.log.Debug("switch connected", "tables", sw.features.NumTables, "buffers", sw.features.NumBuffers)
	s.h.Connected(sw)
	var piWG sync.WaitGroup
	piWG.Add(1)
	go sw.deliverPacketIns(s.h, &piWG)

	<-readerDone
	close(sw.packetIns) // only the reader sends on it
	piWG.Wait()
	sw.close(nil) // the reader ended it already; this makes sure writer and keepalive stop
	loops.Wait()
	s.mu.Lock()
	if s.switches[sw.DatapathID()] == sw {
		delete(s.switches, sw.DatapathID())
		s.touchLocked(sw.DatapathID())
	}
	s.mu.Unlock()
	err = sw.Err()
	sw.log.Debug("switch disconnected", "err", err)
	s.h.Disconnected(sw, err)
	close(sw.stopped)
}

// claim registers sw under its datapath id, or refuses it. The policy (see the package doc):
// a certificate must be bound to the id; an established session of the id wins unless it
// fails a liveness probe, in which case it is closed and sw takes over; one claim per id is
// probed at a time, and a claim while another is probed is refused.
func (s *Server) claim(sw *Switch) error {
	dpid := sw.DatapathID()
	if s.cfg.CertNamesDatapath && !certNamesDatapath(sw.conn, dpid) {
		return fmt.Errorf("switch %s at %s: %w: its certificate (%s) names another datapath or none; issue it with CN or a DNS SAN %016x",
			sw, sw.remote, ErrIdentityMismatch, sw.identity, dpid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if pin, ok := s.pins[dpid]; ok && pin.identity != sw.identity {
		return fmt.Errorf("switch %s at %s: %w: datapath first connected with certificate %s, this one is %s",
			sw, sw.remote, ErrIdentityMismatch, pin.identity, describeIdentity(sw.identity))
	}
	if s.claiming[dpid] {
		return fmt.Errorf("switch %s at %s: %w: another connection's claim of it is being checked", sw, sw.remote, ErrDuplicateDatapath)
	}
	old := s.switches[dpid]
	if old == nil {
		if len(s.switches) >= s.cfg.MaxSwitches {
			return fmt.Errorf("switch %s at %s: %w: %d connected, limit %d", sw, sw.remote, ErrTooManySwitches, len(s.switches), s.cfg.MaxSwitches)
		}
		return s.registerLocked(sw)
	}
	s.claiming[dpid] = true
	s.mu.Unlock()
	alive := old.probe()
	if !alive {
		sw.logf(slog.LevelInfo, "replaced", "switch reconnected, closing the older session that did not answer a probe", "old_remote", old.remote)
		old.close(fmt.Errorf("switch %s at %s: %w (new connection from %s)", old, old.remote, ErrReplaced, sw.remote))
		<-old.stopped
	}
	s.mu.Lock()
	delete(s.claiming, dpid)
	if alive {
		return fmt.Errorf("switch %s at %s: %w from %s, which answered a probe", sw, sw.remote, ErrDuplicateDatapath, old.remote)
	}
	if s.closed {
		return ErrServerClosed
	}
	if cur := s.switches[dpid]; cur != nil && cur != old {
		return fmt.Errorf("switch %s at %s: %w from %s", sw, sw.remote, ErrDuplicateDatapath, cur.remote)
	}
	return s.registerLocked(sw)
}

// registerLocked makes sw the session of its datapath and binds the id to its certificate.
func (s *Server) registerLocked(sw *Switch) error {
	if err := s.bindLocked(sw); err != nil {
		return err
	}
	s.switches[sw.DatapathID()] = sw
	return nil
}

// handshake exchanges HELLO (1.3 only), asks FEATURES for the datapath id, and sets the
// switch config, all under HandshakeTimeout.
func (s *Server) handshake(c net.Conn) (*Switch, error) {
	if err := c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout)); err != nil {
		return nil, err
	}
	if tc, ok := c.(*tls.Conn); ok {
		// Explicitly, so a refused certificate is logged as a TLS failure naming the peer's
		// certificate rather than as a failed HELLO.
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
			s.cfg.Logger.Debug("switch certificate verified", "remote", c.RemoteAddr().String(), "subject", certs[0].Subject.String())
		}
	}
	sw := &Switch{
		srv: s, cfg: s.cfg, conn: c, remote: c.RemoteAddr().String(), src: sourceKey(c.RemoteAddr()), br: bufio.NewReader(c), log: s.cfg.Logger,
		identity:  peerIdentity(c),
		out:       newOutQueue(s.cfg),
		pending:   make(map[uint32]*waiter),
		done:      make(chan struct{}),
		stopped:   make(chan struct{}),
		packetIns: make(chan PacketIn, s.cfg.PacketInQueue),

		roleChanged: make(chan struct{}, 1),
		rxWake:      make(chan struct{}, 1),
	}
	send := func(t of.Type, xid uint32, body ofwire.RawBody) error {
		b, err := ofwire.EncodeMessage(t, xid, body)
		if err != nil {
			return err
		}
		_, err = c.Write(b)
		return err
	}
	if err := send(of.TypeHello, sw.nextXID(), ofwire.HelloBody()); err != nil {
		return nil, fmt.Errorf("send HELLO: %w", err)
	}
	f, err := readHandshakeFrame(sw.br)
	if err != nil {
		return nil, fmt.Errorf("read HELLO: %w", err)
	}
	if f.Type != of.TypeHello {
		return nil, fmt.Errorf("%w: first message is %v, want HELLO", ErrMalformed, f.Type)
	}
	ok, err := ofwire.Negotiate(f)
	if err != nil {
		return nil, fmt.Errorf("HELLO: %w", err)
	}
	if !ok {
		// Answer in the peer's version, which older switches can parse.
		msg := fmt.Sprintf("flowweight speaks OpenFlow 1.3 (wire version %d) only; peer offered version %d", ofwire.Version13, f.Version)
		b, _ := ofwire.EncodeMessage(of.TypeError, f.Xid, ofwire.ErrorBody(uint16(ofp.ErrTypeHelloFailed), uint16(ofp.ErrCodeHelloFailedIncompatible), []byte(msg)))
		b[0] = min(f.Version, ofwire.Version13)
		c.Write(b)
		return nil, fmt.Errorf("%w: peer HELLO version %d without 1.3", ErrHelloFailed, f.Version)
	}
	fx := sw.nextXID()
	if err := send(of.TypeFeaturesRequest, fx, nil); err != nil {
		return nil, fmt.Errorf("send FEATURES_REQUEST: %w", err)
	}
	for {
		f, err := readHandshakeFrame(sw.br)
		if err != nil {
			return nil, fmt.Errorf("read FEATURES_REPLY: %w", err)
		}
		switch {
		case f.Type == of.TypeEchoRequest:
			if err := send(of.TypeEchoReply, f.Xid, ofwire.RawBody(f.Body)); err != nil {
				return nil, fmt.Errorf("answer ECHO_REQUEST: %w", err)
			}
			continue
		case f.Type == of.TypeError:
			em, err := ofwire.ParseError(f.Body)
			if err != nil {
				return nil, fmt.Errorf("during handshake: %w", err)
			}
			tn, cn := ofwire.ErrorName(em.Type, em.Code)
			return nil, fmt.Errorf("switch error during handshake: %s/%s", tn, cn)
		case f.Type != of.TypeFeaturesReply || f.Xid != fx:
			continue
		}
		if f.Version != ofwire.Version13 {
			return nil, fmt.Errorf("%w: FEATURES_REPLY version %d", ErrMalformed, f.Version)
		}
		if sw.features, err = ofwire.ParseFeatures(f.Body); err != nil {
			return nil, err
		}
		break
	}
	if err := send(of.TypeSetConfig, sw.nextXID(), ofwire.SwitchConfigBody()); err != nil {
		return nil, fmt.Errorf("send SET_CONFIG: %w", err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return sw, nil
}
