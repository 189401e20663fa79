package health

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"
)

// Spec is what to check. The probe's [health] table (probe/config) and the controller's
// health_url for a probe-less backend both come down to it, so both judge a service the same
// way. It is the http and https type of check; TCPSpec and UDPSpec are the others.
type Spec struct {
	URL          string        // http:// or https://
	Timeout      time.Duration // > 0: the whole check, connect to the end of the body
	ExpectStatus string        // accepted codes: "200-399", "200,204"
	BodyContains string        // a substring the body must hold; "" for none

	// https only. A self-signed service is checked either against its own CA (RootCAs) or,
	// explicitly, without verification (TLSSkipVerify, which callers warn about): the
	// default stays the system roots, as http.Client would, so a check never trusts a
	// certificate silently.
	TLSSkipVerify bool
	RootCAs       *x509.CertPool // nil: the system roots
	ServerName    string         // the name the certificate must carry; "": the URL's host
}

// MaxBody is how much of the body is searched for Checker.BodyContains.
const MaxBody = 64 << 10

// MaxErrLen bounds Result.Err, the size the push protocol carries.
const MaxErrLen = 128

// Result is the outcome of one check.
type Result struct {
	OK      bool
	Status  uint16        // HTTP status, 0 when there was no response (and for tcp and udp checks)
	Latency time.Duration // from dialling to the end of the judged response (or answer, or connect)
	Err     string        // why the check failed, at most MaxErrLen bytes; empty when OK
}

// MaxHeader bounds the status line and headers of a response.
const MaxHeader = 64 << 10

// Checker checks one URL.
type Checker struct {
	// URL is the checked URL as every Result and error shows it: its password, if it has
	// one, redacted (RedactURL). The password itself goes only into the Authorization header.
	URL          string
	Timeout      time.Duration
	Expect       StatusRanges
	BodyContains string

	addr string        // host:port to dial
	tls  *tls.Config   // nil for http
	req  *http.Request // the GET sent every time (read-only), for reading the response
	wire []byte        // req as it goes on the wire, serialised once by New
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	now  func() time.Time
	raw  string // the URL as configured, password included: scrubbed from every message
}

// New returns a Checker for h. Each check opens a new connection, sends one GET with
// "Connection: close" and reads one response with net/http's parser: a reused connection
// would say nothing about whether the service still accepts new ones, and with a single
// request there is nothing for http.Client's connection pool, proxy or redirect machinery to
// do. Dropping it, with a cheaper CPU count, cut the probe's CPU at a 100 ms interval by a
// fifth, and the health check's own share by about a third (docs/benchmarks.md). Redirects
// are not followed: a 3xx from the local service is an answer to judge, not somewhere else to
// go. https verifies the certificate against the system roots, as http.Client would.
func New(h Spec) (*Checker, error) {
	c, err := build(h)
	if err != nil {
		// Every error below may quote the URL; none may show its password.
		return nil, errors.New(Scrub(RedactError(err, h.URL), h.URL))
	}
	return c, nil
}

// build is New; its errors may hold the raw URL, which New scrubs.
func build(h Spec) (*Checker, error) {
	safe := RedactURL(h.URL)
	expect, err := ParseStatusRanges(h.ExpectStatus)
	if err != nil {
		return nil, fmt.Errorf("health.expect_status: %w", err)
	}
	if h.Timeout <= 0 {
		return nil, fmt.Errorf("health.timeout %v: want > 0", h.Timeout)
	}
	u, err := url.Parse(h.URL)
	if err != nil {
		return nil, fmt.Errorf("health.url: %w", err)
	}
	// No TCP keep-alive: it only probes a connection idle for 15 s, and the check's connection
	// lives for one request within Timeout; turning it on cost four setsockopt calls a check.
	c := &Checker{URL: safe, Timeout: h.Timeout, Expect: expect, BodyContains: h.BodyContains,
		dial: (&net.Dialer{KeepAlive: -1}).DialContext, now: time.Now, raw: h.URL}
	port := u.Port()
	switch u.Scheme {
	case "http":
		port = cmp.Or(port, "80")
	case "https":
		port = cmp.Or(port, "443")
		c.tls = &tls.Config{ServerName: cmp.Or(h.ServerName, u.Hostname()), MinVersion: tls.VersionTLS12,
			RootCAs: h.RootCAs, InsecureSkipVerify: h.TLSSkipVerify}
	default:
		return nil, fmt.Errorf("health.url %q: scheme must be http or https", safe)
	}
	if c.tls == nil && (h.TLSSkipVerify || h.RootCAs != nil || h.ServerName != "") {
		return nil, fmt.Errorf("health.url %q: TLS options need an https URL", safe)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("health.url %q has no host", safe)
	}
	c.addr = net.JoinHostPort(u.Hostname(), port)
	// Credentials in the URL are sent as http.Client sends them, as basic authentication;
	// the request itself carries the URL without them.
	user := u.User
	bare := *u
	bare.User = nil
	c.req, err = http.NewRequest(http.MethodGet, bare.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("health.url: %w", err)
	}
	if user != nil {
		pw, _ := user.Password()
		c.req.SetBasicAuth(user.Username(), pw)
	}
	c.req.Header.Set("User-Agent", "flowweight-probe")
	c.req.Close = true // "Connection: close"
	var wire bytes.Buffer
	if err := c.req.Write(&wire); err != nil {
		return nil, fmt.Errorf("health.url: %w", err)
	}
	c.wire = wire.Bytes()
	return c, nil
}

// Check performs one check; it returns within Timeout (or sooner if ctx ends).
func (c *Checker) Check(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	start := c.now()
	failf := func(status uint16, format string, args ...any) Result {
		// Scrubbed as a whole: a cause from net/http or crypto/tls may quote the URL too.
		return fail(status, c.now().Sub(start), Scrub("GET "+c.URL+": "+fmt.Sprintf(format, args...), c.raw))
	}
	conn, err := c.dial(ctx, "tcp", c.addr)
	if err != nil {
		return failf(0, "%s", cause(err))
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	// A cancelled ctx (the probe stopping) ends blocked reads and writes at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if c.tls != nil {
		tc := tls.Client(conn, c.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return failf(0, "%s", cause(err))
		}
		conn = tc
	}
	if _, err := conn.Write(c.wire); err != nil {
		return failf(0, "%s", cause(err))
	}
	// Header and body share one bound, so a service cannot make the probe read without end.
	br := bufio.NewReader(io.LimitReader(conn, MaxHeader+MaxBody))
	var resp *http.Response
	for range 5 { // skip interim 1xx responses, as http.Client does
		if resp, err = http.ReadResponse(br, c.req); err != nil {
			return failf(0, "%s", cause(err))
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	defer resp.Body.Close()
	status := uint16(resp.StatusCode)
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		status = 0
	}
	if !c.Expect.Contains(resp.StatusCode) {
		return failf(status, "status %s", resp.Status)
	}
	// The body is read (up to MaxBody) even when not searched: a service that sends headers
	// and then stalls is not healthy, and closing early makes the server see a broken pipe.
	var found bool
	if c.BodyContains == "" {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBody))
	} else {
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, MaxBody))
		found = bytes.Contains(body, []byte(c.BodyContains))
	}
	if err != nil {
		return failf(status, "reading body: %s", cause(err))
	}
	if c.BodyContains != "" && !found {
		return failf(status, "body lacks %q", c.BodyContains)
	}
	return Result{OK: true, Status: status, Latency: c.now().Sub(start)}
}

// cause shortens net/http's error chain to its root, which is what an operator needs
// ("connection refused", "context deadline exceeded") in 128 bytes.
func cause(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// fail builds a failed Result. A message too long for MaxErrLen loses its middle, never a
// timeout's cause at its end: the collector reads it (TimedOut) to tell a busy backend from a
// dead one, and a long URL must not turn a late answer into an eviction.
func fail(status uint16, latency time.Duration, msg string) Result {
	if len(msg) > MaxErrLen && TimedOut(msg) {
		const tail = "…: " + TimeoutCause
		msg = Truncate(msg, MaxErrLen-len(tail)) + tail
	}
	return Result{Status: status, Latency: latency, Err: Truncate(msg, MaxErrLen)}
}

// Truncate shortens s to at most n bytes without splitting a UTF-8 sequence, replacing
// invalid bytes so the result is always valid UTF-8.
func Truncate(s string, n int) string {
	if !utf8.ValidString(s) {
		s = string(bytes.ToValidUTF8([]byte(s), []byte("?")))
	}
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
