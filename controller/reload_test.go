package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowweight/controller/balancer"
	"flowweight/controller/cfgwatch"
	"flowweight/controller/config"
	"flowweight/internal/testutil"
)

// testTOML keeps the default listen addresses (nothing listens: Run is not called), so that
// an empty file, which has them too, is a valid replacement.
var testTOML = testutil.Fixture("testdata/web.toml")

// TestReloadFlow runs the binary's watcher on a real file: an emptied file is refused, and
// `reload -allow-removal` applies it once; the confirmation does not outlive its use.
func TestReloadFlow(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "push.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "controller.toml")
	statePath := filepath.Join(dir, "state", "controller.state")
	if err := os.Mkdir(filepath.Dir(statePath), 0o700); err != nil {
		t.Fatal(err)
	}
	full := []byte(strings.Replace(testTOML, "KEY", key, 1))
	if err := os.WriteFile(path, full, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(path, full)
	if err != nil {
		t.Fatal(err)
	}
	b, err := balancer.New(cfg, balancer.Options{StatePath: statePath})
	if err != nil {
		t.Fatal(err)
	}
	c := &configWatch{b: b, path: path, confirm: confirmPath(path, statePath), log: slog.New(slog.DiscardHandler)}
	c.applied = sha(full)
	c.last = c.applied
	done := make(chan cfgwatch.Snapshot, 16)
	w, err := cfgwatch.New(cfgwatch.Config{Paths: []string{path, c.confirm}, Baseline: [][]byte{full, nil},
		Debounce: 10 * time.Millisecond, OnChange: func(s cfgwatch.Snapshot) { c.onChange(s); done <- s }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { w.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	wait := func() cfgwatch.Snapshot {
		t.Helper()
		select {
		case s := <-done:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no reload within 10s")
			return cfgwatch.Snapshot{}
		}
	}
	lastEvent := func() string {
		ev := b.View().Events()
		if len(ev) == 0 {
			return ""
		}
		return ev[len(ev)-1].Text
	}

	// The file is emptied: refused, nothing changes.
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wait()
	if len(b.Config().Services) != 1 || !strings.Contains(lastEvent(), "reload refused") {
		t.Fatalf("an emptied file was applied: %d services, event %q", len(b.Config().Services), lastEvent())
	}

	// The operator confirms: applied, and the used confirmation is removed.
	if code := reloadCommand([]string{"-allow-removal", "-config", path, "-state", statePath}); code != 0 {
		t.Fatalf("reload -allow-removal exited %d", code)
	}
	// The controller applies the file and then removes the confirmation, in the watcher's
	// goroutine; the watcher then sees the confirmation gone. Wait for that snapshot: the
	// config checked after an earlier one could be applied while the removal is still to come.
	for {
		s := wait()
		if len(s.Files) == 2 && s.Files[1].Data == nil && len(b.Config().Services) == 0 {
			break
		}
	}
	if _, err := os.Stat(c.confirm); !os.IsNotExist(err) {
		t.Fatalf("the used confirmation is still there: %v", err)
	}
	// The full file back needs no confirmation; emptying it again needs a new one.
	if err := os.WriteFile(path, full, 0o644); err != nil {
		t.Fatal(err)
	}
	for len(b.Config().Services) != 1 {
		wait()
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wait()
	if len(b.Config().Services) != 1 {
		t.Fatal("an old confirmation applied to a later emptying of the file")
	}

	// A confirmation of other content does not apply, nor does an expired one.
	onlyA := []byte(strings.Replace(string(full), "  [[service.backend]]\n  name = \"b\"\n  ip = \"10.0.0.2\"\n  [[service.backend]]\n  name = \"c\"\n  ip = \"10.0.0.3\"\n", "", 1))
	onlyB := []byte(strings.Replace(string(full), "  [[service.backend]]\n  name = \"a\"\n  ip = \"10.0.0.1\"\n", "", 1))
	onlyB = []byte(strings.Replace(string(onlyB), "  [[service.backend]]\n  name = \"c\"\n  ip = \"10.0.0.3\"\n", "", 1))
	if string(onlyA) == string(full) || string(onlyB) == string(full) {
		t.Fatal("test bug: backends not cut")
	}
	if err := os.WriteFile(path, onlyB, 0o644); err != nil {
		t.Fatal(err)
	}
	wait()
	for _, conf := range []config.Confirmation{config.Confirm(onlyA, time.Now(), time.Hour), config.Confirm(onlyB, time.Now().Add(-time.Hour), time.Minute)} {
		if err := os.WriteFile(c.confirm, conf.Encode(), 0o644); err != nil {
			t.Fatal(err)
		}
		wait()
		if n := len(b.Config().Services[0].Backends); n != 3 {
			t.Fatalf("a confirmation of other content or an expired one applied the file: %d backends", n)
		}
	}
	if code := reloadCommand([]string{"-allow-removal", "-config", path, "-state", statePath}); code != 0 {
		t.Fatal(code)
	}
	for len(b.Config().Services[0].Backends) != 1 {
		wait()
	}
	if err := os.WriteFile(path, full[:len(full)/3], 0o644); err != nil { // invalid: cut mid-service
		t.Fatal(err)
	}
	wait()
	if code := reloadCommand([]string{"-allow-removal", "-config", path, "-state", statePath}); code == 0 {
		t.Fatal("reload -allow-removal confirmed an invalid file")
	}
}

func TestReloadCommandUsage(t *testing.T) {
	if code := reloadCommand(nil); code != 2 {
		t.Fatalf("reload without -allow-removal exited %d, want 2", code)
	}
	if code := reloadCommand([]string{"-allow-removal", "-config", filepath.Join(t.TempDir(), "none")}); code != 1 {
		t.Fatalf("reload of a missing file exited %d, want 1", code)
	}
}

func sha(b []byte) [32]byte {
	var s [32]byte
	copy(s[:], mustHex(config.Confirm(b, time.Now(), time.Minute).SHA256))
	return s
}
