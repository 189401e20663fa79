package balancer

import (
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"flowweight/controller/config"
	"flowweight/e2e/pki"
	"flowweight/internal/testutil"
)

func TestLoadTLS(t *testing.T) {
	dir := t.TempDir()
	m, err := pki.NewMutual(dir)
	if err != nil {
		t.Fatal(err)
	}
	ca, ctl := m.CA, m.Controller
	open := filepath.Join(dir, "open.key")
	raw, _ := os.ReadFile(ctl.KeyFile)
	if err := os.WriteFile(open, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		c       config.Controller
		want    string // error substring; "" for success
		mutual  bool
		enabled bool
	}{
		{"off", config.Controller{}, "", false, false},
		{"server only", config.Controller{TLSCert: ctl.CertFile, TLSKey: ctl.KeyFile}, "", false, true},
		{"mutual", config.Controller{TLSCert: ctl.CertFile, TLSKey: ctl.KeyFile, TLSCA: ca.CertFile}, "", true, true},
		{"key readable by others", config.Controller{TLSCert: ctl.CertFile, TLSKey: open}, "controller.tls_key: " + open + ": readable by others", false, false},
		// A FIFO at any of the paths is refused at once, named, instead of hanging the read.
		{"cert a FIFO", config.Controller{TLSCert: fifo, TLSKey: ctl.KeyFile}, "controller.tls_cert: open " + fifo + ": not a regular file", false, false},
		{"key a FIFO", config.Controller{TLSCert: ctl.CertFile, TLSKey: fifo}, "controller.tls_key: " + fifo + ": not a regular file", false, false},
		{"ca a FIFO", config.Controller{TLSCert: ctl.CertFile, TLSKey: ctl.KeyFile, TLSCA: fifo}, "controller.tls_ca: open " + fifo + ": not a regular file", false, false},
		{"missing key", config.Controller{TLSCert: ctl.CertFile, TLSKey: filepath.Join(dir, "none.key")}, "controller.tls_key", false, false},
		{"cert not PEM", config.Controller{TLSCert: junk, TLSKey: ctl.KeyFile}, "controller.tls_cert/controller.tls_key", false, false},
		{"key of another cert", config.Controller{TLSCert: ca.CertFile, TLSKey: ctl.KeyFile}, "controller.tls_cert/controller.tls_key", false, false},
		{"ca not PEM", config.Controller{TLSCert: ctl.CertFile, TLSKey: ctl.KeyFile, TLSCA: junk}, "controller.tls_ca: " + junk + " holds no PEM certificate", false, false},
		{"ca missing", config.Controller{TLSCert: ctl.CertFile, TLSKey: ctl.KeyFile, TLSCA: filepath.Join(dir, "none.crt")}, "controller.tls_ca", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc, err := loadTLS(c.c)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want one containing %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tc != nil) != c.enabled {
				t.Fatalf("TLS config %v, want enabled=%v", tc, c.enabled)
			}
			if tc != nil && (tc.ClientAuth == tls.RequireAndVerifyClientCert) != c.mutual {
				t.Fatalf("ClientAuth %v, want mutual=%v", tc.ClientAuth, c.mutual)
			}
		})
	}
}

// TestTLSReloadRotatesCertificate: the listener requires a client certificate from the CA,
// and after renewed files and a reload, the next handshake presents the new certificate.
func TestTLSReloadRotatesCertificate(t *testing.T) {
	dir := t.TempDir()
	m, err := pki.NewMutual(dir)
	if err != nil {
		t.Fatal(err)
	}
	ca, ctl, sw, stranger := m.CA, m.Controller, m.Switch, m.Stranger
	withTLS := func() *config.Config {
		c := testConfig(t, "")
		c.Controller.TLSCert, c.Controller.TLSKey, c.Controller.TLSCA = ctl.CertFile, ctl.KeyFile, ca.CertFile
		return c
	}
	b, err := New(withTLS(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", listenerTLS(&b.tls))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Serve(t, ln, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if c.(*tls.Conn).Handshake() == nil {
			c.Write([]byte{1})
		}
	})
	roots := x509.NewCertPool()
	pem, _ := os.ReadFile(ca.CertFile)
	roots.AppendCertsFromPEM(pem)
	// dial returns the serial of the certificate the listener presented, after a byte that
	// the server writes only when it accepted the client's certificate.
	dial := func(client *pki.Leaf) (*big.Int, error) {
		cert, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(),
			&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			return nil, err
		}
		return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
	}

	got, err := dial(sw)
	if err != nil {
		t.Fatalf("switch with a certificate from the CA: %v", err)
	}
	if got.Cmp(ctl.Serial) != 0 {
		t.Fatalf("listener presented serial %v, want %v", got, ctl.Serial)
	}
	if _, err := dial(stranger); err == nil {
		t.Fatal("a switch certificate from another CA was accepted")
	}

	renewed, err := ca.Issue("controller") // same paths, new key and serial
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(withTLS()); err != nil {
		t.Fatalf("reload with renewed files: %v", err)
	}
	if got, err = dial(sw); err != nil || got.Cmp(renewed.Serial) != 0 {
		t.Fatalf("after reload: serial %v (%v), want the renewed %v", got, err, renewed.Serial)
	}

	off := testConfig(t, "")
	if err := b.Reload(off); err == nil || !strings.Contains(err.Error(), "controller.tls_cert") {
		t.Fatalf("reload turning TLS off: %v", err)
	}
	broken := withTLS()
	broken.Controller.TLSCA = filepath.Join(dir, "missing-ca.crt")
	if err := b.Reload(broken); err == nil || !strings.Contains(err.Error(), "controller.tls_ca") {
		t.Fatalf("reload with a missing CA: %v", err)
	}
	if got, err = dial(sw); err != nil || got.Cmp(renewed.Serial) != 0 {
		t.Fatalf("after rejected reloads: serial %v (%v), want the renewed %v still", got, err, renewed.Serial)
	}
}
