package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"flowweight/controller/config"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits bound what one client can hold of the API. Each connection is a goroutine and
// buffers until a timeout frees it; without them an idle or half-sent request is held
// forever. config.API holds the operator's values and their defaults.
type Limits struct {
	ReadTimeout    time.Duration // whole request, headers and body
	WriteTimeout   time.Duration // end of the request headers to end of the answer
	IdleTimeout    time.Duration // a keep-alive connection between requests
	MaxHeaderBytes int           // request line and headers
	MaxBodyBytes   int64         // request body
	MaxConnections int           // open connections
}

// LimitsFrom takes the limits from a validated configuration.
func LimitsFrom(c config.API) Limits {
	return Limits{ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout,
		MaxHeaderBytes: c.MaxHeaderBytes, MaxBodyBytes: c.MaxBodyBytes, MaxConnections: c.MaxConnections}
}

func (l Limits) validate() error {
	var errs []error
	if l.ReadTimeout <= 0 || l.WriteTimeout <= 0 || l.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("timeouts must be positive (read %v, write %v, idle %v)", l.ReadTimeout, l.WriteTimeout, l.IdleTimeout))
	}
	if l.MaxHeaderBytes <= 0 || l.MaxBodyBytes < 0 || l.MaxConnections <= 0 {
		errs = append(errs, fmt.Errorf("sizes must be positive (header %d, body %d, connections %d)", l.MaxHeaderBytes, l.MaxBodyBytes, l.MaxConnections))
	}
	return errors.Join(errs...)
}

// Options configure a Server.
type Options struct {
	Token string // bearer token for changes; "" = none, allowed only on a loopback listener
	// OpenWrites lets writes through without a token (api.allow_unauthenticated_writes), on
	// a loopback listener with no Token only. False: without a token every write is refused.
	OpenWrites   bool
	AllowedHosts []string // extra Host values served (api.allowed_hosts)
	Limits       Limits
	Logger       *slog.Logger
	Registerer   prometheus.Registerer // for the refusal counters; nil = not exported
}

// OptionsFrom builds Options from a configuration that config.Load read (so the token is in it).
func OptionsFrom(c config.API, log *slog.Logger, reg prometheus.Registerer) Options {
	return Options{Token: c.Token.Reveal(), OpenWrites: c.AllowUnauthenticatedWrites, AllowedHosts: c.AllowedHosts, Limits: LimitsFrom(c), Logger: log, Registerer: reg}
}

// Server is the controller's HTTP server. The token, allowed hosts and body limit are read
// per request from atomics, so a reload replaces them with no lock and no restart; the
// http.Server's own limits are fixed when it starts (net/http reads them unlocked), and
// CheckReload refuses a change to them.
type Server struct {
	b        Balancer
	log      *slog.Logger
	limits   Limits
	mux      http.Handler
	token    atomic.Pointer[string]
	open     atomic.Bool // writes without a token allowed (only when token is "")
	allowed  atomic.Pointer[[]string]
	maxBody  atomic.Int64
	hosts    atomic.Pointer[hostPolicy] // set by Serve from the listener's address
	loopback atomic.Bool                // the listener is on loopback: a token may be absent

	connsRefused prometheus.Counter
	refused      *prometheus.CounterVec

	mu     sync.Mutex
	srv    *http.Server
	ln     *limitListener
	closed bool
}

// NewServer returns a Server that serves nothing until Serve.
func NewServer(b Balancer, gatherer prometheus.Gatherer, o Options) (*Server, error) {
	if err := o.Limits.validate(); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if _, err := parseAllowed(o.AllowedHosts); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if err := checkToken(o.Token); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{b: b, log: log, limits: o.Limits,
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowweight_api_connections_refused_total",
			Help: "Connections to the HTTP API closed at once because api.max_connections were open."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowweight_api_requests_refused_total",
			Help: "HTTP API requests refused before any handler, by reason (host, cross_site, token, body_too_large, query)."}, []string{"reason"}),
	}
	for _, r := range []string{"host", "cross_site", "token", "body_too_large", "query"} {
		s.refused.WithLabelValues(r)
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{s.connsRefused, s.refused} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("api: metrics: %w", err)
			}
		}
	}
	s.token.Store(&o.Token)
	s.open.Store(o.OpenWrites)
	allowed := append([]string(nil), o.AllowedHosts...)
	s.allowed.Store(&allowed)
	s.maxBody.Store(o.Limits.MaxBodyBytes)
	s.mux = routes(s, gatherer)
	return s, nil
}

func checkToken(tok string) error {
	if tok != "" && len(tok) < config.MinTokenLen {
		return fmt.Errorf("api.token_file: token is %d bytes, want at least %d", len(tok), config.MinTokenLen)
	}
	return nil
}

// Serve serves on ln, wrapped in the connection cap, until Close. It refuses a non-loopback
// listener without a token (config validation already does; this keeps a caller that skips
// it from opening the API to the network).
func (s *Server) Serve(ln net.Listener) error {
	hp, err := newHostPolicy(ln.Addr(), *s.allowed.Load())
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	l := s.limits
	srv := &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: min(l.ReadTimeout, 5*time.Second),
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		// net/http answers malformed requests without logging; what it logs here (a handler
		// panic, accept errors) is ours to see.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	lim := newLimitListener(ln, l.MaxConnections, s.connsRefused.Inc)
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return http.ErrServerClosed
	case s.srv != nil:
		s.mu.Unlock()
		return errors.New("api: Serve called twice")
	}
	s.loopback.Store(hp.addr.IsLoopback())
	if *s.token.Load() == "" && !s.loopback.Load() {
		s.mu.Unlock()
		return fmt.Errorf("api: refusing to serve on %s, not a loopback address, without a token (api.token_file)", ln.Addr())
	}
	s.hosts.Store(&hp)
	s.srv, s.ln = srv, lim
	s.mu.Unlock()
	return srv.Serve(lim)
}

// Close stops the server and closes every connection; a Serve that has not started yet
// returns at once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// SetToken replaces the bearer token for the requests that follow. An empty token turns
// authentication off and is refused unless the listener is on loopback; a short one is
// refused.
func (s *Server) SetToken(tok string) error {
	if err := checkToken(tok); err != nil {
		return err
	}
	if tok == "" && s.hosts.Load() != nil && !s.loopback.Load() {
		return errors.New("api.token_file: removing the token of an API listening off loopback is refused")
	}
	s.token.Store(&tok)
	return nil
}

// CheckReload says whether Reload(cfg) would be accepted, changing nothing: a changed
// http.Server limit needs a restart, and a token must have been read (config.Load) and be
// valid. Call it before the rest of the configuration is applied, so a refused API part
// refuses the whole reload.
func (s *Server) CheckReload(cfg *config.Config) error {
	if s == nil {
		return nil
	}
	var errs []error
	old, new := s.limits, LimitsFrom(cfg.API)
	for _, c := range []struct {
		key      string
		old, new any
	}{
		{"api.read_timeout", old.ReadTimeout, new.ReadTimeout},
		{"api.write_timeout", old.WriteTimeout, new.WriteTimeout},
		{"api.idle_timeout", old.IdleTimeout, new.IdleTimeout},
		{"api.max_header_bytes", old.MaxHeaderBytes, new.MaxHeaderBytes},
		{"api.max_connections", old.MaxConnections, new.MaxConnections},
	} {
		if c.old != c.new {
			errs = append(errs, fmt.Errorf("%s: changing %v to %v needs a restart", c.key, c.old, c.new))
		}
	}
	if new.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("api.max_body_bytes: %d is negative", new.MaxBodyBytes))
	}
	tok := cfg.API.Token.Reveal()
	if cfg.API.TokenFile != "" && tok == "" {
		errs = append(errs, errors.New("api.token_file: the token was not read (the configuration must come from config.Load)"))
	}
	if err := checkToken(tok); err != nil {
		errs = append(errs, err)
	}
	if tok == "" && s.hosts.Load() != nil && !s.loopback.Load() {
		errs = append(errs, errors.New("api.token_file: required: the API listens off loopback"))
	}
	if _, err := parseAllowed(cfg.API.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Reload applies cfg's token, allowed hosts and body limit (after CheckReload). Requests
// already past the guard finish under the old token; every later one sees the new.
func (s *Server) Reload(cfg *config.Config) error {
	if s == nil {
		return nil
	}
	if err := s.CheckReload(cfg); err != nil {
		return err
	}
	if hp := s.hosts.Load(); hp != nil {
		np := *hp
		np.allowed, _ = parseAllowed(cfg.API.AllowedHosts) // checked by CheckReload
		s.hosts.Store(&np)
	}
	allowed := append([]string(nil), cfg.API.AllowedHosts...)
	s.allowed.Store(&allowed)
	s.maxBody.Store(cfg.API.MaxBodyBytes)
	old, wasOpen := *s.token.Load(), s.open.Load()
	tok := cfg.API.Token.Reveal()
	s.open.Store(cfg.API.AllowUnauthenticatedWrites)
	s.token.Store(&tok)
	if old != tok || wasOpen != cfg.API.AllowUnauthenticatedWrites {
		s.log.Info("api write authentication changed", "token_file", cfg.API.TokenFile, "auth", tok != "",
			"allow_unauthenticated_writes", cfg.API.AllowUnauthenticatedWrites)
	}
	return nil
}

// Addr is the listening address, once Serve has started (for tests and logs).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// openConns is how many connections hold a slot under the cap (tests watch it fall).
func (s *Server) openConns() int {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return 0
	}
	return ln.open()
}
