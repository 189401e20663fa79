package api

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flowweight/controller/config"
)

// shippedWith parses configs/controller.toml (no api.token_file) with its
// allow_unauthenticated_writes line replaced by apiLines.
func shippedWith(t *testing.T, apiLines string) *config.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "controller.toml"))
	if err != nil {
		t.Fatal(err)
	}
	const line = "allow_unauthenticated_writes = false"
	if !strings.Contains(string(data), line) {
		t.Fatalf("configs/controller.toml does not say %q", line)
	}
	text := strings.Replace(string(data), line, apiLines, 1)
	cfg, err := config.Parse("controller.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestWritesNeedTokenByDefault: with the shipped configuration (API on loopback, no
// token_file) a POST to drain with no Authorization and no Origin used to get 200: any local
// user could drain. Now it is refused (403, saying how to set a token or opt out) and never
// reaches the balancer; api.allow_unauthenticated_writes = true lets it through, and a
// reload switches between the two.
func TestWritesNeedTokenByDefault(t *testing.T) {
	shipped := shippedWith(t, "")
	s, f, addr := startFake(t, OptionsFrom(shipped.API, slog.New(slog.DiscardHandler), nil))
	drain := func() (int, string) {
		resp, body := raw(t, addr, "POST /api/v1/backends/small/drain HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return resp.StatusCode, body
	}
	read := func() int {
		resp, _ := raw(t, addr, "GET /api/v1/services HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n")
		return resp.StatusCode
	}
	if code, body := drain(); code != 403 || !strings.Contains(body, "api.token_file") || !strings.Contains(body, "api.allow_unauthenticated_writes") {
		t.Fatalf("drain without a token on the shipped configuration: %d %q, want 403 naming api.token_file and the opt-out", code, body)
	}
	if f.count() != 0 {
		t.Fatal("a refused write reached the balancer")
	}
	if read() != 200 {
		t.Fatal("reads must stay open on loopback")
	}
	if got := counter(t, addr, "flowweight_api_requests_refused_total", `{reason="token"}`); got != 1 {
		t.Fatalf("refused{token} = %v, want 1", got)
	}

	open := shippedWith(t, "allow_unauthenticated_writes = true\n")
	if err := s.Reload(open); err != nil {
		t.Fatal(err)
	}
	if code, body := drain(); code != 200 || f.count() != 1 {
		t.Fatalf("with the opt-out: %d %q, drains %d", code, body, f.count())
	}
	if err := s.Reload(shipped); err != nil {
		t.Fatal(err)
	}
	if code, _ := drain(); code != 403 || f.count() != 1 {
		t.Fatalf("after the opt-out was removed by a reload: %d, drains %d", code, f.count())
	}
}
