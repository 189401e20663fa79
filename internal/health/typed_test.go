package health

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"flowweight/internal/testutil"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// selfSigned returns a PEM certificate valid for 127.0.0.1 and the name "svc.test", and the
// tls.Certificate serving it, as a self-signed service would have.
func selfSigned(t testing.TB) (certPEM []byte, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "svc.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"svc.test"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err = tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, cert
}

// closedPort returns a loopback address of the network ("tcp" or "udp") that nothing
// listens on: one the kernel just handed out and that was closed again.
func closedPort(t *testing.T, network string) string {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().String()
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestTCPCheck(t *testing.T) {
	listening := testutil.TCPServer(t, nil)
	tests := []struct {
		name, addr string
		ok         bool
		err        string
	}{
		{"listening", listening, true, ""},
		{"closed port", closedPort(t, "tcp"), false, "tcp connect 127.0.0.1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewTCP(TCPSpec{Addr: tt.addr, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			r := c.Check(context.Background())
			if r.OK != tt.ok || !strings.Contains(r.Err, tt.err) || (tt.ok && r.Err != "") {
				t.Errorf("got %+v, want ok=%v err~%q", r, tt.ok, tt.err)
			}
			if !tt.ok && !strings.Contains(r.Err, "connection refused") {
				t.Errorf("reason %q does not say the connection was refused", r.Err)
			}
			if r.Latency <= 0 {
				t.Errorf("latency %v", r.Latency)
			}
		})
	}
}

func TestUDPCheck(t *testing.T) {
	echo := testutil.UDPResponder(t, func(b []byte) []byte { return append([]byte("answer:"), b...) })
	silent := testutil.UDPResponder(t, func([]byte) []byte { return nil })
	binary := testutil.UDPResponder(t, func(b []byte) []byte {
		if bytes.Equal(b, []byte{0xde, 0xad, 0x00}) {
			return []byte{0x01, 0xbe, 0xef, 0x00, 0xff}
		}
		return []byte{0}
	})
	tests := []struct {
		name, addr   string
		send, expect []byte
		timeout      time.Duration
		ok           bool
		err          string
	}{
		{"answer holds expect", echo, []byte("ping"), []byte("answer:ping"), 5 * time.Second, true, ""},
		{"answer lacks expect", echo, []byte("ping"), []byte("pong"), 5 * time.Second, false, `lacks "pong"`},
		{"binary payload", binary, []byte{0xde, 0xad, 0x00}, []byte{0xbe, 0xef, 0x00}, 5 * time.Second, true, ""},
		{"binary wrong answer", binary, []byte{0xde, 0xad}, []byte{0xbe, 0xef}, 5 * time.Second, false, `lacks "\xbe\xef"`},
		{"closed port", closedPort(t, "udp"), []byte("ping"), []byte("pong"), 5 * time.Second, false, "connection refused (ICMP port unreachable"},
		{"no answer", silent, []byte("ping"), []byte("pong"), 200 * time.Millisecond, false, "no answer: timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewUDP(UDPSpec{Addr: tt.addr, Timeout: tt.timeout, Send: tt.send, Expect: tt.expect})
			if err != nil {
				t.Fatal(err)
			}
			r := c.Check(context.Background())
			if r.OK != tt.ok || !strings.Contains(r.Err, tt.err) || (tt.ok && r.Err != "") {
				t.Errorf("got %+v, want ok=%v err~%q", r, tt.ok, tt.err)
			}
			if !tt.ok && !strings.HasPrefix(r.Err, "udp "+tt.addr+": ") {
				t.Errorf("reason %q does not name the check", r.Err)
			}
			if r.Latency <= 0 {
				t.Errorf("latency %v", r.Latency)
			}
		})
	}
}

func TestUDPCheckCancelled(t *testing.T) {
	silent := testutil.UDPResponder(t, func([]byte) []byte { return nil })
	c, err := NewUDP(UDPSpec{Addr: silent, Timeout: time.Hour, Send: []byte("x"), Expect: []byte("y")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := c.Check(ctx); r.OK || r.Err == "" {
		t.Errorf("a cancelled check passed: %+v", r)
	}
}

func TestNewTypedRejects(t *testing.T) {
	tests := []struct {
		name string
		new  func() error
		err  string
	}{
		{"tcp no port", func() error { _, err := NewTCP(TCPSpec{Addr: "127.0.0.1", Timeout: time.Second}); return err }, "missing port"},
		{"tcp no timeout", func() error { _, err := NewTCP(TCPSpec{Addr: "127.0.0.1:1"}); return err }, "timeout"},
		{"udp no send", func() error {
			_, err := NewUDP(UDPSpec{Addr: "127.0.0.1:1", Timeout: time.Second, Expect: []byte("x")})
			return err
		}, "health.send"},
		{"udp no expect", func() error {
			_, err := NewUDP(UDPSpec{Addr: "127.0.0.1:1", Timeout: time.Second, Send: []byte("x")})
			return err
		}, "health.expect"},
		{"udp huge send", func() error {
			_, err := NewUDP(UDPSpec{Addr: "127.0.0.1:1", Timeout: time.Second, Send: make([]byte, MaxPayload+1), Expect: []byte("x")})
			return err
		}, "health.send"},
		{"tls on http", func() error {
			_, err := New(Spec{URL: "http://127.0.0.1/", Timeout: time.Second, ExpectStatus: "200", TLSSkipVerify: true})
			return err
		}, "need an https URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.new(); err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("got %v, want an error with %q", err, tt.err)
			}
		})
	}
}

func TestHTTPSCheck(t *testing.T) {
	certPEM, cert := selfSigned(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ready")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	ca, err := ParseCA(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, _ := selfSigned(t)
	other, err := ParseCA(otherPEM)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		skip       bool
		roots      *x509.CertPool
		serverName string
		ok         bool
		err        string
	}{
		{"system roots refuse a self-signed certificate", false, nil, "", false, "certificate signed by unknown authority"},
		{"another CA refuses it", false, other, "", false, "certificate signed by unknown authority"},
		{"its CA accepts it", false, ca, "", true, ""},
		{"its CA, the name it carries", false, ca, "svc.test", true, ""},
		{"its CA, a name it does not carry", false, ca, "other.test", false, "not other.test"},
		{"skip verify accepts it", true, nil, "", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Spec{URL: srv.URL + "/", Timeout: 5 * time.Second, ExpectStatus: "200", BodyContains: "ready",
				TLSSkipVerify: tt.skip, RootCAs: tt.roots, ServerName: tt.serverName})
			if err != nil {
				t.Fatal(err)
			}
			r := c.Check(context.Background())
			if r.OK != tt.ok || !strings.Contains(r.Err, tt.err) || (tt.ok && r.Err != "") {
				t.Errorf("got %+v, want ok=%v err~%q", r, tt.ok, tt.err)
			}
			if tt.ok && r.Status != 200 {
				t.Errorf("status %d", r.Status)
			}
		})
	}
}

func TestParseCA(t *testing.T) {
	certPEM, _ := selfSigned(t)
	tests := []struct {
		name string
		in   []byte
		err  string
	}{
		{"one certificate", certPEM, ""},
		{"two certificates", append(append([]byte{}, certPEM...), certPEM...), ""},
		{"empty", nil, "no certificate"},
		{"not PEM", []byte("hello\n"), "not PEM"},
		{"a key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}}), `block 1 is a "EC PRIVATE KEY"`},
		{"bad certificate", append(append([]byte{}, certPEM...), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}})...), "PEM block 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCA(tt.in)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("got %v, want %q", err, tt.err)
			}
		})
	}
}

func TestParseHex(t *testing.T) {
	tests := []struct {
		in   string
		want []byte
		err  string
	}{
		{"00", []byte{0}, ""},
		{"deadBEEF", []byte{0xde, 0xad, 0xbe, 0xef}, ""},
		{"de ad\tbe\nef", []byte{0xde, 0xad, 0xbe, 0xef}, ""},
		{"de:ad:00", []byte{0xde, 0xad, 0}, ""},
		{"", nil, "no hex digits"},
		{"  :", nil, "no hex digits"},
		{"abc", nil, "offset 2: a lone hex digit"},
		{"a bc", nil, "offset 1: ' ' follows"},
		{"zz", nil, "'z' at offset 0 is not a hex digit"},
		{"0x01", nil, "offset 1: 'x' follows"},
	}
	for _, tt := range tests {
		got, err := ParseHex(tt.in)
		if tt.err == "" && (err != nil || !bytes.Equal(got, tt.want)) || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseHex(%q) = %x, %v; want %x, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// FuzzParseHex: any input either parses to bytes whose hex parses back the same, or is
// refused; any byte string's hex encoding parses back to it.
func FuzzParseHex(f *testing.F) {
	for _, s := range []string{"00", "de ad", "de:ad:be:ef", "abc", "", "0x1", "ÿÿ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseHex(s)
		if err != nil {
			if b != nil {
				t.Fatalf("error %v with bytes %x", err, b)
			}
		} else {
			again, err := ParseHex(hex.EncodeToString(b))
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("%q -> %x -> %x, %v", s, b, again, err)
			}
		}
		if len(s) > 0 {
			back, err := ParseHex(hex.EncodeToString([]byte(s)))
			if err != nil || !bytes.Equal(back, []byte(s)) {
				t.Fatalf("hex of %q -> %x, %v", s, back, err)
			}
		}
	})
}

// FuzzParseCA: any input is either a pool or an error, never a panic, and a pool comes only
// from input holding a CERTIFICATE block.
func FuzzParseCA(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("not pem"))
	f.Add([]byte{})
	certPEM, _ := selfSigned(f)
	f.Add(certPEM)
	f.Fuzz(func(t *testing.T, data []byte) {
		pool, err := ParseCA(data)
		if (pool == nil) == (err == nil) {
			t.Fatalf("pool %v, err %v", pool != nil, err)
		}
		if err == nil && !bytes.Contains(data, []byte("CERTIFICATE")) {
			t.Fatalf("a pool from %q", data)
		}
	})
}
