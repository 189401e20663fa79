package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestDashboardProxyReadOnly: GET reaches the API through the dial function; a drain (POST)
// is refused by the forwarder and never reaches the API.
func TestDashboardProxyReadOnly(t *testing.T) {
	var hits, writes atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writes.Add(1)
		}
		io.WriteString(w, `{"path":"`+r.URL.Path+`"}`)
	}))
	defer api.Close()
	target := strings.TrimPrefix(api.URL, "http://")
	var dialed atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed.Add(1)
		if addr != target {
			t.Errorf("dialed %s, want the target %s", addr, target)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	proxy := httptest.NewServer(dashboardProxy(target, "fwab12-ctl", dial, slog.New(slog.DiscardHandler)))
	defer proxy.Close()

	resp, err := http.Get(proxy.URL + "/api/v1/services")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"path":"/api/v1/services"}` || dialed.Load() == 0 {
		t.Fatalf("GET through the proxy: %d %q (dialed %d)", resp.StatusCode, body, dialed.Load())
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(method, proxy.URL+"/api/v1/backends/be1/drain", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" || !strings.Contains(string(msg), "read-only") || !strings.Contains(string(msg), "ip netns exec fwab12-ctl") {
			t.Errorf("%s: %d %q, want 405 read-only", method, resp.StatusCode, msg)
		}
	}
	if writes.Load() != 0 || hits.Load() != 1 {
		t.Errorf("the API saw %d requests (%d writes), want only the GET", hits.Load(), writes.Load())
	}

	api.Close() // the controller gone: a clear 502, not a hang
	resp, err = http.Get(proxy.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(msg), "did not answer") {
		t.Errorf("API down: %d %q, want 502", resp.StatusCode, msg)
	}
}
