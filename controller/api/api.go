package api

import (
	"bytes"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"flowweight/controller/config"
	"flowweight/controller/view"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed dashboard.html
var static embed.FS

// Balancer is what the API needs from the running controller: its read side (view.Board)
// and the drain.
type Balancer interface {
	Services() []view.ServiceView
	History() map[string][]view.Point
	Events() []view.Event
	// Drain fails with an error wrapping view.ErrNoBackend for an unknown name, and with
	// another when the change could not be made (HA: etcd did not take it).
	Drain(name string, drained bool) error
	// Drained says whether the backend is safe to stop (view.Decide); it fails with an error
	// wrapping view.ErrNoBackend for an unknown name.
	Drained(name string) (view.DrainedView, error)
	Switches() []uint64
	SwitchViews() []view.SwitchView
	HA() view.HAView
}

// serveHTTP runs the checks every request passes, in the order that answers the most
// useful refusal: an unknown Host first (a rebinding page must learn nothing, not even
// that a token is wanted), then cross-site writes, then the body size. Each refusal is a
// 403/413 with a body naming what was refused; a refused request's body is never read
// (Connection: close), so a client that declared one and sends nothing costs nothing.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	hp := s.hosts.Load()
	if hp == nil {
		http.Error(w, "the API is not serving yet", http.StatusServiceUnavailable)
		return
	}
	if why := hp.check(r.Host); why != "" {
		s.refuse(w, r, "host", http.StatusForbidden, "refused: "+why)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if why := crossSite(r); why != "" {
			s.refuse(w, r, "cross_site", http.StatusForbidden, "refused: "+why)
			return
		}
	}
	max := s.maxBody.Load()
	if r.ContentLength > max {
		s.refuse(w, r, "body_too_large", http.StatusRequestEntityTooLarge,
			fmt.Sprintf("refused: a request body of %d bytes; at most %d (api.max_body_bytes)", r.ContentLength, max))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, max)
	if strings.HasPrefix(r.URL.Path, "/api/") && r.URL.RawQuery != "" {
		s.refuse(w, r, "query", http.StatusBadRequest,
			fmt.Sprintf("refused: %s takes no query parameters (got %s)", r.URL.Path, quote(r.URL.RawQuery)))
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, reason string, code int, msg string) {
	s.refused.WithLabelValues(reason).Inc()
	s.log.Debug("api request refused", "reason", reason, "method", r.Method, "path", quote(r.URL.Path), "remote", r.RemoteAddr)
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}

func routes(s *Server, gatherer prometheus.Gatherer) http.Handler {
	b := s.b
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/v1/services", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.Services()) })
	mux.HandleFunc("GET /api/v1/backends", func(w http.ResponseWriter, r *http.Request) {
		var out []view.BackendView
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
			out = append(out, hex16(d))
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("GET /api/v1/switches/sync", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.SwitchViews()) })
	mux.HandleFunc("GET /api/v1/ha", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.HA()) })
	mux.HandleFunc("POST /api/v1/backends/{name}/drain", s.drain(true))
	mux.HandleFunc("POST /api/v1/backends/{name}/undrain", s.drain(false))
	mux.HandleFunc("GET /api/v1/backends/{name}/drained", s.drained)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		data, _ := static.ReadFile("dashboard.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		_, _ = w.Write(data)
	})
	return mux
}

// drain changes a backend's operator drain. The token (when set) is required; the name must
// be a configured backend's (checked for shape first, so a huge or strange path segment is
// refused without being looked up or echoed); the body must be empty or "{}", since some
// clients always send JSON on POST, and anything else is a mistake worth saying.
func (s *Server) drain(drained bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := *s.token.Load()
		if tok == "" && !s.open.Load() {
			s.refused.WithLabelValues("token").Inc()
			w.Header().Set("Connection", "close")
			http.Error(w, "refused: changes need a bearer token and none is configured: set api.token_file "+
				"(openssl rand -hex 32 > FILE; chmod 600 FILE), or api.allow_unauthenticated_writes = true "+
				"to let every local user change backends", http.StatusForbidden)
			return
		}
		if !authorized(r, tok) {
			s.refused.WithLabelValues("token").Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="flowweight"`)
			w.Header().Set("Connection", "close")
			http.Error(w, "refused: a valid bearer token (Authorization: Bearer TOKEN, from api.token_file) is required to change backends", http.StatusUnauthorized)
			return
		}
		name, ok := backendName(w, r)
		if !ok {
			return
		}
		if err := emptyBody(r.Body); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				s.refused.WithLabelValues("body_too_large").Inc()
				http.Error(w, fmt.Sprintf("refused: a request body over %d bytes (api.max_body_bytes)", tooBig.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.b.Drain(name, drained); errors.Is(err, view.ErrNoBackend) {
			http.Error(w, "no backend named "+quote(name), http.StatusNotFound)
			return
		} else if err != nil {
			s.log.Warn("backend drain not changed", "backend", name, "drained", drained, "err", err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		s.log.Info("backend drain changed through the API", "backend", name, "drained", drained, "remote", r.RemoteAddr)
		writeJSON(w, map[string]any{"backend": name, "drained": drained})
	}
}

// drained answers whether a backend is safe to stop: 200 with the view only when it is, 503
// with the view (its reason) when it is not, 404 for an unknown backend. Like every GET it
// needs no token, so a preStop hook or a systemd ExecStop= can poll it with curl -f.
func (s *Server) drained(w http.ResponseWriter, r *http.Request) {
	name, ok := backendName(w, r)
	if !ok {
		return
	}
	v, err := s.b.Drained(name)
	if errors.Is(err, view.ErrNoBackend) {
		http.Error(w, "no backend named "+quote(name), http.StatusNotFound)
		return
	} else if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if !v.Safe {
		writeJSONStatus(w, http.StatusServiceUnavailable, v)
		return
	}
	writeJSON(w, v)
}

// backendName is the request's {name}, checked for shape first so that a huge or strange path
// segment is refused (400) without being looked up or echoed.
func backendName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if !config.ValidName(name) {
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("backend name %s is not 1-64 characters of A-Z a-z 0-9 . _ -", quote(name)), http.StatusBadRequest)
		return "", false
	}
	return name, true
}

// emptyBody reads the whole body (bounded by MaxBytesReader) and accepts only nothing,
// white space, or an empty JSON object.
func emptyBody(body io.Reader) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	data = bytes.Trim(data, " \t\r\n") // JSON's white space, no more
	if len(data) == 0 {
		return nil
	}
	if data[0] != '{' {
		return errors.New("this endpoint takes no body, or {}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var none struct{}
	if err := dec.Decode(&none); err != nil {
		return fmt.Errorf("this endpoint takes no body, or {} (%v)", err)
	}
	if err := dec.Decode(&none); err != io.EOF {
		return errors.New("this endpoint takes no body, or {} (data after the object)")
	}
	return nil
}

// authorized compares the bearer token in constant time. The scheme is case-insensitive
// (RFC 9110 section 11.1).
func authorized(r *http.Request, token string) bool {
	if token == "" {
		return true // the caller has checked api.allow_unauthenticated_writes (loopback only)
	}
	h := r.Header.Values("Authorization")
	if len(h) != 1 || len(h[0]) < 7 || !strings.EqualFold(h[0][:7], "Bearer ") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[0][7:]), []byte(token)) == 1
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
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
