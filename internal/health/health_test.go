package health

import (
	"context"
	"flowweight/internal/testutil"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

func newChecker(t *testing.T, url string, timeout time.Duration, expect, body string) *Checker {
	t.Helper()
	c, err := New(Spec{URL: url, Timeout: timeout, ExpectStatus: expect, BodyContains: body})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheck(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("status: ready\n")) })
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 503) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/down", 301) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", MaxBody)))
		w.Write([]byte("ready"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tests := []struct {
		name, path, expect, body string
		ok                       bool
		status                   uint16
		err                      string
	}{
		{"ok", "/ok", "200-399", "", true, 200, ""},
		{"body found", "/ok", "200", "ready", true, 200, ""},
		{"body missing", "/ok", "200", "green", false, 200, `body lacks "green"`},
		{"bad status", "/down", "200-399", "", false, 503, "503 Service Unavailable"},
		{"503 accepted", "/down", "200,503", "", true, 503, ""},
		{"redirect not followed", "/moved", "200-399", "", true, 301, ""},
		{"redirect rejected", "/moved", "200", "", false, 301, "status 301"},
		{"body beyond 64 KiB", "/big", "200", "ready", false, 200, "body lacks"},
		{"not found", "/nope", "200-399", "", false, 404, "404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChecker(t, srv.URL+tt.path, 5*time.Second, tt.expect, tt.body)
			r := c.Check(context.Background())
			if r.OK != tt.ok || r.Status != tt.status || !strings.Contains(r.Err, tt.err) || (tt.ok && r.Err != "") {
				t.Errorf("got %+v, want ok=%v status=%d err~%q", r, tt.ok, tt.status, tt.err)
			}
			if r.Latency <= 0 {
				t.Errorf("latency %v", r.Latency)
			}
		})
	}
}

func TestCheckRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := newChecker(t, "http://"+addr+"/", time.Second, "200", "").Check(context.Background())
	if r.OK || r.Status != 0 || !strings.Contains(r.Err, "refused") {
		t.Errorf("got %+v", r)
	}
}

// A service that accepts and never answers costs one timeout, not more.
func TestCheckHangingTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	// The server answers only when released, at the end of the test: without the timeout
	// the check would never return. How soon it returns is not asserted (a loaded machine
	// delays it by seconds: 3.97 s once at load average 11); that it returns, as a timeout, is.
	done := make(chan Result, 1)
	go func() { done <- newChecker(t, srv.URL, 100*time.Millisecond, "200", "").Check(context.Background()) }()
	select {
	case r := <-done:
		if r.OK || r.Status != 0 || !strings.Contains(r.Err, "timeout") {
			t.Errorf("got %+v", r)
		}
	case <-time.After(time.Minute):
		t.Fatal("the check against a hanging server did not return in a minute")
	}
}

// Headers followed by a stalled body fail the check within the timeout.
func TestCheckStalledBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	for _, body := range []string{"", "ready"} {
		r := newChecker(t, srv.URL, 100*time.Millisecond, "200", body).Check(context.Background())
		if r.OK || r.Status != 200 || !strings.Contains(r.Err, "reading body") {
			t.Errorf("body_contains %q: got %+v", body, r)
		}
	}
}

// Every check opens its own connection.
func TestCheckNewConnectionEachTime(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newChecker(t, srv.URL, time.Second, "200", "")
	for range 3 {
		if r := c.Check(context.Background()); !r.OK {
			t.Fatalf("check: %+v", r)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections for 3 checks", n)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(Spec{URL: "http://x/", Timeout: time.Second, ExpectStatus: "ok"}); err == nil || !strings.Contains(err.Error(), "expect_status") {
		t.Errorf("bad status: %v", err)
	}
	if _, err := New(Spec{URL: "http://x/", ExpectStatus: "200"}); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("no timeout: %v", err)
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 128, "short"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"}, // é is two bytes: not split
		{"a\xffb", 10, "a?b"},
	}
	for _, tt := range tests {
		if got := Truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add("GET http://127.0.0.1/: connection refused", 10)
	f.Add("日本語", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1000 {
			return
		}
		got := Truncate(s, n)
		if len(got) > n || !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q", s, n, got)
		}
	})
}

// rawServer answers every connection with reply (after reading the request head) and closes.
func rawServer(t *testing.T, reply func(net.Conn)) string {
	t.Helper()
	return "http://" + testutil.TCPServer(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		var req []byte
		for !strings.Contains(string(req), "\r\n\r\n") {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			req = append(req, buf[:n]...)
		}
		reply(c)
	}) + "/health?x=1"
}

func TestCheckRawResponses(t *testing.T) {
	tests := []struct {
		name   string
		reply  string
		ok     bool
		status uint16
		err    string
	}{
		{"interim 100 skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nready", true, 200, ""},
		{"close-delimited body", "HTTP/1.0 200 OK\r\n\r\nready", true, 200, ""},
		{"chunked body", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nready\r\n0\r\n\r\n", true, 200, ""},
		{"not HTTP", "SSH-2.0-OpenSSH_9.2\r\n", false, 0, "malformed HTTP"},
		{"truncated body", "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nready", false, 200, "reading body"},
		{"status out of range", "HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n", false, 0, "status 999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := rawServer(t, func(c net.Conn) { c.Write([]byte(tt.reply)) })
			r := newChecker(t, u, time.Second, "200-399", "").Check(context.Background())
			if r.OK != tt.ok || r.Status != tt.status || !strings.Contains(r.Err, tt.err) {
				t.Errorf("got %+v, want ok=%v status=%d err containing %q", r, tt.ok, tt.status, tt.err)
			}
		})
	}
}

// Endless headers end the check with an error once MaxHeader+MaxBody bytes are read; the
// probe neither hangs until the timeout nor buffers without bound.
func TestCheckEndlessHeaders(t *testing.T) {
	u := rawServer(t, func(c net.Conn) {
		c.Write([]byte("HTTP/1.1 200 OK\r\n"))
		line := []byte("X-Filler: " + strings.Repeat("y", 1000) + "\r\n")
		for range 1000 { // 1 MB, well over the bound
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	})
	start := time.Now()
	r := newChecker(t, u, 3*time.Second, "200", "").Check(context.Background())
	if r.OK || r.Status != 0 || r.Err == "" {
		t.Errorf("got %+v", r)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v: the bound did not end it", took)
	}
}

// https verifies the certificate: the test server's self-signed one fails, and the same
// server passes once its certificate is trusted.
func TestCheckHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ready")) }))
	defer srv.Close()
	c := newChecker(t, srv.URL+"/", time.Second, "200", "ready")
	if r := c.Check(context.Background()); r.OK || !strings.Contains(r.Err, "certificate") {
		t.Errorf("self-signed certificate: got %+v", r)
	}
	c.tls.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	if r := c.Check(context.Background()); !r.OK || r.Status != 200 {
		t.Errorf("trusted certificate: got %+v", r)
	}
}

// The request is a plain GET of the URL's path and query with Host, User-Agent and
// Connection: close.
func TestCheckRequest(t *testing.T) {
	got := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r }))
	defer srv.Close()
	if r := newChecker(t, srv.URL+"/healthz?deep=1", time.Second, "200", "").Check(context.Background()); !r.OK {
		t.Fatalf("check: %+v", r)
	}
	r := <-got
	if r.Method != "GET" || r.URL.RequestURI() != "/healthz?deep=1" || r.Host != strings.TrimPrefix(srv.URL, "http://") ||
		r.UserAgent() != "flowweight-probe" || !r.Close {
		t.Errorf("request %s %s host %q UA %q close %v", r.Method, r.URL.RequestURI(), r.Host, r.UserAgent(), r.Close)
	}
}

// Cancelling the context (the probe stopping) ends a hanging check at once.
func TestCheckCancelled(t *testing.T) {
	u := rawServer(t, func(c net.Conn) { time.Sleep(3 * time.Second) })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	r := newChecker(t, u, 5*time.Second, "200", "").Check(ctx)
	if r.OK || time.Since(start) > 2*time.Second {
		t.Errorf("got %+v after %v", r, time.Since(start))
	}
}

// The request is serialised once, by New, and goes out byte for byte as http.Request.Write
// wrote it before on every check; each check is still one request on its own connection.
func TestCheckWireRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	heads := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			var head []byte
			for !strings.Contains(string(head), "\r\n\r\n") {
				n, err := c.Read(buf)
				if err != nil {
					break
				}
				head = append(head, buf[:n]...)
			}
			heads <- string(head)
			c.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
			c.Close()
		}
	}()
	host := ln.Addr().String()
	tests := []struct{ url, want string }{
		{"http://" + host + "/healthz?deep=1",
			"GET /healthz?deep=1 HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: flowweight-probe\r\nConnection: close\r\n\r\n"},
		{"http://" + host,
			"GET / HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: flowweight-probe\r\nConnection: close\r\n\r\n"},
	}
	for _, tt := range tests {
		c := newChecker(t, tt.url, time.Second, "204", "")
		for i := range 2 {
			if r := c.Check(context.Background()); !r.OK {
				t.Fatalf("%s check %d: %+v", tt.url, i, r)
			}
			if got := <-heads; got != tt.want {
				t.Errorf("%s check %d sent\n%q\nwant\n%q", tt.url, i, got, tt.want)
			}
		}
	}
}

// The check's connection has no TCP keep-alive timer.
func TestCheckNoKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := newChecker(t, "http://"+ln.Addr().String()+"/", time.Second, "200", "")
	conn, err := c.dial(context.Background(), "tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on int
	var serr error
	if err := raw.Control(func(fd uintptr) { on, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if on != 0 {
		t.Errorf("SO_KEEPALIVE %d, want 0", on)
	}
}
