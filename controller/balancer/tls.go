package balancer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"

	"flowweight/controller/config"
	"flowweight/internal/regfile"
	"flowweight/internal/secretfile"
)

// loadTLS reads the OpenFlow listener's certificate, key and optional client CA bundle.
// It returns nil when TLS is off. With a CA bundle the listener requires every switch to
// present a certificate that bundle signed: Open vSwitch always sends one once `ovs-vsctl
// set-ssl` is done, so mutual TLS costs the operator nothing and keeps a stranger with
// network access from programming groups. Errors name the key at fault.
func loadTLS(c config.Controller) (*tls.Config, error) {
	if c.TLSCert == "" {
		return nil, nil
	}
	// A key others can read lets anyone on the host impersonate the controller; a FIFO at
	// either path must not hang start-up or a reload.
	pair, err := secretfile.LoadX509KeyPair("controller.tls_cert", c.TLSCert, "controller.tls_key", c.TLSKey)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if c.TLSCA == "" {
		return tc, nil
	}
	pem, err := regfile.Read(c.TLSCA, secretfile.MaxCertFile)
	if err != nil {
		return nil, fmt.Errorf("controller.tls_ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("controller.tls_ca: %s holds no PEM certificate", c.TLSCA)
	}
	tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	return tc, nil
}

// listenerTLS is the listener's fixed tls.Config: each handshake takes the most recently
// loaded one (cur, which a reload replaces), so a reload with renewed certificate files
// rotates them without dropping the switches already connected.
func listenerTLS(cur *atomic.Pointer[tls.Config]) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			if tc := cur.Load(); tc != nil {
				return tc, nil
			}
			return nil, errors.New("openflow listener: TLS configuration missing")
		},
	}
}
