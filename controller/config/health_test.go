package config

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// snmpGood is good with backend "b" an snmp backend with keys (lines of the backend, such
// as health_url) and then tables (such as a [service.backend.health] table).
func snmpGood(keys, tables string) string {
	return good + "  source = \"snmp\"\n" + keys + "  [service.backend.snmp]\n  version = \"v2c\"\n  community = \"c\"\n" + tables
}

func healthTable(lines string) string { return snmpGood("", "  [service.backend.health]\n"+lines) }

func TestHealthErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, toml string
		want       []string
	}{
		{"unknown type", healthTable("  type = \"icmp\"\n"), []string{`backend "b".health.type`, `"icmp" is not one of tcp, http, https, udp`}},
		{"no type", healthTable("  port = 53\n"), []string{`backend "b".health.type`, "required"}},
		{"unknown key", healthTable("  tipe = \"tcp\"\n"), []string{`unknown key "service.backend.health.tipe"`}},
		{"udp without send", healthTable("  type = \"udp\"\n  expect = \"x\"\n"), []string{`backend "b".health.send`, "required for type \"udp\""}},
		{"udp without expect", healthTable("  type = \"udp\"\n  send_hex = \"00\"\n"), []string{`backend "b".health.expect`, "required for type \"udp\""}},
		{"udp send twice", healthTable("  type = \"udp\"\n  send = \"a\"\n  send_hex = \"61\"\n  expect = \"x\"\n"), []string{`backend "b".health.send`, "given with send_hex"}},
		{"udp bad hex", healthTable("  type = \"udp\"\n  send = \"a\"\n  expect_hex = \"0g\"\n"), []string{`backend "b".health.expect_hex`, "offset 1"}},
		{"udp with url", healthTable("  type = \"udp\"\n  send = \"a\"\n  expect = \"b\"\n  url = \"http://10.0.0.2/\"\n"), []string{`backend "b".health.url`, `only for type http or https, not "udp"`}},
		{"tls_skip_verify on http", healthTable("  type = \"http\"\n  tls_skip_verify = true\n"), []string{`backend "b".health.tls_skip_verify`, `only for type https, not "http"`}},
		{"tls_ca on tcp", healthTable("  type = \"tcp\"\n  tls_ca = \"/ca.pem\"\n"), []string{`backend "b".health.tls_ca`, "only for type https"}},
		{"server_name on udp", healthTable("  type = \"udp\"\n  send = \"a\"\n  expect = \"b\"\n  server_name = \"x\"\n"), []string{`backend "b".health.server_name`, "only for type https"}},
		{"send on tcp", healthTable("  type = \"tcp\"\n  send = \"a\"\n"), []string{`backend "b".health.send`, `only for type udp, not "tcp"`}},
		{"skip verify with a CA", healthTable("  type = \"https\"\n  tls_ca = \"/ca.pem\"\n  tls_skip_verify = true\n"), []string{`backend "b".health.tls_skip_verify`, "given with tls_ca"}},
		{"url scheme is not the type", healthTable("  type = \"https\"\n  url = \"http://10.0.0.2/\"\n"), []string{`backend "b".health.url`, `the scheme must be the type, "https"`}},
		{"url not http", healthTable("  url = \"ftp://10.0.0.2/\"\n"), []string{`backend "b".health.url`, "not an http(s) URL"}},
		{"url without host", healthTable("  url = \"http:///x\"\n"), []string{`backend "b".health.url`, "no host"}},
		{"port with url", healthTable("  url = \"http://10.0.0.2/\"\n  port = 81\n"), []string{`backend "b".health.port`, "given with url"}},
		{"port out of range", healthTable("  type = \"tcp\"\n  port = 70000\n"), []string{`backend "b".health.port`, "outside 1-65535"}},
		{"bad expect_status", healthTable("  type = \"http\"\n  expect_status = \"ok\"\n"), []string{`backend "b".health.expect_status`, "not a status"}},
		{"health_url with [health]", snmpGood("  health_url = \"http://10.0.0.2/\"\n", "  [service.backend.health]\n  type = \"tcp\"\n"), []string{`backend "b".health_url`, "given together with [health]"}},
		{"snmp without a check", snmpGood("", ""), []string{`backend "b".health`, `required for source "snmp"`}},
		{"health_url not http", snmpGood("  health_url = \"ftp://10.0.0.2/\"\n", ""), []string{`backend "b".health_url`, "not an http(s) URL"}},
		{"probe backend with [health]", good + "  [service.backend.health]\n  type = \"tcp\"\n", []string{`backend "b".health`, `given but source is "probe"`}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(tt.toml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestHealthUDPService: a UDP service can be checked only by a udp check: the health error
// names the key and the protocol, and a udp check raises no error at all.
func TestHealthUDPService(t *testing.T) {
	cases := []struct {
		name, toml string
		want       string // "" for no health error
	}{
		{"tcp check", healthTable("  type = \"tcp\"\n"), `service "web".backend "b".health.type: "tcp" checks over TCP, but the service's protocol is "udp"`},
		{"http check", healthTable("  type = \"http\"\n"), `service "web".backend "b".health.type: "http" checks over TCP, but the service's protocol is "udp"`},
		{"https by url", healthTable("  url = \"https://10.0.0.2/\"\n"), `backend "b".health.type: "https" checks over TCP, but the service's protocol is "udp"`},
		{"health_url", snmpGood("  health_url = \"http://10.0.0.2/\"\n", ""), `backend "b".health_url: an HTTP check over TCP, but the service's protocol is "udp"`},
		{"udp check", healthTable("  type = \"udp\"\n  send = \"ping\"\n  expect = \"pong\"\n"), ""},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("t.toml", []byte(tt.toml))
			if err != nil {
				t.Fatal(err)
			}
			c.Services[0].Protocol = "udp"
			err = c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("a udp check on a udp service is refused:\n%v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error lacks %q:\n%v", tt.want, err)
			}
		})
	}
}

func writeCA(t *testing.T, dir string) (path string, pemBytes []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "svc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	path = filepath.Join(dir, "ca"+strconv.Itoa(int(time.Now().UnixNano()%1e9))+".pem")
	if err := os.WriteFile(path, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, pemBytes
}

func TestHealthCAReadAtLoad(t *testing.T) {
	dir := t.TempDir()
	caPath, caPEM := writeCA(t, dir)
	notPEM := filepath.Join(dir, "key.txt")
	if err := os.WriteFile(notPEM, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, ca string
		err      []string // nil: loads
	}{
		{"readable CA", caPath, nil},
		{"missing file", filepath.Join(dir, "nope.pem"), []string{`backend "b".health.tls_ca`, "no such file"}},
		{"not PEM", notPEM, []string{`backend "b".health.tls_ca`, notPEM, "not PEM"}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			text := healthTable("  type = \"https\"\n  tls_ca = " + strconv.Quote(tt.ca) + "\n")
			path := filepath.Join(dir, "c.toml")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path)
			if tt.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if h := c.Services[0].Backends[1].Health; !bytes.Equal(h.caPEM, caPEM) {
					t.Errorf("tls_ca not kept: %q", h.caPEM)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tt.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// Parse reads no file: the same text is valid there.
			if _, err := Parse("t.toml", []byte(text)); err != nil {
				t.Errorf("Parse: %v", err)
			}
		})
	}
}

// TestHealthKey: what a check depends on, the CA's content included, changes the key; the
// key of health_url is that of the same URL in a table.
func TestHealthKey(t *testing.T) {
	key := func(text string, ca []byte) string {
		t.Helper()
		c, err := Parse("t.toml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		b := &c.Services[0].Backends[1]
		if ca != nil {
			b.Health.caPEM = ca
		}
		return b.HealthKey()
	}
	https := healthTable("  type = \"https\"\n  tls_ca = \"/ca.pem\"\n")
	if key(https, []byte("one")) == key(https, []byte("two")) {
		t.Error("a new CA content keeps the key")
	}
	if key(healthTable("  type = \"udp\"\n  send = \"a\"\n  expect = \"b\"\n"), nil) == key(healthTable("  type = \"udp\"\n  send = \"a\"\n  expect = \"c\"\n"), nil) {
		t.Error("a new expect keeps the key")
	}
	if a, b := key(snmpGood("  health_url = \"http://10.0.0.2/h\"\n", ""), nil), key(healthTable("  url = \"http://10.0.0.2/h\"\n"), nil); a != b {
		t.Errorf("health_url %s, [health] url %s", a, b)
	}
}

func TestHealthWarnings(t *testing.T) {
	c, err := Parse("t.toml", []byte(healthTable("  type = \"https\"\n  tls_skip_verify = true\n")))
	if err != nil {
		t.Fatal(err)
	}
	w := c.HealthWarnings()
	if len(w) != 1 || !strings.Contains(w[0], `service "web".backend "b".health.tls_skip_verify`) || !strings.Contains(w[0], "tls_ca") {
		t.Errorf("warnings %q", w)
	}
	c, err = Parse("t.toml", []byte(healthTable("  type = \"https\"\n")))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.HealthWarnings(); len(w) != 0 {
		t.Errorf("warnings without tls_skip_verify: %q", w)
	}
}
