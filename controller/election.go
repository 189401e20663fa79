package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"strings"

	"flowweight/controller/config"
	"flowweight/controller/ha"
	"flowweight/internal/regfile"
	"flowweight/internal/secretfile"
)

// newElector connects to etcd for the [ha] section. Every failure names the key or endpoint at
// fault; a controller that cannot reach etcd does not start, since it could never be sure it
// leads (docs/ha.md).
func newElector(ctx context.Context, cfg *config.Config, log *slog.Logger) (*ha.Elector, error) {
	h := cfg.HA
	tc, err := etcdTLS(h)
	if err != nil {
		return nil, err
	}
	var password string
	if h.PasswordFile != "" {
		b, err := secretfile.Read(h.PasswordFile, 4096)
		if err != nil {
			return nil, fmt.Errorf("ha.password_file: %s: %w", h.PasswordFile, err)
		}
		password = strings.TrimSpace(string(b))
	}
	e, err := ha.New(ctx, ha.Config{Endpoints: h.Etcd, Prefix: h.Prefix, Name: h.Name, Fingerprint: cfg.Fingerprint(),
		LeaseTTL: h.Lease, DialTimeout: h.DialTimeout, TLS: tc, Username: h.Username, Password: password, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("ha: %w", err)
	}
	return e, nil
}

// etcdTLS is the client TLS of the [ha] section; nil for http:// endpoints.
func etcdTLS(h *config.HA) (*tls.Config, error) {
	if len(h.Etcd) == 0 || !strings.HasPrefix(h.Etcd[0], "https://") {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if h.TLSCA != "" {
		pem, err := regfile.Read(h.TLSCA, secretfile.MaxCertFile)
		if err != nil {
			return nil, fmt.Errorf("ha.tls_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ha.tls_ca: %s holds no PEM certificate", h.TLSCA)
		}
		tc.RootCAs = pool
	}
	if h.TLSCert != "" {
		cert, err := secretfile.LoadX509KeyPair("ha.tls_cert", h.TLSCert, "ha.tls_key", h.TLSKey)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
