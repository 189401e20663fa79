package ha

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func good() Config {
	return Config{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/fw/lab", Name: "c1",
		Fingerprint: "ab12", LeaseTTL: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestConfigValidateNamesField(t *testing.T) {
	cases := []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Endpoints = nil }, "Config.Endpoints"},
		{func(c *Config) { c.Endpoints = []string{"127.0.0.1:2379"} }, "Endpoints[0]"},
		{func(c *Config) { c.Endpoints = []string{"ftp://127.0.0.1:2379"} }, "bad URL"},
		{func(c *Config) { c.Endpoints = []string{"http://127.0.0.1"} }, "HOST:PORT"},
		{func(c *Config) { c.Endpoints = []string{"http://127.0.0.1:1", "https://127.0.0.1:2"} }, "Endpoints[1]"},
		{func(c *Config) { c.TLS = &tls.Config{} }, "Config.TLS"},
		{func(c *Config) { c.Prefix = "fw" }, "Config.Prefix"},
		{func(c *Config) { c.Prefix = "/fw/" }, "Config.Prefix"},
		{func(c *Config) { c.Name = "" }, "Config.Name"},
		{func(c *Config) { c.Fingerprint = "" }, "Config.Fingerprint"},
		{func(c *Config) { c.LeaseTTL = 0 }, "Config.LeaseTTL"},
		{func(c *Config) { c.LeaseTTL = 1500 * time.Millisecond }, "Config.LeaseTTL"},
		{func(c *Config) { c.DialTimeout = -1 }, "Config.DialTimeout"},
		{func(c *Config) { c.Username = "u" }, "Username"},
	}
	for _, c := range cases {
		cfg := good()
		c.mod(&cfg)
		_, err := cfg.validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", cfg, err, c.want)
		}
		// New fails the same way without dialling anything.
		if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): err %v, want %q", cfg, err, c.want)
		}
	}
	cfg, err := good().validate()
	if err != nil || cfg.DialTimeout != DefaultDialTimeout || cfg.Logger == nil || cfg.Now == nil {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	h := good()
	h.Endpoints = []string{"https://127.0.0.1:2379"}
	if cfg, err := h.validate(); err != nil || cfg.TLS == nil {
		t.Fatalf("https without TLS: %v %v", cfg.TLS, err)
	}
}

func TestMargin(t *testing.T) {
	if m := margin(time.Second); m != 100*time.Millisecond {
		t.Errorf("margin(1s) = %v", m)
	}
	if m := margin(100 * time.Millisecond); m != 50*time.Millisecond {
		t.Errorf("margin(100ms) = %v", m)
	}
}

// TestLeadingUsesInjectedClock: Leading and Current turn false once the
// injected clock passes ValidUntil, and Changes is poked on notice changes
// only.
func TestLeadingUsesInjectedClock(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg, _ := good().validate()
	cfg.Now = func() time.Time { return now }
	e := &Elector{cfg: cfg, log: cfg.Logger, changes: make(chan struct{}, 1), stepDown: make(chan uint64, 1)}
	e.update(func(l *Leadership) {
		*l = Leadership{Leader: true, Term: 7, LeaderName: "c1", TTL: time.Second, ValidUntil: now.Add(900 * time.Millisecond)}
	})
	select {
	case <-e.Changes():
	default:
		t.Fatal("no notice for leadership gained")
	}
	if term, ok := e.Leading(); !ok || term != 7 {
		t.Fatalf("Leading = %d, %v", term, ok)
	}
	e.update(func(l *Leadership) { l.ValidUntil = now.Add(time.Second) })
	select {
	case <-e.Changes():
		t.Fatal("notice for a ValidUntil extension")
	default:
	}
	e.StepDown(6, "old term")
	if len(e.stepDown) != 0 {
		t.Fatal("StepDown of another term queued")
	}
	e.StepDown(7, "test")
	if len(e.stepDown) != 1 {
		t.Fatal("StepDown of our term not queued")
	}
	now = now.Add(time.Second)
	if _, ok := e.Leading(); ok {
		t.Fatal("leading at ValidUntil")
	}
	if e.Current().Leader {
		t.Fatal("Current().Leader past ValidUntil")
	}
	if err := e.SaveState(context.Background(), nil); err != ErrNotLeader {
		t.Fatalf("SaveState past ValidUntil: %v", err)
	}
}

func TestClassify(t *testing.T) {
	for msg, want := range map[string]string{
		"etcdserver: authentication failed, invalid user ID or password":   "auth failure",
		"transport: authentication handshake failed: tls: bad certificate": "TLS handshake failure",
		"x509: certificate signed by unknown authority":                    "TLS handshake failure",
		"dial tcp 127.0.0.1:1: connect: connection refused":                "unreachable",
	} {
		if got := classify(errString(msg)); !strings.HasPrefix(got, want) {
			t.Errorf("classify(%q) = %q, want %s", msg, got, want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
