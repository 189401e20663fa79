package ofswitch

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"
)

// sanCA is an in-memory switch CA that issues client certificates with DNS SANs, as an
// operator does for a host whose bridges share one Open vSwitch certificate.
type sanCA struct {
	t    *testing.T
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	srv  *tls.Config
}

func newSanCA(t *testing.T) *sanCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "switch-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &sanCA{t: t, key: key, cert: cert}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	ca.srv = &tls.Config{Certificates: []tls.Certificate{ca.issue("controller", nil)}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	return ca
}

func (ca *sanCA) issue(cn string, dns []string) tls.Certificate {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// dialAs is a fake-switch dialer presenting a certificate for cn with DNS SANs dns.
func (ca *sanCA) dialAs(cn string, dns ...string) func(net.Addr) (net.Conn, error) {
	pair := ca.issue(cn, dns)
	return func(a net.Addr) (net.Conn, error) {
		return tls.Dial(a.Network(), a.String(), &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true})
	}
}

// claim connects a fake switch for dpid through dial and reports whether it was taken; a
// taken one is disconnected again unless keep.
func (ca *sanCA) claim(srv *Server, h *recHandler, dial func(net.Addr) (net.Conn, error), dpid uint64, keep bool) bool {
	t := ca.t
	t.Helper()
	f := newFake(t, dpid)
	f.dial = dial
	f.connect(srv.Addr())
	select {
	case ev := <-h.events:
		if ev.kind != "connected" || ev.sw.DatapathID() != dpid {
			t.Fatalf("handler got %s of %v", ev.kind, ev.sw)
		}
		if !keep {
			f.conn.Close()
			h.wait(t, "disconnected")
		}
		return true
	case <-f.eof:
		return false
	case <-time.After(guard):
		t.Fatalf("claim of %x neither taken nor refused within %v", dpid, guard)
	}
	return false
}

func hexIDs(from, n uint64) []string {
	var out []string
	for id := from; id < from+n; id++ {
		out = append(out, fmt.Sprintf("%016x", id))
	}
	return out
}

// TestOneCertificateCannotExhaustBindings: one certificate claiming many datapath ids one
// after another (MaxSwitches 2, so 8 bindings) used to fill the binding table for the life
// of the process, and a new switch with another valid certificate was refused
// (too_many_switches). Now a certificate that names its ids needs no binding kept, and a
// first-claim binding is capped per certificate, its own oldest unconnected binding making
// room for its next.
func TestOneCertificateCannotExhaustBindings(t *testing.T) {
	tests := []struct {
		name      string
		certNames bool
	}{
		{"certificate names the ids (tls_names_dpid)", true},
		{"first claim binds the id", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca := newSanCA(t)
			h := newRecHandler()
			srv, _ := testServer(t, Config{TLS: ca.srv, CertNamesDatapath: tt.certNames, MaxSwitches: 2}, h)
			greedy := ca.dialAs("greedy-host", hexIDs(1, 12)...)
			for id := uint64(1); id <= 12; id++ {
				if !ca.claim(srv, h, greedy, id, false) {
					t.Fatalf("claim of %x by its own certificate refused", id)
				}
			}
			srv.mu.Lock()
			n := len(srv.pins)
			srv.mu.Unlock()
			if want := 2; !tt.certNames && n > want {
				t.Errorf("one certificate holds %d bindings, want at most %d", n, want)
			}
			if !ca.claim(srv, h, ca.dialAs("0000000000000099"), 0x99, true) {
				t.Fatal("a new switch with another valid certificate refused after one certificate's churn")
			}
			if got := srv.Stats().Faults[FaultTooManySwitches]; got != 0 {
				t.Errorf("too_many_switches = %d, want 0", got)
			}
		})
	}
}

// TestPinsBounded: first-claim bindings outlive sessions, so their number is bounded
// (4×MaxSwitches). With the table full of bindings of switches seen recently, a new id is
// refused; once a binding's datapath has been away for BindingIdleTimeout it lapses to make
// room, the least recently seen first, and a connected switch's binding never lapses.
func TestPinsBounded(t *testing.T) {
	ca := newSanCA(t)
	h := newRecHandler()
	srv, clk := testServer(t, Config{TLS: ca.srv, MaxSwitches: 2}, h)
	owners := map[uint64]func(net.Addr) (net.Conn, error){}
	for id := uint64(1); id <= 8; id++ {
		owners[id] = ca.dialAs(fmt.Sprintf("switch-%d", id))
		if !ca.claim(srv, h, owners[id], id, id == 1) { // switch 1 stays connected
			t.Fatalf("claim of %x refused", id)
		}
		clk.Advance(time.Minute)
	}
	late := ca.dialAs("switch-9")
	if ca.claim(srv, h, late, 9, false) {
		t.Fatal("ninth datapath id taken with the bindings full and none idle")
	}
	if n := srv.Stats().Faults[FaultTooManySwitches]; n != 1 {
		t.Errorf("too_many_switches = %d, want 1", n)
	}
	if ca.claim(srv, h, late, 2, false) {
		t.Fatal("another certificate took a bound id")
	}
	clk.Advance(time.Hour)
	// Switch 1 was bound first but is connected, so switch 2's binding, seen longest ago,
	// makes room.
	if !ca.claim(srv, h, late, 9, false) {
		t.Fatal("ninth id refused although idle bindings could lapse")
	}
	srv.mu.Lock()
	_, has1 := srv.pins[1]
	_, has2 := srv.pins[2]
	n := len(srv.pins)
	srv.mu.Unlock()
	if !has1 || has2 || n != 8 {
		t.Errorf("binding of 1 kept %v, of 2 kept %v, %d bindings; want the connected one kept, the least recently seen gone, 8", has1, has2, n)
	}
	if !ca.claim(srv, h, owners[3], 3, false) {
		t.Error("a bound id refused for its own certificate")
	}
}
