//go:build integration

package api

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"flowweight/controller/balancer"
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
		var now []balancer.ServiceView
		get(t, r.url+"/api/v1/services", &now)
		for _, b := range now[0].Backends {
			want[b.Name] = b.AppliedWeight
		}
	}
	if !equal(got, want) {
		t.Fatalf("dashboard shows %v, API says %v", got, want)
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
