package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/controller/balancer"
	"flowweight/controller/cfgwatch"
	"flowweight/controller/config"
	"flowweight/controller/history"
)

// lab is a controller's files in a temporary directory: the configuration, a push key, and
// the state directory that holds the history.
type lab struct {
	dir, path, state, key string
	hist                  *configHistory
	seen                  atomic.Pointer[[]byte] // the configuration the watcher last delivered (watch)
}

func newLab(t *testing.T) *lab {
	t.Helper()
	dir := t.TempDir()
	l := &lab{dir: dir, path: filepath.Join(dir, "controller.toml"), state: filepath.Join(dir, "state", "controller.state"), key: filepath.Join(dir, "push.key")}
	if err := os.WriteFile(l.key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Dir(l.state), 0o700); err != nil {
		t.Fatal(err)
	}
	l.hist = newConfigHistory(l.state, slog.New(slog.DiscardHandler))
	return l
}

// toml is the test configuration with edits (pairs of old and new) applied.
func (l *lab) toml(t *testing.T, pairs ...string) []byte {
	t.Helper()
	s := strings.Replace(testTOML, "KEY", l.key, 1)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("test bug: %q not in the configuration", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return []byte(s)
}

// applied records versions as a controller that applied them in turn would, and leaves the
// last one in the configuration file.
func (l *lab) applied(t *testing.T, contents ...[]byte) {
	t.Helper()
	for _, c := range contents {
		l.hist.applied(l.path, c, "file changed", 5)
	}
	if err := os.WriteFile(l.path, contents[len(contents)-1], 0o644); err != nil {
		t.Fatal(err)
	}
}

func (l *lab) rollback(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := rollbackCommand(append([]string{"-config", l.path, "-state", l.state}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// capB is the test configuration's backend b with a capacity.
func capB(c string) []string {
	return []string{"name = \"b\"\n  ip = \"10.0.0.2\"\n", "name = \"b\"\n  ip = \"10.0.0.2\"\n  capacity = " + c + "\n"}
}

// TestRollbackRefused: every rollback that must not happen exits non-zero with an error that
// names what is wrong, and leaves the configuration file byte for byte as it was, with no
// request or confirmation behind.
func TestRollbackRefused(t *testing.T) {
	noA := []string{"  [[service.backend]]\n  name = \"a\"\n  ip = \"10.0.0.1\"\n", "", "  [[service.backend]]\n  name = \"c\"\n  ip = \"10.0.0.3\"\n", ""}
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, l *lab) // the history and the file
		args  []string
		code  int
		want  []string
	}{
		{"not a number", nil, []string{"two"}, 2, []string{`version "two": not a version number`}},
		{"zero", nil, []string{"0"}, 2, []string{`version "0"`}},
		{"negative", nil, []string{"-1"}, 2, []string{"flag provided but not defined: -1"}},
		{"two versions", nil, []string{"1", "2"}, 2, []string{"usage:"}},
		{"unknown version", nil, []string{"9"}, 1, []string{"no version 9 (kept: 1, 2)", "controller.state.history"}},
		{"no history", func(t *testing.T, l *lab) { os.WriteFile(l.path, l.toml(t), 0o644) }, nil, 1,
			[]string{"no configuration recorded yet", "controller.state.history"}},
		{"only one version", func(t *testing.T, l *lab) { l.applied(t, l.toml(t)) }, nil, 1, []string{"nothing to roll back to", "only version 1"}},
		{"a key file gone", func(t *testing.T, l *lab) {
			k := filepath.Join(l.dir, "a.key")
			os.WriteFile(k, []byte("fedcba9876543210fedcba9876543210\n"), 0o600)
			l.applied(t, l.toml(t, "name = \"a\"\n", "name = \"a\"\n  key_file = \""+k+"\"\n"), l.toml(t))
			os.Remove(k)
		}, []string{"1"}, 1, []string{"version 1 no longer validates", `backend "a": key_file: key file`, "a.key", "no such file"}},
		{"a token file gone", func(t *testing.T, l *lab) {
			tok := filepath.Join(l.dir, "api.token")
			os.WriteFile(tok, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
			l.applied(t, l.toml(t, "[collector]", "[api]\ntoken_file = \""+tok+"\"\n[collector]"), l.toml(t))
			os.Remove(tok)
		}, []string{"1"}, 1, []string{"version 1 no longer validates", "api.token_file", "api.token"}},
		{"a removal without -allow-removal", func(t *testing.T, l *lab) { l.applied(t, l.toml(t, noA...), l.toml(t)) }, nil, 1,
			[]string{"version 1 would remove 2 of 3 backends (web/a, web/c)", "-allow-removal"}},
		{"a change only a restart makes", func(t *testing.T, l *lab) {
			l.applied(t, l.toml(t, "[collector]", "[api]\nlisten = \"127.0.0.1:9999\"\n[collector]"), l.toml(t))
		}, nil, 1, []string{"cannot be applied by a reload", "api.listen", "needs a restart"}},
		{"a file with changes never applied", func(t *testing.T, l *lab) {
			l.applied(t, l.toml(t, capB("2")...), l.toml(t))
			os.WriteFile(l.path, l.toml(t, capB("3")...), 0o644)
		}, nil, 1, []string{"holds content that was never applied", "-force"}},
		{"a damaged version", func(t *testing.T, l *lab) {
			l.applied(t, l.toml(t, capB("2")...), l.toml(t))
			p := filepath.Join(history.DirFor(l.state), "00000001.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte("capacity = 2"), []byte("capacity = 9"), 1), 0o600)
		}, []string{"1"}, 1, []string{"version 1", "00000001.json", "does not match the content"}},
		{"no state file", nil, []string{"-state", ""}, 1, []string{"keeps no history"}},
		{"a damaged running version, with -force", func(t *testing.T, l *lab) {
			l.applied(t, l.toml(t), l.toml(t, capB("2")...), l.toml(t, capB("3")...))
			os.WriteFile(filepath.Join(history.DirFor(l.state), "00000003.json"), []byte("{"), 0o600)
		}, []string{"-force"}, 1, []string{"the newest version, the running configuration, cannot be read", "00000003.json"}},
		{"another file than the controller's", nil, []string{"-config", "/etc/other.toml"}, 1,
			[]string{"-config /etc/other.toml: the running configuration (version 2) was read from", "controller.toml"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t)
			setup := tt.setup
			if setup == nil {
				setup = func(t *testing.T, l *lab) { l.applied(t, l.toml(t, capB("2")...), l.toml(t)) }
			}
			setup(t, l)
			before, _ := os.ReadFile(l.path)
			code, out, errOut := l.rollback(tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr does not say %q:\n%s", w, errOut)
				}
			}
			if after, _ := os.ReadFile(l.path); !bytes.Equal(before, after) {
				t.Errorf("the configuration file changed:\n%s", after)
			}
			for _, p := range []string{history.RequestFor(l.state), confirmPath(l.path, l.state)} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s left behind: %v", p, err)
				}
			}
		})
	}
}

// refuser is a part of the controller that refuses any configuration where capacity is 7, as
// the running controller may refuse what the command's own checks passed (the API's limits).
type refuser struct{}

func (refuser) CheckReload(c *config.Config) error {
	for _, be := range c.Services[0].Backends {
		if be.Capacity == 7 {
			return errors.New("api.read_timeout: changing 10s to 1s needs a restart")
		}
	}
	return nil
}
func (refuser) Reload(*config.Config) error { return nil }

// watch runs the binary's configuration watcher with a real balancer (not running: no
// switch), as the controller does, from the file's current content.
func (l *lab) watch(t *testing.T) *balancer.Balancer {
	t.Helper()
	data, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadData(l.path, data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := balancer.New(cfg, balancer.Options{StatePath: l.state})
	if err != nil {
		t.Fatal(err)
	}
	l.hist.applied(l.path, data, "start", cfg.Controller.ConfigHistory)
	c := &configWatch{b: b, also: refuser{}, path: l.path, confirm: confirmPath(l.path, l.state), log: slog.New(slog.DiscardHandler), hist: l.hist, applied: sha(data), running: data}
	c.last = c.applied
	w, err := cfgwatch.New(cfgwatch.Config{Paths: []string{l.path, c.confirm}, Baseline: [][]byte{data, nil},
		Debounce: 10 * time.Millisecond, OnChange: func(s cfgwatch.Snapshot) { c.onChange(s); l.seen.Store(&s.Files[0].Data) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { w.Run(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
	return b
}

// replaceFile writes the configuration as an operator's tool does: a new file renamed into
// place.
func (l *lab) replaceFile(t *testing.T, data []byte) {
	t.Helper()
	tmp := l.path + ".new"
	if err := os.WriteFile(tmp, data, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		t.Fatal(err)
	}
}

func capacityOfB(b *balancer.Balancer) float64 {
	for _, be := range b.Config().Services[0].Backends {
		if be.Name == "b" {
			return be.Capacity
		}
	}
	return -1
}

// newest is the newest version kept.
func (l *lab) newest(t *testing.T) history.Entry {
	t.Helper()
	kept, bad, err := history.Store{Dir: history.DirFor(l.state)}.List()
	if err != nil || len(bad) > 0 || len(kept) == 0 {
		t.Fatalf("history: %v, %v, %d versions", err, bad, len(kept))
	}
	return kept[len(kept)-1]
}

// TestRollbackFlow runs the commands against the binary's own watcher and reload: a reload
// is recorded, `history` lists it with what changed, `rollback` puts the previous version
// back through the reload and records it as a new version, and a version the controller
// refuses leaves the file as it was.
func TestRollbackFlow(t *testing.T) {
	l := newLab(t)
	v1 := l.toml(t)
	if err := os.WriteFile(l.path, v1, 0o640); err != nil {
		t.Fatal(err)
	}
	b := l.watch(t)
	v2 := l.toml(t, capB("2")...)
	l.replaceFile(t, v2)
	deadline := time.Now().Add(10 * time.Second)
	for capacityOfB(b) != 2 || l.newest(t).Number != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the reload to capacity 2 was not applied and recorded: capacity %v, newest version %d", capacityOfB(b), l.newest(t).Number)
		}
		time.Sleep(10 * time.Millisecond)
	}

	var out, errOut bytes.Buffer
	if code := historyCommand([]string{"-state", l.state}, &out, &errOut); code != 0 {
		t.Fatalf("history exited %d: %s", code, errOut.String())
	}
	for _, w := range []string{"VERSION", "1 ", "start", "(oldest kept)", "2 ", "file changed", "web: capacity b 1→2", "version 2 is the running configuration"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("history does not show %q:\n%s", w, out.String())
		}
	}
	t.Logf("controller history:\n%s", out.String())

	// Back to version 1: applied through the reload, recorded as version 3, the file is
	// version 1 again with its mode kept.
	code, stdout, stderr := l.rollback("-wait", "10s")
	if code != 0 {
		t.Fatalf("rollback exited %d:\n%s%s", code, stdout, stderr)
	}
	t.Logf("controller rollback:\n%s", stdout)
	if capacityOfB(b) != 1 {
		t.Errorf("after the rollback backend b has capacity %v, want 1 again", capacityOfB(b))
	}
	e := l.newest(t)
	if e.Number != 3 || e.Source != "rollback to version 1" || e.Content != string(v1) {
		t.Errorf("newest version %d by %q, want 3 by \"rollback to version 1\" with version 1's content", e.Number, e.Source)
	}
	if got, _ := os.ReadFile(l.path); !bytes.Equal(got, v1) {
		t.Errorf("the file is not version 1:\n%s", got)
	}
	if fi, _ := os.Stat(l.path); fi.Mode().Perm() != 0o640 {
		t.Errorf("the file's mode went from 0640 to %04o", fi.Mode().Perm())
	}
	if !strings.Contains(stdout, "web: capacity b 2→1") || !strings.Contains(stdout, "applied version 1 as version 3") {
		t.Errorf("rollback output:\n%s", stdout)
	}
	if _, err := os.Stat(history.RequestFor(l.state)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the rollback request is still there: %v", err)
	}

	// A version the running controller refuses: the command says why and puts the file back.
	v4 := l.toml(t, capB("7")...)
	l.replaceFile(t, l.toml(t, capB("5")...)) // version 4, capacity 5
	for capacityOfB(b) != 5 || l.newest(t).Number != 4 {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("capacity 5 not applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Version 5 with capacity 7 cannot be made by a reload (refuser): write it into the
	// history as if an older controller had applied it, then roll back to it.
	if _, _, err := (history.Store{Dir: history.DirFor(l.state)}).Record(v4, "file changed", l.path, time.Now(), 5); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (history.Store{Dir: history.DirFor(l.state)}).Record(l.toml(t, capB("5")...), "file changed", l.path, time.Now(), 5); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(l.path)
	code, stdout, stderr = l.rollback("-wait", "10s", "5")
	if code != 1 || !strings.Contains(stderr, "the controller refused version 5: api.read_timeout") || !strings.Contains(stderr, "is back as it was") {
		t.Errorf("a refused rollback exited %d:\n%s%s", code, stdout, stderr)
	}
	if after, _ := os.ReadFile(l.path); !bytes.Equal(before, after) {
		t.Errorf("the file was not put back:\n%s", after)
	}
	if capacityOfB(b) != 5 {
		t.Errorf("capacity %v after a refused rollback, want 5 still", capacityOfB(b))
	}

	// A version that removes two of three backends: applied with -allow-removal, through the
	// same confirmation as reload -allow-removal, which is used up.
	onlyA := l.toml(t, "  [[service.backend]]\n  name = \"b\"\n  ip = \"10.0.0.2\"\n", "", "  [[service.backend]]\n  name = \"c\"\n  ip = \"10.0.0.3\"\n", "")
	store := history.Store{Dir: history.DirFor(l.state)}
	if _, _, err := store.Record(onlyA, "file changed", l.path, time.Now(), 5); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Record(l.toml(t, capB("5")...), "file changed", l.path, time.Now(), 5); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = l.rollback("-wait", "10s", "-allow-removal", "7")
	if code != 0 || !strings.Contains(stdout, "applied version 7 as version 9") {
		t.Fatalf("rollback -allow-removal exited %d:\n%s%s", code, stdout, stderr)
	}
	if n := len(b.Config().Services[0].Backends); n != 1 {
		t.Errorf("%d backends after the confirmed rollback, want 1", n)
	}
	if e := l.newest(t); e.Source != "rollback to version 7" {
		t.Errorf("newest version by %q", e.Source)
	}
	if _, err := os.Stat(confirmPath(l.path, l.state)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the confirmation outlived its use: %v", err)
	}
}

// TestRollbackOffline: with -wait 0 the file is written and the command returns; the
// controller started later records it as the rollback. Waiting for a controller that does
// not run times out and puts the file back.
func TestRollbackOffline(t *testing.T) {
	l := newLab(t)
	v1, v2 := l.toml(t), l.toml(t, capB("2")...)
	l.applied(t, v1, v2)
	code, stdout, stderr := l.rollback("-wait", "300ms")
	if code != 1 || !strings.Contains(stderr, "did not apply version 1 within 300ms") || !strings.Contains(stderr, "is back as it was") {
		t.Errorf("rollback with no controller exited %d:\n%s%s", code, stdout, stderr)
	}
	if got, _ := os.ReadFile(l.path); !bytes.Equal(got, v2) {
		t.Errorf("the file was not put back")
	}
	// Without -config: the file the running configuration was read from.
	var out, errOut bytes.Buffer
	if code := rollbackCommand([]string{"-state", l.state, "-wait", "0"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "wrote version 1 to "+l.path) {
		t.Fatalf("rollback -wait 0 exited %d:\n%s%s", code, out.String(), errOut.String())
	}
	if got, _ := os.ReadFile(l.path); !bytes.Equal(got, v1) {
		t.Errorf("the file is not version 1")
	}
	l.hist.applied(l.path, v1, "start", 5)
	if e := l.newest(t); e.Number != 3 || e.Source != "rollback to version 1" {
		t.Errorf("the start recorded version %d by %q, want 3 by \"rollback to version 1\"", e.Number, e.Source)
	}
}
