package ha

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"
)

// Config configures an Elector. Endpoints, Prefix, Name, Fingerprint and
// LeaseTTL are required.
type Config struct {
	// Endpoints are etcd client URLs, e.g. "http://127.0.0.1:2379"; all
	// http:// or all https:// (the client uses one transport for all).
	Endpoints []string
	// Prefix is the key prefix, e.g. "/flowweight/lab": the election runs on
	// Prefix+"/leader", drains live under Prefix+"/drain/", the leader's
	// state document at Prefix+"/state".
	Prefix string
	// Name is this controller's id, unique among the controllers.
	Name string
	// Fingerprint is a hash of this controller's service configuration.
	// Controllers with different fingerprints never take over from each
	// other: one whose fingerprint differs from the current leader's does
	// not campaign.
	Fingerprint string
	// LeaseTTL is the session lease's TTL in whole seconds, at least 1 s.
	// etcd may grant more (its minimum is ceil(1.5 × election timeout));
	// Leadership.TTL reports the granted one.
	LeaseTTL time.Duration
	// DialTimeout bounds New's connection check and every single etcd
	// request the Elector makes on its own (grant, revoke, resign); 0: 2 s.
	DialTimeout time.Duration
	// TLS is the client's TLS configuration for https:// endpoints; nil with
	// https:// means the system roots, nil with http:// means plain.
	TLS *tls.Config
	// Username and Password are optional etcd credentials (both or none).
	Username, Password string
	// Logger receives the Elector's log; nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock for ValidUntil arithmetic; nil: time.Now.
	Now func() time.Time
}

// DefaultDialTimeout is Config.DialTimeout's default.
const DefaultDialTimeout = 2 * time.Second

// validate checks cfg and returns a copy with defaults filled in. Errors
// name the field at fault.
func (cfg Config) validate() (Config, error) {
	if len(cfg.Endpoints) == 0 {
		return cfg, errors.New("ha: Config.Endpoints: empty")
	}
	scheme := ""
	for i, ep := range cfg.Endpoints {
		u, err := url.Parse(ep)
		if err != nil {
			return cfg, fmt.Errorf("ha: Config.Endpoints[%d] %q: bad URL: %v", i, ep, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return cfg, fmt.Errorf("ha: Config.Endpoints[%d] %q: bad URL: scheme %q, want http:// or https://", i, ep, u.Scheme)
		}
		if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" || u.Hostname() == "" {
			return cfg, fmt.Errorf("ha: Config.Endpoints[%d] %q: bad URL: want SCHEME://HOST:PORT", i, ep)
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return cfg, fmt.Errorf("ha: Config.Endpoints[%d] %q: bad URL: want SCHEME://HOST:PORT without path, query or user", i, ep)
		}
		if scheme != "" && u.Scheme != scheme {
			return cfg, fmt.Errorf("ha: Config.Endpoints[%d] %q: bad URL: mixes %s:// and %s:// endpoints", i, ep, scheme, u.Scheme)
		}
		scheme = u.Scheme
	}
	if scheme == "http" && cfg.TLS != nil {
		return cfg, errors.New("ha: Config.TLS: set, but the endpoints are http:// (use https://)")
	}
	if scheme == "https" && cfg.TLS == nil {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.Prefix == "" || !strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/") {
		return cfg, fmt.Errorf("ha: Config.Prefix %q: want a key prefix like /flowweight/lab (leading /, no trailing /)", cfg.Prefix)
	}
	if cfg.Name == "" || strings.ContainsAny(cfg.Name, "/\n") {
		return cfg, fmt.Errorf("ha: Config.Name %q: want a non-empty id without '/' or newline", cfg.Name)
	}
	if cfg.Fingerprint == "" {
		return cfg, errors.New("ha: Config.Fingerprint: empty")
	}
	if cfg.LeaseTTL < time.Second || cfg.LeaseTTL%time.Second != 0 {
		return cfg, fmt.Errorf("ha: Config.LeaseTTL %v: want whole seconds, at least 1s", cfg.LeaseTTL)
	}
	if cfg.DialTimeout < 0 {
		return cfg, fmt.Errorf("ha: Config.DialTimeout %v: negative", cfg.DialTimeout)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return cfg, errors.New("ha: Config.Username/Password: give both or neither")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg, nil
}
