package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Server holds backendd's state; its zero value (plus a Name) is usable.
type Server struct {
	Name string
	// Work is the number of SHA-256 rounds per GET /.
	Work int
	// HealthFile, when set and present on disk, makes /health fail.
	HealthFile string
	// ColdFactor and ColdUntil make a cold start, as a JIT-compiled service's first minute:
	// a request that arrives before ColdUntil costs ColdFactor × Work rounds.
	ColdFactor int
	ColdUntil  time.Time

	failed   atomic.Bool
	requests atomic.Uint64
}

// Handler routes GET /, GET /health, POST /health/fail, POST /health/ok.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.root)
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("POST /health/fail", func(w http.ResponseWriter, r *http.Request) {
		s.failed.Store(true)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /health/ok", func(w http.ResponseWriter, r *http.Request) {
		s.failed.Store(false)
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	work := s.Work
	if s.ColdFactor > 1 && time.Now().Before(s.ColdUntil) {
		work *= s.ColdFactor
	}
	sum := Burn(work)
	n := s.requests.Add(1)
	w.Header().Set("X-Backend", s.Name)
	w.Header().Set("X-Request-Count", strconv.FormatUint(n, 10))
	w.Header().Set("X-Work-Sum", fmt.Sprintf("%x", sum[:4]))
	fmt.Fprintf(w, "%s\n", s.Name)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if why := s.unhealthy(); why != "" {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (s *Server) unhealthy() string {
	if s.failed.Load() {
		return "forced failure (POST /health/fail)"
	}
	if s.HealthFile != "" {
		if _, err := os.Stat(s.HealthFile); err == nil {
			return "health file " + s.HealthFile + " exists"
		} else if !errors.Is(err, os.ErrNotExist) {
			return "health file: " + err.Error()
		}
	}
	return ""
}

// Burn chains n SHA-256 rounds; the result depends on every round, so the
// compiler cannot drop the work.
func Burn(n int) [32]byte {
	var sum [32]byte
	for range n {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}
