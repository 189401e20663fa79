package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"flowweight/controller/api"
	"flowweight/controller/config"
	"flowweight/controller/view"

	"github.com/prometheus/client_golang/prometheus"
)

// drainFake is the API's view of a controller with backends be1 and be2: it records drains
// and answers the drained question from a script, one view per ask, the last one repeated.
type drainFake struct {
	oneService
	mu     sync.Mutex
	drains []string
	script []view.DrainedView
	asked  int
}

func (f *drainFake) Drain(name string, drained bool) error {
	if name != "be1" && name != "be2" {
		return fmt.Errorf("%w: %q", view.ErrNoBackend, name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drains = append(f.drains, fmt.Sprint(name, " ", drained))
	return nil
}

func (f *drainFake) Drained(name string) (view.DrainedView, error) {
	if name != "be1" && name != "be2" {
		return view.DrainedView{}, view.ErrNoBackend
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.script) == 0 {
		return view.DrainedView{}, view.ErrNoBackend // removed by a reload
	}
	v := f.script[min(f.asked, len(f.script)-1)]
	f.asked++
	v.Backend = name
	return v, nil
}

func (f *drainFake) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.drains...)
}

// holding is a not-safe view: n connections from the probe, weight 0 confirmed on one switch.
func holding(n float64) view.DrainedView {
	age := 0.4
	return view.DrainedView{OperatorDrained: true, Connections: &n, ConnectionsSource: "probe", ConnectionsAge: &age,
		Switches: []view.SwitchDrain{{DPID: "00000000000000ab", WeightZero: true}},
		Holding:  []view.Hold{{Kind: "connections", Text: fmt.Sprintf("%.0f connections (probe, 0.4s ago)", n)}},
		Reason:   fmt.Sprintf("%.0f connections (probe, 0.4s ago)", n)}
}

// safe is a safe view whose count of 0 was reported just now.
func safe() view.DrainedView {
	v := holding(0)
	fresh := 0.0
	v.Safe, v.Holding, v.Reason, v.ConnectionsAge = true, nil, "", &fresh
	return v
}

const cliToken = "cli-token-0123456789abcdef"

// serveAPI runs the real API server over b, writes needing token ("" for none configured),
// on a fresh loopback port, and returns its base URL; it is closed when the test ends.
func serveAPI(t *testing.T, b api.Balancer, token string) string {
	t.Helper()
	srv, err := api.NewServer(b, prometheus.NewRegistry(), api.Options{Token: token, Limits: api.LimitsFrom(config.Default().API)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// cliFiles writes the token files and configurations the cases name.
func cliFiles(t *testing.T) map[string]string {
	dir := t.TempDir()
	files := map[string]string{}
	write := func(name, content string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	write("good.token", cliToken+"\n", 0o600)
	write("wrong.token", "wrong-token-0123456789abcdef\n", 0o600)
	write("open.token", cliToken+"\n", 0o644)
	write("with-token.toml", strings.Replace(testTOML, "[collector]", fmt.Sprintf("[api]\ntoken_file = %q\n[collector]", files["good.token"]), 1), 0o644)
	write("with-wrong.toml", strings.Replace(testTOML, "[collector]", fmt.Sprintf("[api]\ntoken_file = %q\n[collector]", files["wrong.token"]), 1), 0o644)
	write("no-token.toml", testTOML, 0o644)
	write("broken.toml", "[api\n", 0o644)
	files["missing.toml"] = filepath.Join(dir, "missing.toml")
	files["missing.token"] = filepath.Join(dir, "missing.token")
	return files
}

// TestDrainCommandArgsAndErrors: every bad invocation is a usage error (2) naming what is
// wrong, every refusal an error (1) naming the backend, the token's file or the API's
// answer, and nothing is drained by a refused command; good ones drain and undrain.
func TestDrainCommandArgsAndErrors(t *testing.T) {
	f := &drainFake{script: []view.DrainedView{safe()}}
	base := serveAPI(t, f, cliToken)
	files := cliFiles(t)
	sub := func(s string) string {
		for k, v := range files {
			s = strings.ReplaceAll(s, "{"+k+"}", v)
		}
		return strings.ReplaceAll(s, "{api}", base)
	}
	for _, c := range []struct {
		name    string
		drain   bool
		args    string
		rc      int
		out     string // in stdout (rc 0) or stderr
		drained string // recorded by the fake, "" for nothing
	}{
		{"no backend", true, "-api {api} -token-file {good.token}", 2, "want exactly one backend name, got 0", ""},
		{"two backends", true, "-api {api} -token-file {good.token} be1 be2", 2, "want exactly one backend name, got 2", ""},
		{"not a name", true, "-api {api} -token-file {good.token} be/1", 2, `"be/1" is not a backend name`, ""},
		{"zero timeout", true, "-api {api} -token-file {good.token} -wait -timeout 0s be1", 2, "-timeout (0s) and -interval (1s) must be positive", ""},
		{"api without scheme", true, "-api 127.0.0.1:9090 -token-file {good.token} be1", 2, `-api "127.0.0.1:9090": want http://`, ""},
		{"undrain has no -wait", false, "-api {api} -token-file {good.token} -wait be1", 2, "flag provided but not defined: -wait", ""},
		{"unknown backend", true, "-api {api} -token-file {good.token} nope", 1, `drain nope: the API answered 404 Not Found: no backend named "nope"`, ""},
		{"no token in the config", true, "-api {api} -config {no-token.toml} be1", 1, "drain be1: the API wants a bearer token (no token: {no-token.toml} sets no api.token_file)", ""},
		{"wrong token file", true, "-api {api} -token-file {wrong.token} be1", 1, "drain be1: the API refused the token from {wrong.token}", ""},
		{"wrong token from the config", false, "-api {api} -config {with-wrong.toml} be1", 1, "undrain be1: the API refused the token from {wrong.token}", ""},
		{"token file missing", true, "-api {api} -token-file {missing.token} be1", 1, "drain be1: -token-file: {missing.token}", ""},
		{"token file readable by others", true, "-api {api} -token-file {open.token} be1", 1, "drain be1: -token-file: {open.token}", ""},
		{"config missing", true, "-api {api} -config {missing.toml} be1", 1, "{missing.toml}", ""},
		{"config broken", true, "-api {api} -config {broken.toml} be1", 1, "{broken.toml}", ""},
		{"api down", true, "-api http://127.0.0.1:1 -token-file {good.token} be1", 1, "drain be1: the API at http://127.0.0.1:1:", ""},
		{"drain with the token file", true, "-api {api} -token-file {good.token} be1", 0, "be1: drained", "be1 true"},
		{"undrain with the config's token", false, "-api {api} -config {with-token.toml} be2", 0, "be2: undrained", "be2 false"},
		{"negative settle", true, "-api {api} -token-file {good.token} -wait -settle -1s be1", 2, "-settle (-1s) not negative", ""},
		{"drain -wait, safe at once", true, "-api {api} -config {with-token.toml} -wait -settle 0s be1", 0, "be1: safe to stop", "be1 true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.recorded())
			var stdout, stderr bytes.Buffer
			rc := drainCommand(context.Background(), strings.Fields(sub(c.args)), c.drain, &stdout, &stderr)
			text := stderr.String()
			if c.rc == 0 {
				text = stdout.String()
			}
			if rc != c.rc || !strings.Contains(text, sub(c.out)) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", rc, c.rc, sub(c.out), &stdout, &stderr)
			}
			got := f.recorded()[before:]
			if (c.drained == "" && len(got) != 0) || (c.drained != "" && (len(got) != 1 || got[0] != c.drained)) {
				t.Fatalf("drains recorded %q, want %q", got, c.drained)
			}
		})
	}
}

// TestDrainWait: -wait prints one line per change of the count as it falls, and exits 0
// only once the API says the backend is safe to stop; 1 at -timeout naming what holds it, 1
// when the backend disappears, 130 when interrupted.
func TestDrainWait(t *testing.T) {
	files := cliFiles(t)
	run := func(ctx context.Context, script []view.DrainedView, extra ...string) (int, string, string, int) {
		f := &drainFake{script: script}
		base := serveAPI(t, f, cliToken)
		var stdout, stderr bytes.Buffer
		args := append([]string{"-api", base, "-token-file", files["good.token"], "-wait", "-interval", "10ms", "-settle", "0s"}, extra...)
		rc := drainCommand(ctx, append(args, "be1"), true, &stdout, &stderr)
		f.mu.Lock()
		defer f.mu.Unlock()
		return rc, stdout.String(), stderr.String(), f.asked
	}
	t.Run("falls to zero", func(t *testing.T) {
		rc, out, errs, asked := run(context.Background(), []view.DrainedView{holding(50), holding(50), holding(20), holding(20), holding(1), safe()})
		if rc != 0 || asked != 6 {
			t.Fatalf("exit %d after %d asks, want 0 after 6\n%s%s", rc, asked, out, errs)
		}
		var counts []string
		line := regexp.MustCompile(`(?m)^ *[0-9.]+s  be1: ([0-9]+) connections \(probe, [0-9.]+s old\); weight 0 on 1 of 1 switches$`)
		for _, m := range line.FindAllStringSubmatch(out, -1) {
			counts = append(counts, m[1])
		}
		if strings.Join(counts, " ") != "50 20 1 0" || !strings.HasSuffix(out, "be1: safe to stop\n") {
			t.Fatalf("progress %v, want one line per change 50 20 1 0, then safe:\n%s", counts, out)
		}
	})
	t.Run("the zero must be counted -settle after weight 0 reached the switches", func(t *testing.T) {
		// Weight 0 confirmed at the first answer; safe at once by a count reported before
		// -settle passed, then a recount finds a connection, then safe for good: only a 0
		// reported -settle after the first answer ends the wait.
		script := []view.DrainedView{holding(2), safe(), holding(1)}
		for range 200 {
			script = append(script, safe())
		}
		start := time.Now()
		rc, out, errs, asked := run(context.Background(), script, "-settle", "300ms")
		if rc != 0 || asked < 4 || !strings.Contains(out, "be1: 1 connections") || !strings.HasSuffix(out, "be1: safe to stop\n") {
			t.Fatalf("exit %d after %d asks\n%s%s", rc, asked, out, errs)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("safe to stop after %v, before -settle 300ms passed", d)
		}
		if n := strings.Count(out, "be1: safe by the API; waiting for a count reported 300ms after weight 0 reached every switch"); n != 2 {
			t.Fatalf("%d waits for a later count, want 2 (the recount restarts it):\n%s", n, out)
		}
	})
	t.Run("a count reported before weight 0 reached the switches is not trusted", func(t *testing.T) {
		// The switch confirms only at the second answer; the third says safe with a count
		// reported 0.4s before it (holding(0)'s age), before the confirmation: not trusted.
		unconfirmed := holding(3)
		unconfirmed.Switches[0].WeightZero = false
		unconfirmed.Holding = append(unconfirmed.Holding, view.Hold{Kind: "switch", Text: "weight 0 not confirmed on switch 00000000000000ab"})
		old := holding(0)
		old.Safe, old.Holding, old.Reason = true, nil, ""
		rc, out, errs, _ := run(context.Background(), []view.DrainedView{unconfirmed, holding(3), old}, "-timeout", "300ms")
		if rc != 1 || !strings.Contains(errs, "0 connections, but no count reported 0s after weight 0 reached every switch yet") {
			t.Fatalf("exit %d\n%s%s", rc, out, errs)
		}
	})
	t.Run("times out naming the connections", func(t *testing.T) {
		start := time.Now()
		rc, out, errs, _ := run(context.Background(), []view.DrainedView{holding(50)}, "-timeout", "200ms")
		if rc != 1 || !strings.Contains(errs, "drain be1: not safe to stop after 200ms: 50 connections (probe, 0.4s ago)") {
			t.Fatalf("exit %d\n%s%s", rc, out, errs)
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 10*time.Second {
			t.Fatalf("returned after %v, want about 200ms", d)
		}
	})
	t.Run("backend removed", func(t *testing.T) {
		rc, out, errs, _ := run(context.Background(), nil)
		if rc != 1 || !strings.Contains(errs, `drain be1: no such backend: no backend named "be1" (removed by a reload?)`) {
			t.Fatalf("exit %d\n%s%s", rc, out, errs)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		rc, out, errs, _ := run(ctx, []view.DrainedView{holding(7)})
		if rc != exitInterrupted || !strings.Contains(errs, "interrupted; it stays drained, not yet safe to stop: 7 connections") {
			t.Fatalf("exit %d\n%s%s", rc, out, errs)
		}
	})
}
