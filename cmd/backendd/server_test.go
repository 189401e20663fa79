package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	hf := filepath.Join(t.TempDir(), "down")
	s := &Server{Name: "be1", Work: 10, HealthFile: hf}
	h := s.Handler()
	steps := []struct {
		name       string
		method     string
		path       string
		setup      func()
		wantStatus int
		wantBody   string
	}{
		{"root answers name", "GET", "/", nil, 200, "be1\n"},
		{"health ok", "GET", "/health", nil, 200, "ok\n"},
		{"unknown path", "GET", "/nope", nil, 404, ""},
		{"root wrong method", "POST", "/", nil, 405, ""},
		{"force fail", "POST", "/health/fail", nil, 204, ""},
		{"health failing", "GET", "/health", nil, 503, "forced failure (POST /health/fail)\n"},
		{"root still serves", "GET", "/", nil, 200, "be1\n"},
		{"force ok", "POST", "/health/ok", nil, 204, ""},
		{"health back", "GET", "/health", nil, 200, "ok\n"},
		{"health file fails", "GET", "/health", func() {
			if err := os.WriteFile(hf, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, 503, "health file " + hf + " exists\n"},
		{"health file removed", "GET", "/health", func() {
			if err := os.Remove(hf); err != nil {
				t.Fatal(err)
			}
		}, 200, "ok\n"},
	}
	for _, st := range steps {
		if st.setup != nil {
			st.setup()
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(st.method, st.path, nil))
		res := rec.Result()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != st.wantStatus {
			t.Fatalf("%s: %s %s status %d, want %d", st.name, st.method, st.path, res.StatusCode, st.wantStatus)
		}
		if st.wantBody != "" && string(body) != st.wantBody {
			t.Fatalf("%s: body %q, want %q", st.name, body, st.wantBody)
		}
	}
	if got := s.requests.Load(); got != 2 {
		t.Fatalf("request counter %d, want 2 GET / served", got)
	}
}

func TestBurnDependsOnRounds(t *testing.T) {
	cases := []struct{ a, b int }{{0, 1}, {1, 2}, {100, 101}}
	for _, c := range cases {
		if Burn(c.a) == Burn(c.b) {
			t.Errorf("Burn(%d) == Burn(%d): work would be elidable", c.a, c.b)
		}
	}
	if Burn(5) != Burn(5) {
		t.Error("Burn not deterministic")
	}
}

func TestRunRejectsNegativeWork(t *testing.T) {
	if err := run("127.0.0.1:0", extraPorts{}, &Server{Work: -1}, false, nil); err == nil {
		t.Fatal("run accepted -work -1")
	}
}

func TestServeOverTCP(t *testing.T) {
	s := &Server{Name: "tcp", Work: 1}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("X-Backend") != "tcp" {
		t.Fatalf("X-Backend %q, want tcp", res.Header.Get("X-Backend"))
	}
}

// TestColdStart: before ColdUntil a request does ColdFactor × Work rounds, after it Work.
func TestColdStart(t *testing.T) {
	for _, c := range []struct {
		name   string
		until  time.Time
		rounds int
	}{{"cold", time.Now().Add(time.Hour), 50}, {"warm", time.Now().Add(-time.Second), 10}} {
		s := &Server{Name: "be1", Work: 10, ColdFactor: 5, ColdUntil: c.until}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		sum := Burn(c.rounds)
		if got, want := rec.Header().Get("X-Work-Sum"), fmt.Sprintf("%x", sum[:4]); got != want {
			t.Errorf("%s: work sum %s, want %s (%d rounds)", c.name, got, want, c.rounds)
		}
	}
}
