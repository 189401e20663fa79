//go:build integration

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestDrainWaitForConnections runs `controller drain -wait` on the real switch, as an
// operator would before stopping a backend: be1 holds 50 long-lived TCP connections through
// the VIP (be2 was drained while they opened, so every one is on be1). The command must
// still be waiting, with weight 0 confirmed on the switch, while 50 and then 1 connection
// stay open, and exit 0 only after the last one closes; with connections that stay open,
// -timeout 3s exits 1 naming them. Unknown backends and missing or wrong tokens are refused
// with messages that name them, and change nothing.
func TestDrainWaitForConnections(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 83, Quotas: []float64{0.5, 0.5}, Work: 2000, APIToken: true})
	api := "http://" + scenario.APIAddr
	ctl := func(ctx context.Context, stdout, stderr io.Writer, args ...string) *exec.Cmd {
		c := s.Ctl.Command(ctx, s.Opts.Bins.Controller, args...)
		c.Stdout, c.Stderr = stdout, stderr
		return c
	}
	// run runs a controller subcommand to its end and returns its exit status and output.
	run := func(args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out, errs bytes.Buffer
		err := ctl(ctx, &out, &errs, args...).Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, out.String(), errs.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), out.String(), errs.String()
		}
		t.Fatalf("controller %v: %v", args, err)
		return 0, "", ""
	}
	setDrain := func(verb, name string) {
		t.Helper()
		if rc, out, errs := run(verb, "-api", api, "-config", s.ConfigPath, name); rc != 0 {
			t.Fatalf("controller %s %s: exit %d\n%s%s", verb, name, rc, out, errs)
		}
	}
	weights := func(what string, ok func(w map[string]uint16) bool) {
		t.Helper()
		if _, err := waitFor(20*time.Second, func() error {
			w, err := s.GroupWeights()
			if err != nil {
				return err
			}
			if !ok(w) {
				return fmt.Errorf("group weights %v", w)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: not within 20s: %v", what, err)
		}
	}

	t.Run("bad input", func(t *testing.T) {
		wrong := filepath.Join(s.Opts.Dir, "wrong.token")
		if err := os.WriteFile(wrong, []byte("not-the-token-0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"drain", "-api", api, "-config", s.ConfigPath, "nope"}, `drain nope: the API answered 404 Not Found: no backend named "nope"`},
			{[]string{"drain", "-api", api, "-config", s.ConfigPath, "-wait", "nope"}, `no backend named "nope"`},
			{[]string{"drain", "-api", api, "-token-file", wrong, "be1"}, "drain be1: the API refused the token from " + wrong},
			{[]string{"undrain", "-api", api, "-config", filepath.Join(s.Opts.Dir, "none.toml"), "be1"}, "none.toml"},
			{[]string{"drain", "-api", api, "be1"}, "drain be1: the API wants a bearer token (no token: /etc/flowweight/controller.toml does not exist"},
		} {
			rc, out, errs := run(c.args...)
			if rc != 1 || !strings.Contains(errs, c.want) {
				t.Errorf("controller %v: exit %d, want 1 with %q\n%s%s", c.args, rc, c.want, out, errs)
			}
		}
		if rc, _, errs := run("drain", "-api", api, "-config", s.ConfigPath, "-wait", "-timeout", "0s", "be1"); rc != 2 || !strings.Contains(errs, "-timeout (0s)") {
			t.Errorf("drain -timeout 0s: exit %d, want 2: %s", rc, errs)
		}
		v, err := s.Service()
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range v.Backends {
			if b.OperatorDrain {
				t.Fatalf("a refused command drained %s", b.Name)
			}
		}
	})

	// 50 connections, all on be1: be2 is drained while they open.
	setDrain("drain", "be2")
	weights("be2 drained", func(w map[string]uint16) bool { return w["be2"] == 0 && w["be1"] > 0 })
	most, err := s.LongConns(49, 500*time.Millisecond, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer most.Stop()
	last, err := s.LongConns(1, 500*time.Millisecond, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer last.Stop()
	if a, b := most.Status(), last.Status(); a.PerBackend["be1"] != 49 || b.PerBackend["be1"] != 1 || a.Broken+b.Broken != 0 {
		t.Fatalf("connections per backend %v and %v (broken %v %v), want all 50 on be1", a.PerBackend, b.PerBackend, a.Reasons, b.Reasons)
	}
	setDrain("undrain", "be2")
	weights("be2 back", func(w map[string]uint16) bool { return w["be2"] > 0 && w["be1"] > 0 })

	// counted waits until the probe's count of name's connections, as the API shows it, is n:
	// a probe reuses its count for conns_interval, and the drains below start from a count
	// that has seen the connections.
	counted := func(name string, n float64) {
		t.Helper()
		if _, err := waitFor(20*time.Second, func() error {
			var backends []struct {
				Name        string   `json:"name"`
				Connections *float64 `json:"connections"`
			}
			if err := s.API("/api/v1/backends", &backends); err != nil {
				return err
			}
			seen := "none reported"
			for _, b := range backends {
				if b.Name == name && b.Connections != nil {
					if *b.Connections == n {
						return nil
					}
					seen = fmt.Sprint(*b.Connections)
				}
			}
			return fmt.Errorf("%s's count is %s, not %v yet", name, seen, n)
		}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("drain -wait returns when the last connection closes", func(t *testing.T) {
		counted("be1", 50)
		var out, errs scenario.LockedBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := ctl(ctx, &out, &errs, "drain", "-api", api, "-config", s.ConfigPath, "-wait", "-timeout", "60s", "-interval", "200ms", "be1")
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		defer func() {
			t.Logf("controller drain -wait -timeout 60s be1 (output):\n%s%s", out.String(), errs.String())
		}()
		// stillWaiting waits until the command has printed a line for n connections with weight
		// 0 confirmed on the switch (a settled state: drained, on the switch, counted), and checks
		// it has not exited.
		stillWaiting := func(n int) {
			t.Helper()
			line := regexp.MustCompile(`(?m)^ *[0-9.]+s  be1: ` + strconv.Itoa(n) + ` connections \(probe, [0-9.]+s old\); weight 0 on 1 of 1 switches$`)
			if _, err := waitFor(20*time.Second, func() error {
				select {
				case err := <-exited:
					exited <- err
					return nil
				default:
				}
				if !line.MatchString(out.String()) {
					return fmt.Errorf("no line for %d connections with weight 0 confirmed yet", n)
				}
				return nil
			}); err != nil {
				t.Fatalf("%v:\n%s%s", err, out.String(), errs.String())
			}
			select {
			case err := <-exited:
				t.Fatalf("drain -wait exited (%v) with %d connections open:\n%s%s", err, n, out.String(), errs.String())
			default:
			}
			// The endpoint a preStop hook polls agrees: 503, held by the connections alone.
			code, body := getDrained(t, s, "be1")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, `"kind": "connections"`) || strings.Contains(body, `"kind": "switch"`) {
				t.Fatalf("GET /api/v1/backends/be1/drained with %d connections open: %d %s", n, code, body)
			}
		}
		stillWaiting(50)
		most.Stop()
		stillWaiting(1)
		if o := out.String(); strings.Contains(o, "be1: safe to stop\n") || strings.Contains(o, "safe by the API") {
			t.Fatalf("said safe with connections open:\n%s", out.String())
		}
		closed := time.Now()
		last.Stop()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("drain -wait: %v after the last connection closed:\n%s%s", err, out.String(), errs.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("drain -wait still running 30s after the last connection closed:\n%s%s", out.String(), errs.String())
		}
		if !strings.Contains(out.String(), "be1: 0 connections (probe") || !strings.HasSuffix(out.String(), "be1: safe to stop\n") {
			t.Fatalf("output does not end with the count at 0 and safe to stop:\n%s", out.String())
		}
		if code, body := getDrained(t, s, "be1"); code != http.StatusOK {
			t.Fatalf("GET drained after drain -wait returned 0: %d %s", code, body)
		}
		figure(t, "drain -wait: from the last connection's close to exit 0", "%v (whole wait %v)",
			time.Since(closed).Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond))
	})

	t.Run("drain -wait times out naming the connections", func(t *testing.T) {
		// be1 stays drained; 10 connections on be2, which then is drained with them open.
		held, err := s.LongConns(10, 500*time.Millisecond, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Stop()
		if st := held.Status(); st.PerBackend["be2"] != 10 {
			t.Fatalf("connections per backend %v, want all 10 on be2", st.PerBackend)
		}
		setDrain("undrain", "be1") // so that draining be2 leaves a live backend (no panic weights)
		weights("be1 back", func(w map[string]uint16) bool { return w["be1"] > 0 })
		counted("be2", 10)
		start := time.Now()
		rc, out, errs := run("drain", "-api", api, "-config", s.ConfigPath, "-wait", "-timeout", "3s", "be2")
		took := time.Since(start)
		t.Logf("controller drain -wait -timeout 3s be2: exit %d after %v\n%s%s", rc, took.Round(10*time.Millisecond), out, errs)
		if rc != 1 || !strings.Contains(errs, "drain be2: not safe to stop after 3s: ") || !regexp.MustCompile(`\b10 connections \(probe, [0-9.]+s ago\)`).MatchString(errs) {
			t.Fatalf("exit %d, want 1 naming the 10 connections", rc)
		}
		if took < 3*time.Second || took > 20*time.Second {
			t.Fatalf("returned after %v, want about 3s", took)
		}
		if st := held.Stop(); st.Broken != 0 || st.Opened != 10 {
			t.Fatalf("the drain broke connections: %v", st.Reasons)
		}
	})
}

// getDrained asks the drained endpoint from inside "ctl", without a token.
func getDrained(t *testing.T, s *scenario.Scenario, name string) (int, string) {
	t.Helper()
	resp, err := s.Ctl.HTTPClient(5 * time.Second).Get("http://" + scenario.APIAddr + "/api/v1/backends/" + name + "/drained")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
