package ofswitch

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/pki"
)

// tlsPKI is a CA, the controller's server config trusting it for client certificates, and
// a way to dial as a switch holding a certificate it issued.
type tlsPKI struct {
	t   *testing.T
	ca  *pki.CA
	srv *tls.Config
}

func newTLSPKI(t *testing.T) *tlsPKI {
	t.Helper()
	ca, err := pki.NewCA(t.TempDir(), "switch-ca")
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := ca.Issue("controller")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(ctl.CertFile, ctl.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tlsPKI{t: t, ca: ca, srv: &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}}
}

// dialAs returns a fake-switch dialer presenting a certificate with subject CN cn.
func (p *tlsPKI) dialAs(cn string) func(net.Addr) (net.Conn, error) {
	p.t.Helper()
	leaf, err := p.ca.Issue(cn)
	if err != nil {
		p.t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile)
	if err != nil {
		p.t.Fatal(err)
	}
	return func(a net.Addr) (net.Conn, error) {
		return tls.Dial(a.Network(), a.String(), &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true})
	}
}

// claimTLS connects a fake switch for dpid with a certificate for cn and reports whether
// the controller took it; a refused one is closed and counted as an identity mismatch.
func claimTLS(t *testing.T, srv *Server, h *recHandler, dial func(net.Addr) (net.Conn, error), dpid uint64) (*fakeSwitch, bool) {
	t.Helper()
	before := srv.Stats().Faults[FaultIdentityMismatch]
	f := newFake(t, dpid)
	f.dial = dial
	f.connect(srv.Addr())
	select {
	case ev := <-h.events:
		if ev.kind != "connected" || ev.sw.DatapathID() != dpid {
			t.Fatalf("handler got %s of %v", ev.kind, ev.sw)
		}
		return f, true
	case <-f.eof:
		if srv.Stats().Faults[FaultIdentityMismatch] != before+1 {
			t.Fatalf("connection for %x closed, but not counted as identity_mismatch", dpid)
		}
		return f, false
	case <-time.After(guard):
		t.Fatalf("claim of %x neither taken nor refused within %v", dpid, guard)
	}
	return nil, false
}

// TestDatapathBoundToCertificate: with TLS client certificates, a datapath id belongs to
// the certificate identity that first claimed it; another certificate is refused even after
// the first session is gone. With CertNamesDatapath, the certificate itself must name the id.
func TestDatapathBoundToCertificate(t *testing.T) {
	p := newTLSPKI(t)
	t.Run("first certificate pins the id", func(t *testing.T) {
		h := newRecHandler()
		srv, _ := testServer(t, Config{TLS: p.srv}, h)
		asA, asB := p.dialAs("switch-a"), p.dialAs("switch-b")
		a, ok := claimTLS(t, srv, h, asA, 0x50)
		if !ok {
			t.Fatal("first claim of 0x50 refused")
		}
		a.conn.Close()
		if ev := h.wait(t, "disconnected"); ev.sw.DatapathID() != 0x50 {
			t.Fatalf("disconnected %v", ev.sw)
		}
		if _, ok := claimTLS(t, srv, h, asB, 0x50); ok {
			t.Fatal("another certificate took 0x50 after its session ended")
		}
		// A renewed certificate with the same name (a new key) is the same switch.
		if _, ok := claimTLS(t, srv, h, p.dialAs("switch-a"), 0x50); !ok {
			t.Fatal("switch-a's renewed certificate refused for its own id")
		}
		if _, ok := claimTLS(t, srv, h, asB, 0x51); !ok {
			t.Fatal("switch-b refused for an id nobody holds")
		}
	})
	t.Run("certificate must name the id", func(t *testing.T) {
		h := newRecHandler()
		srv, _ := testServer(t, Config{TLS: p.srv, CertNamesDatapath: true}, h)
		tests := []struct {
			cn   string
			dpid uint64
			ok   bool
		}{
			{"0000000000000060", 0x60, true},
			{"dpid:0000000000000062", 0x62, true},
			{"0000000000000060", 0x61, false},
			{"switch-a", 0x63, false},
		}
		for _, tt := range tests {
			if _, ok := claimTLS(t, srv, h, p.dialAs(tt.cn), tt.dpid); ok != tt.ok {
				t.Errorf("certificate CN %q claiming %x: taken %v, want %v", tt.cn, tt.dpid, ok, tt.ok)
			}
		}
	})
	t.Run("needs TLS", func(t *testing.T) {
		if _, err := NewServer(Config{Listen: "127.0.0.1:0", CertNamesDatapath: true}, newRecHandler()); err == nil || !strings.Contains(err.Error(), "CertNamesDatapath") {
			t.Fatal("CertNamesDatapath accepted without TLS")
		}
	})
}

func TestLeafNamesDatapath(t *testing.T) {
	const dpid = 0xfe00_0000_00ab_cdef
	tests := []struct {
		name string
		cn   string
		dns  []string
		want bool
	}{
		{"CN is the id", "fe00000000abcdef", nil, true},
		{"CN with dpid: prefix", "dpid:fe00000000abcdef", nil, true},
		{"CN upper case", "FE00000000ABCDEF", nil, true},
		{"one of several DNS SANs (bridges of one host)", "ovs-host-1", []string{"localhost", "0000000000000001", "fe00000000abcdef"}, true},
		{"another id", "fe00000000abcdee", []string{"0000000000000001"}, false},
		{"id without leading zeros", "abcdef", nil, false},
		{"id inside a longer name", "sw-fe00000000abcdef", nil, false},
		{"nothing", "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaf := &x509.Certificate{DNSNames: tt.dns}
			leaf.Subject.CommonName = tt.cn
			if got := leafNamesDatapath(leaf, dpid); got != tt.want {
				t.Errorf("CN %q DNS %v names %016x: %v, want %v", tt.cn, tt.dns, uint64(dpid), got, tt.want)
			}
		})
	}
	if leafNamesDatapath(nil, dpid) {
		t.Error("no certificate names a datapath")
	}
}
