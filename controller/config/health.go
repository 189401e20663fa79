package config

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"flowweight/configs"
	"flowweight/internal/health"
	"flowweight/internal/regfile"
)

// HealthCheck is a probe-less backend's [service.backend.health] table: how the collector
// checks the service itself, by type, as HAProxy's and Envoy's health checks do. The
// older health_url is the same as a table with only url (type http or https from its
// scheme); the two cannot be given together.
type HealthCheck struct {
	// Type is tcp (the port accepts a connection), http or https (a GET judged by status and
	// body), or udp (a datagram sent, an answer holding expect awaited). Default: the url's
	// scheme when url is given; otherwise required.
	Type string `toml:"type"`
	// Port is the port checked; default the backend's service port. Not with url, which
	// names its own.
	Port int `toml:"port"`

	// http and https: URL is what to GET, default scheme://ip:port/; ExpectStatus the
	// accepted codes, default "200-399"; BodyContains text the first 64 KiB of the body must
	// hold.
	URL          string `toml:"url"`
	ExpectStatus string `toml:"expect_status"`
	BodyContains string `toml:"body_contains"`

	// https only: TLSCA is a PEM bundle that signed the service's certificate (for
	// self-signed services; read when the configuration loads); TLSSkipVerify accepts any
	// certificate (warned at start); ServerName is the name the certificate must carry,
	// default the URL's host.
	TLSCA         string `toml:"tls_ca"`
	TLSSkipVerify bool   `toml:"tls_skip_verify"`
	ServerName    string `toml:"server_name"`

	// udp only: the request (text, or hex with send_hex) and what the answer must contain
	// (expect, or expect_hex); one of each is required. Text is sent as its UTF-8 bytes;
	// the hex forms carry bytes a TOML string cannot ("00 01 ab", "de:ad").
	Send      string `toml:"send"`
	SendHex   string `toml:"send_hex"`
	Expect    string `toml:"expect"`
	ExpectHex string `toml:"expect_hex"`

	// caPEM is tls_ca's content and caPool the certificates in it, read by Load (Parse
	// leaves them nil and RootCAs reads the file).
	caPEM  []byte
	caPool *x509.CertPool
	// send and expect are the udp payloads as bytes, from the text or the hex form, set by
	// Validate (which parses the hex once).
	send, expect []byte
}

// Health check types (health.type).
const (
	HealthTCP   = "tcp"
	HealthHTTP  = "http"
	HealthHTTPS = "https"
	HealthUDP   = "udp"
)

// EffectiveHealth is the collector's check of b: its [health] table, or health_url as a
// table with only url, or nil when the backend has neither (a probe backend). Valid only
// after Validate.
func (b *Backend) EffectiveHealth() *HealthCheck {
	if b.Health != nil {
		h := *b.Health
		if h.Type == "" {
			h.Type = schemeOf(h.URL)
		}
		return &h
	}
	if b.HealthURL != "" {
		return &HealthCheck{Type: schemeOf(b.HealthURL), URL: b.HealthURL}
	}
	return nil
}

func schemeOf(rawURL string) string {
	scheme, _, _ := strings.Cut(rawURL, "://")
	return strings.ToLower(scheme)
}

// validateHealth checks the health keys of backend b of service s (the hook Validate calls
// for every backend): an snmp backend needs a check the collector can run, a probe backend
// has none (its probe checks), and the check must suit the service's protocol.
func validateHealth(p *configs.Problems, bkey string, s *Service, b *Backend) {
	if b.Source != "snmp" {
		if b.Health != nil {
			p.Addf(bkey+".health", "given but source is %q: the probe checks its service itself (its own [health] table)", b.Source)
		}
		if b.HealthURL != "" {
			p.Addf(bkey+".health_url", "given but source is %q: the probe checks its service itself (its own [health] table)", b.Source)
		}
		return
	}
	switch {
	case b.Health != nil && b.HealthURL != "":
		p.Addf(bkey+".health_url", "given together with [health]: move the URL to health.url")
		return
	case b.Health == nil && b.HealthURL == "":
		p.Addf(bkey+".health", "required for source \"snmp\": the collector checks health itself (a [health] table, or health_url)")
		return
	case b.Health == nil:
		if t := schemeOf(b.HealthURL); t != HealthHTTP && t != HealthHTTPS {
			p.Addf(bkey+".health_url", "%q is not an http(s) URL", health.RedactURL(b.HealthURL))
		} else if err := checkURL(b.HealthURL, t); err != nil {
			p.Addf(bkey+".health_url", "%v", err)
		} else if s.Protocol == "udp" {
			p.Addf(bkey+".health_url", "an HTTP check over TCP, but the service's protocol is \"udp\": use a [health] table with type = \"udp\"")
		}
		return
	}
	h, key := b.Health, bkey+".health"
	typ := h.Type
	if typ == "" {
		if h.URL == "" {
			p.Addf(key+".type", "required: one of tcp, http, https, udp (or give url, whose scheme is the type)")
			return
		}
		typ = schemeOf(h.URL)
		if typ != HealthHTTP && typ != HealthHTTPS {
			p.Addf(key+".url", "%q is not an http(s) URL", health.RedactURL(h.URL))
			return
		}
	}
	switch typ {
	case HealthTCP, HealthHTTP, HealthHTTPS:
		if s.Protocol == "udp" {
			p.Addf(key+".type", "%q checks over TCP, but the service's protocol is \"udp\": use type = \"udp\" with send and expect", typ)
		}
	case HealthUDP:
	default:
		p.Addf(key+".type", "%q is not one of tcp, http, https, udp", h.Type)
		return
	}
	if h.Port != 0 {
		checkPort(p, key+".port", h.Port)
		if h.URL != "" {
			p.Addf(key+".port", "given with url, which names its own port")
		}
	}
	only := func(set bool, name, types string) {
		if set {
			p.Addf(key+"."+name, "only for type %s, not %q", types, typ)
		}
	}
	http := typ == HealthHTTP || typ == HealthHTTPS
	if http {
		if h.URL != "" {
			if schemeOf(h.URL) != typ {
				p.Addf(key+".url", "%q: the scheme must be the type, %q", health.RedactURL(h.URL), typ)
			} else if err := checkURL(h.URL, typ); err != nil {
				p.Addf(key+".url", "%v", err)
			}
		}
		if h.ExpectStatus != "" {
			if _, err := health.ParseStatusRanges(h.ExpectStatus); err != nil {
				p.Add(key+".expect_status", err)
			}
		}
	} else {
		only(h.URL != "", "url", "http or https")
		only(h.ExpectStatus != "", "expect_status", "http or https")
		only(h.BodyContains != "", "body_contains", "http or https")
	}
	if typ == HealthHTTPS {
		if h.TLSSkipVerify && h.TLSCA != "" {
			p.Addf(key+".tls_skip_verify", "given with tls_ca: verify against the CA, or do not verify; drop one")
		}
	} else {
		only(h.TLSSkipVerify, "tls_skip_verify", "https")
		only(h.TLSCA != "", "tls_ca", "https")
		only(h.ServerName != "", "server_name", "https")
	}
	if typ == HealthUDP {
		h.send = payload(p, key, "send", h.Send, h.SendHex)
		h.expect = payload(p, key, "expect", h.Expect, h.ExpectHex)
	} else {
		only(h.Send != "", "send", "udp")
		only(h.SendHex != "", "send_hex", "udp")
		only(h.Expect != "", "expect", "udp")
		only(h.ExpectHex != "", "expect_hex", "udp")
	}
}

// payload checks one udp payload given as text (name) or hex (name_hex): exactly one. It
// returns the payload's bytes, nil when it is not valid.
func payload(p *configs.Problems, key, name, text, hexText string) []byte {
	switch {
	case text != "" && hexText != "":
		p.Addf(key+"."+name, "given with %s_hex: give the payload once, as text or as hex", name)
	case text == "" && hexText == "":
		p.Addf(key+"."+name, "required for type \"udp\" (or %s_hex): a UDP service is known to be there only by its answer", name)
	case hexText != "":
		b, err := health.ParseHex(hexText)
		if err != nil {
			p.Add(key+"."+name+"_hex", err)
		} else if len(b) > health.MaxPayload {
			p.Addf(key+"."+name+"_hex", "%d bytes; at most %d", len(b), health.MaxPayload)
		} else {
			return b
		}
	case len(text) > health.MaxPayload:
		p.Addf(key+"."+name, "%d bytes; at most %d", len(text), health.MaxPayload)
	default:
		return []byte(text)
	}
	return nil
}

// checkURL checks a health URL; its errors show the URL with its password redacted, since
// they are printed and logged.
func checkURL(raw, scheme string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New(health.RedactError(err, raw))
	}
	if u.Scheme != scheme {
		return fmt.Errorf("%q: scheme must be %s", health.RedactURL(raw), scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host", health.RedactURL(raw))
	}
	return nil
}

// readHealthFiles reads every health check's tls_ca (Load's part of the health keys), so a
// missing or wrong CA file is an error naming the key when the configuration loads, not a
// check failing later. Run after Validate.
func (c *Config) readHealthFiles() error {
	var p configs.Problems
	for i := range c.Services {
		s := &c.Services[i]
		for j := range s.Backends {
			b := &s.Backends[j]
			if b.Health == nil || b.Health.TLSCA == "" {
				continue
			}
			data, pool, err := readCA(b.Health.TLSCA)
			if err != nil {
				p.Addf(fmt.Sprintf("service %q.backend %q.health.tls_ca", s.Name, b.Name), "%v", err)
				continue
			}
			b.Health.caPEM, b.Health.caPool = data, pool
		}
	}
	return p.Err()
}

// maxCAFile bounds a CA bundle; a larger file is the wrong path.
const maxCAFile = 1 << 20

// readCA reads and parses a tls_ca file: its content (for HealthKey) and its certificates.
func readCA(path string) ([]byte, *x509.CertPool, error) {
	data, err := regfile.Read(path, maxCAFile) // a regular file only: a FIFO must not hang a reload
	if err != nil {
		return nil, nil, err
	}
	pool, err := health.ParseCA(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, pool, nil
}

// RootCAs is tls_ca's certificates, nil without tls_ca: parsed when Load read the file, or
// read now when Parse did not (its errors name the file).
func (h *HealthCheck) RootCAs() (*x509.CertPool, error) {
	if h.TLSCA == "" || h.caPool != nil {
		return h.caPool, nil
	}
	_, pool, err := readCA(h.TLSCA)
	return pool, err
}

// Payloads are a udp check's request and the text its answer must hold, as bytes (from the
// text or the hex form). Valid only after Validate.
func (h *HealthCheck) Payloads() (send, expect []byte) { return h.send, h.expect }

// HealthWarnings are health checks that work but prove less than they seem: tls_skip_verify
// accepts any certificate, so whoever can answer on the path passes the check. The controller
// logs them when a check starts and -check-config prints them. Valid only after Validate.
func (c *Config) HealthWarnings() []string {
	var w []string
	for _, s := range c.Services {
		for _, b := range s.Backends {
			if b.Source == "snmp" && b.Health != nil && b.Health.TLSSkipVerify {
				w = append(w, fmt.Sprintf("service %q.backend %q.health.tls_skip_verify: the collector accepts any certificate from %s, "+
					"so anything that answers on the path passes the check; set tls_ca to the CA (or the self-signed certificate) of the service instead",
					s.Name, b.Name, b.Name))
			}
		}
	}
	return w
}

// HealthKey is what the collector's check of b depends on, tls_ca's content included: a
// reload that changes it restarts the check. Valid only after Validate.
func (b *Backend) HealthKey() string {
	h := b.EffectiveHealth()
	if h == nil {
		return ""
	}
	sum := sha256.Sum256(h.caPEM)
	return fmt.Sprintf("%s|%d|%q|%q|%q|%q|%t|%q|%q|%q|%q|%q|%s", h.Type, h.Port, h.URL, h.ExpectStatus, h.BodyContains,
		h.TLSCA, h.TLSSkipVerify, h.ServerName, h.Send, h.SendHex, h.Expect, h.ExpectHex, hex.EncodeToString(sum[:8]))
}
