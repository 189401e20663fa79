// Package api serves the controller's HTTP side: the JSON API under /api/v1/, Prometheus
// /metrics, and the dashboard at /. It reads the balancer's views and asks it to drain
// backends; it holds no state of its own.
package api

import (
	"crypto/subtle"
	"embed"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"flowweight/controller/balancer"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed dashboard.html
var static embed.FS

// Balancer is what the API needs from the running controller.
type Balancer interface {
	Services() []balancer.ServiceView
	History() map[string][]balancer.Point
	Events() []balancer.Event
	Drain(name string, drained bool) bool
	Switches() []uint64
}

// New returns the handler. token, when not empty, is required (as "Authorization: Bearer
// TOKEN") for every request that changes something; reads stay open so a dashboard on an
// operator's screen needs no secret.
func New(b Balancer, gatherer prometheus.Gatherer, token string, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/v1/services", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.Services()) })
	mux.HandleFunc("GET /api/v1/backends", func(w http.ResponseWriter, r *http.Request) {
		var out []balancer.BackendView
		for _, s := range b.Services() {
			out = append(out, s.Backends...)
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("GET /api/v1/history", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.History()) })
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.Events()) })
	mux.HandleFunc("GET /api/v1/switches", func(w http.ResponseWriter, r *http.Request) {
		var out []string
		for _, d := range b.Switches() {
			out = append(out, strings.ToLower(strings.TrimLeft(hex16(d), "")))
		}
		writeJSON(w, out)
	})
	drain := func(drained bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !authorized(r, token) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="flowweight"`)
				http.Error(w, "a bearer token is required to change backends", http.StatusUnauthorized)
				return
			}
			name := r.PathValue("name")
			if !b.Drain(name, drained) {
				http.Error(w, "no backend named "+name, http.StatusNotFound)
				return
			}
			log.Info("backend drain changed through the API", "backend", name, "drained", drained, "remote", r.RemoteAddr)
			writeJSON(w, map[string]any{"backend": name, "drained": drained})
		}
	}
	mux.HandleFunc("POST /api/v1/backends/{name}/drain", drain(true))
	mux.HandleFunc("POST /api/v1/backends/{name}/undrain", drain(false))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		data, _ := static.ReadFile("dashboard.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'")
		_, _ = w.Write(data)
	})
	return mux
}

func authorized(r *http.Request, token string) bool {
	if token == "" {
		return true // config validation only allows this on loopback
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func hex16(v uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}
