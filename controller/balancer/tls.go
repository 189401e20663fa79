package balancer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"flowweight/controller/config"
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
	fi, err := os.Stat(c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("controller.tls_key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o004 != 0 {
		// Others can read the private key: anyone on the host could impersonate the controller.
		return nil, fmt.Errorf("controller.tls_key: %s is readable by others (mode %04o); chmod o-rwx it", c.TLSKey, perm)
	}
	pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("controller.tls_cert/tls_key: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if c.TLSCA == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(c.TLSCA)
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
// loaded one, so a reload with renewed certificate files rotates them without dropping the
// switches already connected.
func (b *Balancer) listenerTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			if tc := b.tls.Load(); tc != nil {
				return tc, nil
			}
			return nil, errors.New("openflow listener: TLS configuration missing")
		},
	}
}
