//go:build integration

package api

import (
	"context"
	"flowweight/controller/view"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromium runs Debian's headless Chromium with the flags this machine needs (no sandbox as
// root, no background networking: the network is closed) and a fresh profile.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (apt-get install chromium): the dashboard test needs a real browser")
	}
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=8000", "--window-size=1280,900"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(base, args...)...).Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return out
}

var weightCell = regexp.MustCompile(`<tr data-backend="([^"]+)">.*?data-weight="(\d+)"`)

func TestDashboardShowsTheAPIsWeights(t *testing.T) {
	r := startController(t, "")
	svcs := r.feed(t)
	want := map[string]uint16{}
	for _, b := range svcs[0].Backends {
		want[b.Name] = b.AppliedWeight
	}

	dom := chromium(t, "--dump-dom", r.url+"/")
	if !regexp.MustCompile(`data-loaded="1"`).Match(dom) {
		t.Fatalf("dashboard never loaded its data:\n%s", dom)
	}
	got := map[string]uint16{}
	for _, m := range weightCell.FindAllSubmatch(dom, -1) {
		w, _ := strconv.Atoi(string(m[2]))
		got[string(m[1])] = uint16(w)
	}
	// The weights may have moved between the API read and the page's own fetch; compare with
	// the API again right after if the first comparison fails.
	if !equal(got, want) {
		var now []view.ServiceView
		get(t, r.url+"/api/v1/services", &now)
		for _, b := range now[0].Backends {
			want[b.Name] = b.AppliedWeight
		}
	}
	if !equal(got, want) {
		t.Fatalf("dashboard shows %v, API says %v", got, want)
	}
	// Which signals each backend reports, and why the headroom policy fell back.
	for _, b := range svcs[0].Backends {
		cell := regexp.MustCompile(`<tr data-backend="` + regexp.QuoteMeta(b.Name) + `">.*?data-signals="([^"]*)"`).FindSubmatch(dom)
		if cell == nil || string(cell[1]) != b.Signals {
			t.Errorf("dashboard signals of %s: %q, API says %q", b.Name, cell, b.Signals)
		}
	}
	if !regexp.MustCompile(`data-fallback="1"[^>]*>policy fallback: headroom needs`).Match(dom) {
		t.Errorf("dashboard does not say the policy fell back:\n%s", dom)
	}

	out := os.Getenv("TEST_OUTPUT_DIR")
	if out == "" {
		out = t.TempDir()
	}
	shot := filepath.Join(out, "dashboard.png")
	chromium(t, "--screenshot="+shot, r.url+"/")
	fi, err := os.Stat(shot)
	if err != nil || fi.Size() < 5000 {
		t.Fatalf("screenshot %s: %v (size %v)", shot, err, fi)
	}
	t.Logf("dashboard screenshot: %s (%d bytes); weights %v", shot, fi.Size(), got)
}

func equal(a, b map[string]uint16) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestBrowserCannotDrainCrossSiteOrRebind drives a real browser the two ways a page on the
// operator's machine could reach the loopback API: a page on another origin that posts a
// drain (fetch and a form; CSRF), and a foreign name resolved to the API's address (DNS
// rebinding, simulated with Chromium's resolver rules). Neither may change anything, and
// the refusal counters show the browser's requests did arrive and were refused.
func TestBrowserCannotDrainCrossSiteOrRebind(t *testing.T) {
	r := startController(t, "")
	r.feed(t)
	addr := strings.TrimPrefix(r.url, "http://")
	_, port, _ := net.SplitHostPort(addr)

	// Two pages, one browser run each (a form submitted from a fetch's callback never
	// finishes loading under --virtual-time-budget).
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if req.URL.Path == "/form" {
			fmt.Fprintf(w, `<!doctype html><form id="f" method="POST" action="%s/api/v1/backends/small/drain"></form>
<script>document.getElementById("f").submit();</script>`, r.url)
			return
		}
		fmt.Fprintf(w, `<!doctype html><script>fetch("%s/api/v1/backends/big/drain", {method: "POST", mode: "no-cors"})
  .then(r => document.body.append("fetch answered " + r.type), e => document.body.append("fetch failed " + e));</script>`, r.url)
	}))
	defer evil.Close()
	if dom := chromium(t, "--dump-dom", evil.URL+"/"); !strings.Contains(string(dom), "fetch answered") {
		t.Errorf("the cross-site fetch was not sent:\n%s", dom)
	}
	if dom := chromium(t, "--dump-dom", evil.URL+"/form"); !strings.Contains(string(dom), "refused: Sec-Fetch-Site") {
		t.Errorf("the form post's answer is not the refusal:\n%s", dom)
	}
	for _, name := range []string{"small", "big"} {
		if st, _ := r.b.Pool().Get(name); st.OperatorDrain {
			t.Fatalf("a page on %s drained %s", evil.URL, name)
		}
	}
	if n := counter(t, addr, "flowweight_api_requests_refused_total", `{reason="cross_site"}`); n < 2 {
		t.Fatalf("%v cross-site requests refused, want the fetch and the form", n)
	}

	dom := chromium(t, "--host-resolver-rules=MAP rebind.evil.example 127.0.0.1", "--dump-dom", "http://rebind.evil.example:"+port+"/api/v1/services")
	if !strings.Contains(string(dom), `refused: Host "rebind.evil.example:`+port+`"`) || strings.Contains(string(dom), `"small"`) {
		t.Fatalf("a rebound name read the API:\n%s", dom)
	}
}
