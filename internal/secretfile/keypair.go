package secretfile

import (
	"crypto/tls"
	"fmt"

	"flowweight/internal/regfile"
)

// Bounds on certificate files: a chain and a key are kilobytes; a larger file is the wrong
// path and must not be read whole.
const (
	MaxCertFile = 1 << 20
	MaxKeyFile  = 64 << 10
)

// LoadX509KeyPair is tls.LoadX509KeyPair with flowweight's checks: both paths must be regular
// files (opened without blocking, so a FIFO cannot hang the caller), bounded in size, and the
// private key passes Read's mode checks (not readable by others, not writable by group or
// others). certKey and keyKey are the configuration keys to name in errors.
func LoadX509KeyPair(certKey, certPath, keyKey, keyPath string) (tls.Certificate, error) {
	cert, err := regfile.Read(certPath, MaxCertFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", certKey, err)
	}
	key, err := Read(keyPath, MaxKeyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %s: %w", keyKey, keyPath, err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s/%s: %s, %s: %w", certKey, keyKey, certPath, keyPath, err)
	}
	return pair, nil
}
