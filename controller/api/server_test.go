package api

import (
	"bufio"
	"errors"
	"flowweight/controller/view"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"flowweight/controller/config"
	"flowweight/internal/testutil"

	"github.com/prometheus/client_golang/prometheus"
)

// fake is a Balancer with two backends that records drains.
type fake struct {
	mu      sync.Mutex
	drains  []string
	history map[string][]view.Point // what History returns; nil = empty
}

func (f *fake) Services() []view.ServiceView {
	return []view.ServiceView{{Name: "web", Backends: []view.BackendView{{Name: "small"}, {Name: "big"}}}}
}
func (f *fake) History() map[string][]view.Point { return f.history }
func (f *fake) Events() []view.Event             { return nil }
func (f *fake) Switches() []uint64               { return []uint64{0xab} }
func (f *fake) SwitchViews() []view.SwitchView {
	return []view.SwitchView{{DPID: "00000000000000ab", Known: true, Intent: 7, Behind: 2}}
}
func (f *fake) Drain(name string, drained bool) error {
	if name != "small" && name != "big" {
		return view.ErrNoBackend
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drains = append(f.drains, fmt.Sprint(name, drained))
	return nil
}
func (f *fake) Drained(name string) (view.DrainedView, error) {
	switch name {
	case "small":
		return view.DrainedView{Backend: name, Safe: true, OperatorDrained: true}, nil
	case "big":
		return view.DrainedView{Backend: name, Holding: []view.Hold{{Kind: "connections", Text: "3 connections (probe, 0.5s ago)"}}, Reason: "3 connections (probe, 0.5s ago)"}, nil
	}
	return view.DrainedView{}, view.ErrNoBackend
}
func (f *fake) HA() view.HAView { return view.HAView{Role: "single"} }
func (f *fake) count() int      { f.mu.Lock(); defer f.mu.Unlock(); return len(f.drains) }

const testToken = "test-token-0123456789abcdef"

// testLimits are roomy except where a test narrows one; the timeouts are failure bounds.
var testLimits = Limits{ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: time.Minute,
	MaxHeaderBytes: 4096, MaxBodyBytes: 64, MaxConnections: 32}

func startFake(t *testing.T, o Options, f ...*fake) (*Server, *fake, string) {
	t.Helper()
	if o.Limits == (Limits{}) {
		o.Limits = testLimits
	}
	if len(f) == 0 {
		f = append(f, &fake{})
	}
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	s, base := serve(t, f[0], reg, o)
	return s, f[0], strings.TrimPrefix(base, "http://")
}

// counter reads a counter from /metrics as an operator would.
func counter(t *testing.T, addr, name, label string) float64 {
	t.Helper()
	resp, body := raw(t, addr, "GET /metrics HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name+label+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	t.Fatalf("no %s%s in /metrics", name, label)
	return 0
}

// raw sends req as written on a new connection and reads one answer; the connection is
// closed afterwards. Raw bytes let a test send what net/http's client never would.
func raw(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // failure bound, not a wait
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", req, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// TestRequestGuard: every class of refused request, and its accepted neighbour, through the
// real server. Refused writes must not reach Drain.
func TestRequestGuard(t *testing.T) {
	_, f, addr := startFake(t, Options{Token: testToken, AllowedHosts: []string{"fw.example.net", "alt.example.net:8443"}})
	_, port, _ := net.SplitHostPort(addr)
	auth := "Authorization: Bearer " + testToken + "\r\n"
	drain := "/api/v1/backends/small/drain"
	type tc struct {
		name, method, path, host, headers, body string
		want                                    int
		wantBody                                string
	}
	cases := []tc{
		// Host: DNS rebinding, reads and writes alike.
		{"own host", "GET", "/api/v1/services", addr, "", "", 200, `"small"`},
		{"localhost", "GET", "/api/v1/services", "localhost:" + port, "", "", 200, ""},
		{"localhost any case", "GET", "/api/v1/services", "LocalHost:" + port, "", "", 200, ""},
		{"rebinding name", "GET", "/api/v1/services", "rebind.evil.example", "", "", 403, `refused: Host "rebind.evil.example" is not`},
		{"rebinding name with our port", "GET", "/api/v1/services", "rebind.evil.example:" + port, "", "", 403, "DNS rebinding"},
		{"rebinding metrics", "GET", "/metrics", "rebind.evil.example:" + port, "", "", 403, "Host"},
		{"rebinding dashboard", "GET", "/", "rebind.evil.example:" + port, "", "", 403, "Host"},
		{"rebinding HEAD", "HEAD", "/api/v1/services", "rebind.evil.example:" + port, "", "", 403, ""},
		{"our IP, other port", "GET", "/api/v1/services", "127.0.0.1:1", "", "", 403, "Host"},
		{"our IP, no port (80)", "GET", "/api/v1/services", "127.0.0.1", "", "", 403, "Host"},
		{"other loopback IP", "GET", "/api/v1/services", "127.0.0.2:" + port, "", "", 403, "Host"},
		{"IPv6 loopback, listening on v4", "GET", "/api/v1/services", "[::1]:" + port, "", "", 403, "Host"},
		{"localhost with trailing dot", "GET", "/api/v1/services", "localhost.:" + port, "", "", 403, "not a host name"},
		{"short IPv4 form", "GET", "/api/v1/services", "127.1:" + port, "", "", 403, "not a host name"},
		{"allowed name, any port", "GET", "/api/v1/services", "fw.example.net:" + port, "", "", 200, ""},
		{"allowed name, no port", "GET", "/api/v1/services", "FW.example.net", "", "", 200, ""},
		{"allowed name with its port", "GET", "/api/v1/services", "alt.example.net:8443", "", "", 200, ""},
		{"allowed name, other port", "GET", "/api/v1/services", "alt.example.net:" + port, "", "", 403, "Host"},
		{"subdomain of an allowed name", "GET", "/api/v1/services", "x.fw.example.net", "", "", 403, "Host"},
		{"rebinding write with the token", "POST", drain, "rebind.evil.example:" + port, auth, "", 403, "Host"},
		// Reads stay open to other origins: the browser's same-origin policy keeps the page
		// from reading the answer, and a link from elsewhere must open the dashboard.
		{"cross-site read", "GET", "/api/v1/services", addr, "Origin: http://evil.example\r\nSec-Fetch-Site: cross-site\r\n", "", 200, ""},
		{"cross-site navigation", "GET", "/", addr, "Sec-Fetch-Site: cross-site\r\n", "", 200, "<title>flowweight"},
		// Cross-site writes: CSRF, token or not.
		{"same-origin write", "POST", drain, addr, auth + "Origin: http://" + addr + "\r\nSec-Fetch-Site: same-origin\r\n", "", 200, `"drained": true`},
		{"non-browser write", "POST", drain, addr, auth, "", 200, ""},
		{"user-initiated", "POST", drain, addr, auth + "Sec-Fetch-Site: none\r\n", "", 200, ""},
		{"foreign Origin", "POST", drain, addr, auth + "Origin: http://evil.example\r\n", "", 403, `refused: Origin "http://evil.example" is not this API's origin`},
		{"foreign Origin, no token", "POST", drain, addr, "Origin: http://evil.example\r\n", "", 403, "Origin"},
		{"null Origin", "POST", drain, addr, auth + "Origin: null\r\n", "", 403, "Origin"},
		{"Origin on our IP, other port", "POST", drain, addr, auth + "Origin: http://127.0.0.1:1\r\n", "", 403, "Origin"},
		{"Origin localhost, Host IP", "POST", drain, addr, auth + "Origin: http://localhost:" + port + "\r\n", "", 403, "Origin"},
		{"Origin with a path", "POST", drain, addr, auth + "Origin: http://" + addr + "/x\r\n", "", 403, "Origin"},
		{"Origin of another scheme", "POST", drain, addr, auth + "Origin: ftp://" + addr + "\r\n", "", 403, "Origin"},
		{"two Origins", "POST", drain, addr, auth + "Origin: http://" + addr + "\r\nOrigin: http://evil.example\r\n", "", 403, "Origin"},
		{"Sec-Fetch-Site cross-site", "POST", drain, addr, auth + "Sec-Fetch-Site: cross-site\r\n", "", 403, `refused: Sec-Fetch-Site "cross-site"`},
		{"Sec-Fetch-Site same-site", "POST", drain, addr, auth + "Sec-Fetch-Site: same-site\r\n", "", 403, "Sec-Fetch-Site"},
		{"Sec-Fetch-Site cross-site, own Origin", "POST", drain, addr, auth + "Origin: http://" + addr + "\r\nSec-Fetch-Site: cross-site\r\n", "", 403, "Sec-Fetch-Site"},
		{"cross-site PUT", "PUT", drain, addr, auth + "Origin: http://evil.example\r\n", "", 403, "Origin"},
		{"cross-site OPTIONS", "OPTIONS", drain, addr, "Origin: http://evil.example\r\n", "", 403, "Origin"},
		// Token.
		{"no token", "POST", drain, addr, "", "", 401, "bearer token"},
		{"wrong token", "POST", drain, addr, "Authorization: Bearer wrong-token-0123456789abcdef\r\n", "", 401, ""},
		{"short token", "POST", drain, addr, "Authorization: Bearer x\r\n", "", 401, ""},
		{"empty token", "POST", drain, addr, "Authorization: Bearer \r\n", "", 401, ""},
		{"token prefix", "POST", drain, addr, "Authorization: Bearer " + testToken[:20] + "\r\n", "", 401, ""},
		{"token plus", "POST", drain, addr, "Authorization: Bearer " + testToken + "x\r\n", "", 401, ""},
		{"basic scheme", "POST", drain, addr, "Authorization: Basic " + testToken + "\r\n", "", 401, ""},
		{"two Authorization headers", "POST", drain, addr, auth + "Authorization: Bearer x\r\n", "", 401, ""},
		{"scheme in lower case", "POST", drain, addr, "Authorization: bearer " + testToken + "\r\n", "", 200, ""},
		// Bodies.
		{"Content-Length over the limit", "POST", drain, addr, auth + "Content-Length: 65\r\n", strings.Repeat("x", 65), 413, "65 bytes; at most 64 (api.max_body_bytes)"},
		{"huge Content-Length", "POST", drain, addr, auth + "Content-Length: 99999999999\r\n", "", 413, "api.max_body_bytes"},
		{"chunked over the limit", "POST", drain, addr, auth + "Transfer-Encoding: chunked\r\n", "64\r\n" + strings.Repeat("x", 100) + "\r\n0\r\n\r\n", 413, "over 64 bytes"},
		{"a body", "POST", drain, addr, auth + "Content-Length: 5\r\n", "hello", 400, "takes no body"},
		{"a JSON field", "POST", drain, addr, auth + "Content-Length: 17\r\n", `{"drained":false}`, 400, "unknown field"},
		{"two objects", "POST", drain, addr, auth + "Content-Length: 4\r\n", `{}{}`, 400, "after the object"},
		{"empty object", "POST", drain, addr, auth + "Content-Length: 3\r\n", "{}\n", 200, ""},
		// Names in the path.
		{"unknown backend", "POST", "/api/v1/backends/nope/drain", addr, auth, "", 404, `no backend named "nope"`},
		{"huge name", "POST", "/api/v1/backends/" + strings.Repeat("a", 2000) + "/drain", addr, auth, "", 400, "is not 1-64 characters"},
		{"percent-encoded name", "POST", "/api/v1/backends/sm%61ll/undrain", addr, auth, "", 200, `"backend": "small"`},
		{"encoded slash", "POST", "/api/v1/backends/a%2Fb/drain", addr, auth, "", 400, `"a/b"`},
		{"encoded NUL", "POST", "/api/v1/backends/a%00/drain", addr, auth, "", 400, `"a\x00"`},
		{"encoded newline", "POST", "/api/v1/backends/a%0Ab/drain", addr, auth, "", 400, "1-64 characters"},
		{"bad escape", "POST", "/api/v1/backends/a%zz/drain", addr, auth, "", 400, ""},
		{"no name (cleaned, redirected)", "POST", "/api/v1/backends//drain", addr, auth, "", 307, ""},
		// Queries and methods.
		{"query on a read", "GET", "/api/v1/services?limit=1", addr, "", "", 400, `takes no query parameters (got "limit=1")`},
		{"query on a write", "POST", drain + "?drained=false", addr, auth, "", 400, "query"},
		{"GET a write", "GET", drain, addr, auth, "", 405, ""},
		{"PUT a write", "PUT", drain, addr, auth, "", 405, ""},
		{"DELETE a read", "DELETE", "/api/v1/services", addr, auth, "", 405, ""},
		{"unknown path", "GET", "/api/v1/nothing", addr, "", "", 404, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.count()
			req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n%s", c.method, c.path, c.host, c.headers, c.body)
			if c.body != "" && !strings.Contains(c.headers, "Content-Length") && !strings.Contains(c.headers, "Transfer-Encoding") {
				t.Fatal("test bug: a body needs a length")
			}
			resp, body := raw(t, addr, req)
			if resp.StatusCode != c.want || !strings.Contains(body, c.wantBody) {
				t.Fatalf("%s %s Host %s: %d %q, want %d with %q", c.method, c.path, c.host, resp.StatusCode, body, c.want, c.wantBody)
			}
			wrote := f.count() - before
			if isWrite := c.method == "POST" && c.want == 200; wrote != map[bool]int{true: 1, false: 0}[isWrite] {
				t.Fatalf("%d drains reached the balancer", wrote)
			}
		})
	}
	// An HTTP/1.0 request may omit Host; it is refused too (browsers always send one).
	resp, body := raw(t, addr, "GET /api/v1/services HTTP/1.0\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(body, "no Host header") {
		t.Fatalf("no Host: %d %q", resp.StatusCode, body)
	}
	// Too large a header is refused by net/http with our limit.
	resp, _ = raw(t, addr, "GET /api/v1/services HTTP/1.1\r\nHost: "+addr+"\r\nX-Pad: "+strings.Repeat("p", 3*testLimits.MaxHeaderBytes)+"\r\n\r\n")
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("huge header: %d", resp.StatusCode)
	}
	if n := counter(t, addr, "flowweight_api_requests_refused_total", `{reason="host"}`); n < 10 {
		t.Fatalf("flowweight_api_requests_refused_total{reason=host} = %v", n)
	}
}

// waitClosed reads from c until the server closes it and fails if that takes longer than
// bound (a failure bound: the test passes as soon as the close arrives). It returns what
// the server wrote before closing.
func waitClosed(t *testing.T, c net.Conn, bound time.Duration) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(bound))
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still held the connection after %v (wrote %q)", bound, got)
	}
	return string(got) // EOF or a reset: closed
}

// TestSlowBodyClosedWithinReadTimeout: a client that declares a body and never sends it is
// answered or dropped once the read timeout passes, with the token (the handler reads the
// body) and without (net/http would wait for the body before answering 401); so is one that
// never finishes its headers. Before the read timeout existed the body ones were held, with
// no answer, forever.
func TestSlowBodyClosedWithinReadTimeout(t *testing.T) {
	l := testLimits
	l.ReadTimeout = 200 * time.Millisecond
	s, f, addr := startFake(t, Options{Token: testToken, Limits: l})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			switch i % 3 {
			case 0: // the handler reads the body
				fmt.Fprintf(c, "POST /api/v1/backends/small/drain HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 40\r\n\r\n{", addr, testToken)
			case 1: // refused (401) with the body unread
				fmt.Fprintf(c, "POST /api/v1/backends/small/drain HTTP/1.1\r\nHost: %s\r\nContent-Length: 40\r\n\r\n{", addr)
			case 2: // headers never finished (slowloris)
				fmt.Fprintf(c, "GET /api/v1/services HTTP/1.1\r\nHost: %s\r\nX-Slow: ", addr)
			}
			waitClosed(t, c, 10*time.Second)
		})
	}
	wg.Wait()
	testutil.Eventually(t, 10*time.Second, func() (any, bool) { v := s.openConns(); return v, v == 0 }, "connections released")
	if f.count() != 0 {
		t.Fatalf("%d drains from bodies that never arrived", f.count())
	}
}

// TestIdleConnectionsClosed: keep-alive connections with no request are closed after the
// idle timeout, even with read and write timeouts far longer.
func TestIdleConnectionsClosed(t *testing.T) {
	l := testLimits
	l.ReadTimeout, l.WriteTimeout, l.IdleTimeout = time.Hour, time.Hour, 200*time.Millisecond
	s, _, addr := startFake(t, Options{Limits: l})
	var conns []net.Conn
	for range 10 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /api/v1/switches HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 || resp.Close {
			t.Fatalf("first request: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		conns = append(conns, c)
	}
	if n := s.openConns(); n != 10 {
		t.Fatalf("%d connections open, want 10 kept alive", n)
	}
	for _, c := range conns {
		if got := waitClosed(t, c, 10*time.Second); got != "" {
			t.Fatalf("idle connection got %q", got)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() (any, bool) { v := s.openConns(); return v, v == 0 }, "idle connections released")
}

// TestConnectionCap: over api.max_connections a connection gets a 503 naming the limit and
// is closed at once; a slot freed lets the next one in.
func TestConnectionCap(t *testing.T) {
	l := testLimits
	l.MaxConnections = 3
	s, _, addr := startFake(t, Options{Limits: l})
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /api/v1/switches HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("within the cap: %v %v", resp, err)
		}
		held = append(held, c)
	}
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		got := waitClosed(t, c, 10*time.Second)
		c.Close()
		if !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, "api.max_connections") {
			t.Fatalf("over the cap: %q", got)
		}
	}
	held[0].Close()
	testutil.Until(t, 10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /api/v1/switches HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		return err == nil && resp.StatusCode == 200
	}, "a freed slot serves a new connection")
	for _, c := range held {
		c.Close()
	}
	testutil.Eventually(t, 10*time.Second, func() (any, bool) { v := s.openConns(); return v, v == 0 }, "every slot free")
	if n := counter(t, addr, "flowweight_api_connections_refused_total", ""); n < 5 {
		t.Fatalf("flowweight_api_connections_refused_total = %v, want >= 5", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv.ReadTimeout != l.ReadTimeout || s.srv.WriteTimeout != l.WriteTimeout || s.srv.IdleTimeout != l.IdleTimeout || s.srv.MaxHeaderBytes != l.MaxHeaderBytes {
		t.Fatalf("http.Server limits %v %v %v %v, want %+v", s.srv.ReadTimeout, s.srv.WriteTimeout, s.srv.IdleTimeout, s.srv.MaxHeaderBytes, l)
	}
}

// loadWithToken writes a token file and a configuration naming it, and loads it the way a
// reload does.
func loadWithToken(t *testing.T, token, extra string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	tf := filepath.Join(dir, "api.token")
	if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cf := filepath.Join(dir, "controller.toml")
	text := fmt.Sprintf("[api]\nlisten = \"127.0.0.1:9090\"\ntoken_file = %q\n%s\n[collector]\nkey_file = \"/k\"\n", tf, extra) + webService
	if err := os.WriteFile(cf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cf)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTokenRotation: a reload replaces the token for the next request; a reload the API
// cannot take is refused whole and the running token stays.
func TestTokenRotation(t *testing.T) {
	first, second := "first-token-0123456789abcdef", "second-token-0123456789abcdef"
	cfg1 := loadWithToken(t, first, "")
	s, _, addr := startFake(t, OptionsFrom(cfg1.API, slog.New(slog.DiscardHandler), nil))
	drainWith := func(tok string) int {
		resp, _ := raw(t, addr, "POST /api/v1/backends/small/drain HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+tok+"\r\nConnection: close\r\n\r\n")
		return resp.StatusCode
	}
	if drainWith(first) != 200 || drainWith(second) != 401 {
		t.Fatal("first token not in force")
	}
	cfg2 := loadWithToken(t, second, "")
	if err := s.Reload(cfg2); err != nil {
		t.Fatal(err)
	}
	if drainWith(first) != 401 || drainWith(second) != 200 {
		t.Fatal("reload did not rotate the token")
	}

	// Refused reloads: each leaves the second token in force.
	third := "third-token-0123456789abcdef"
	restart := loadWithToken(t, third, `read_timeout = "3s"`)
	unread := loadWithToken(t, third, "")
	unread.API.Token = "" // as config.Parse leaves it
	for _, c := range []struct {
		name string
		cfg  *config.Config
		want string
	}{
		{"restart-only limit changed", restart, "api.read_timeout: changing 10s to 3s needs a restart"},
		{"token not read", unread, "api.token_file: the token was not read"},
	} {
		if err := s.CheckReload(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: CheckReload = %v, want %q", c.name, err, c.want)
		}
		if err := s.Reload(c.cfg); err == nil {
			t.Fatalf("%s: Reload accepted", c.name)
		}
		if drainWith(second) != 200 || drainWith(third) != 401 {
			t.Fatalf("%s: a refused reload changed the token", c.name)
		}
	}
	if err := s.SetToken("short"); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("SetToken(short) = %v", err)
	}
	if err := s.SetToken(third); err != nil || drainWith(third) != 200 || drainWith(second) != 401 {
		t.Fatalf("SetToken: %v", err)
	}
	// allowed_hosts is replaced by a reload too.
	hosts := loadWithToken(t, third, `allowed_hosts = ["fw.example.net"]`)
	if err := s.Reload(hosts); err != nil {
		t.Fatal(err)
	}
	if resp, _ := raw(t, addr, "GET /api/v1/switches HTTP/1.1\r\nHost: fw.example.net\r\nConnection: close\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("reloaded allowed_hosts not in force: %d", resp.StatusCode)
	}
}

// offLoopback is a listener that claims a routable address and accepts nothing, to test
// Serve's refusal without opening a real port off loopback.
type offLoopback struct{ net.Listener }

func (offLoopback) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 9090} }

// TestNoTokenOnlyOnLoopback: the API never serves off loopback without a token, whatever
// the caller skipped, and a token cannot be removed from one that does.
func TestNoTokenOnlyOnLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, err := NewServer(&fake{}, prometheus.NewRegistry(), Options{Limits: testLimits})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(offLoopback{ln}) }()
	select {
	case err := <-served:
		if err == nil || !strings.Contains(err.Error(), "without a token") {
			t.Fatalf("Serve off loopback without a token: %v", err)
		}
	case <-time.After(10 * time.Second): // failure bound: the refusal is immediate
		s.Close()
		t.Fatal("Serve served off loopback without a token")
	}
	if _, err := NewServer(&fake{}, prometheus.NewRegistry(), Options{Token: "short", Limits: testLimits}); err == nil {
		t.Fatal("NewServer accepted a short token")
	}
	if _, err := NewServer(&fake{}, prometheus.NewRegistry(), Options{AllowedHosts: []string{"*.example.net"}, Limits: testLimits}); err == nil {
		t.Fatal("NewServer accepted a wildcard host")
	}
	if _, err := NewServer(&fake{}, prometheus.NewRegistry(), Options{}); err == nil {
		t.Fatal("NewServer accepted zero limits")
	}
	s2, err := NewServer(&fake{}, prometheus.NewRegistry(), Options{Token: testToken, Limits: testLimits})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s2.Serve(offLoopback{ln}) }()
	testutil.Eventually(t, 10*time.Second, func() (any, bool) { v := s2.Addr(); return v, v != nil }, "Serve started")
	if err := s2.SetToken(""); err == nil {
		t.Fatal("token removed off loopback")
	}
	s2.Close()
	<-done
}

// TestStalledReaderDroppedAfterWriteTimeout: a client that asks for a large answer and
// never reads it holds the connection only until the write timeout; the server then drops
// it (seen as the open-connection count reaching zero while the client still reads nothing)
// and the client gets a truncated answer.
func TestStalledReaderDroppedAfterWriteTimeout(t *testing.T) {
	l := testLimits
	l.WriteTimeout = 300 * time.Millisecond
	pts := make([]view.Point, 150000) // about 12 MB of indented JSON: more than the socket buffers hold
	s, _, addr := startFake(t, Options{Limits: l}, &fake{history: map[string][]view.Point{"web/small": pts}})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /api/v1/history HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	testutil.Eventually(t, 10*time.Second, func() (any, bool) { v := s.openConns(); return v, v == 1 }, "the stalled connection open")
	testutil.Eventually(t, 10*time.Second, func() (any, bool) { v := s.openConns(); return v, v == 0 }, "the stalled connection dropped")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return // cut before the headers were whole: truncated too
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil {
		t.Fatalf("the whole answer (%d bytes) arrived: the write timeout did not cut it", n)
	}
}
