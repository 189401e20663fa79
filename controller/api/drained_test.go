package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"flowweight/controller/view"
)

// TestDrainedEndpoint: GET /api/v1/backends/NAME/drained is 200 only when the backend is
// safe to stop, 503 with the reason otherwise, 404 naming an unknown backend, 400 for a name
// that cannot be one; like every GET it needs no token, even when writes do.
func TestDrainedEndpoint(t *testing.T) {
	_, _, addr := startFake(t, Options{Token: testToken})
	for _, c := range []struct {
		name string
		code int
		want string // in the body
	}{
		{"small", 200, `"safe": true`},
		{"big", 503, `"reason": "3 connections (probe, 0.5s ago)"`},
		{"nope", 404, `no backend named "nope"`},
		{"a%20b", 400, `backend name "a b" is not`},
	} {
		resp, body := raw(t, addr, "GET /api/v1/backends/"+c.name+"/drained HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s/drained: %d %q, want %d with %q", c.name, resp.StatusCode, body, c.code, c.want)
		}
		if c.code == 200 || c.code == 503 {
			var v view.DrainedView
			if err := json.Unmarshal([]byte(body), &v); err != nil || v.Backend != c.name {
				t.Errorf("GET %s/drained: body %q is not its view (%v)", c.name, body, err)
			}
		}
	}
}

// TestDrainedOnTheRunningController: the endpoint reads the running controller's board: a
// backend not drained, then drained but with no switch to confirm weight 0, is not safe.
func TestDrainedOnTheRunningController(t *testing.T) {
	const tok = "s3cret-0123456789abcdef"
	r := startController(t, tok)
	r.feed(t)
	drained := func() (int, view.DrainedView) {
		t.Helper()
		resp, err := http.Get(r.url + "/api/v1/backends/small/drained")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v view.DrainedView
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, v
	}
	code, v := drained()
	if code != 503 || !strings.Contains(v.Reason, "not drained by the operator") || v.Connections == nil || *v.Connections != 3 || v.ConnectionsSource != "probe" {
		t.Fatalf("before the drain: %d %+v", code, v)
	}
	if post(t, r.url+"/api/v1/backends/small/drain", tok) != 200 {
		t.Fatal("drain refused")
	}
	code, v = drained()
	if code != 503 || strings.Contains(v.Reason, "not drained") || !strings.Contains(v.Reason, "no connected switch") {
		t.Fatalf("drained, no switch: %d %+v", code, v)
	}
}
