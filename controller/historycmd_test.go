package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowweight/controller/history"
	"flowweight/internal/testutil"
)

// TestHistoryCommand: the listing and -show, and every bad input with an error naming what
// is wrong; a damaged version is skipped and reported, the others still listed.
func TestHistoryCommand(t *testing.T) {
	for _, tt := range []struct {
		name     string
		setup    func(t *testing.T, l *lab)
		args     []string
		code     int
		out, err []string
	}{
		{"list", nil, nil, 0, []string{"VERSION", "(oldest kept)", "web: capacity b 1→2", "web: capacity b 2→3", "version 3 is the running configuration", "applies version 2 again"}, nil},
		{"show", nil, []string{"-show", "2"}, 0, []string{"capacity = 2\n"}, nil},
		{"show unknown", nil, []string{"-show", "7"}, 1, nil, []string{"no version 7 (kept: 1, 2, 3)"}},
		{"show not a number", nil, []string{"-show", "x"}, 2, nil, []string{`version "x": not a version number`}},
		{"an argument", nil, []string{"2"}, 2, nil, []string{"usage:"}},
		{"a damaged version", func(t *testing.T, l *lab) {
			os.WriteFile(filepath.Join(history.DirFor(l.state), "00000002.json"), []byte("{"), 0o600)
		}, nil, 0, []string{"(oldest kept)", "web: capacity b 1→3"}, []string{"warning: version 2 skipped", "00000002.json", "unexpected EOF"}},
		{"a version that no longer parses", func(t *testing.T, l *lab) {
			l.hist.applied(l.path, []byte("[controller]\nlisten = 1\n"), "SIGHUP", 5)
		}, nil, 0, []string{"(does not parse: ", "controller.listen"}, nil},
		{"nothing recorded", func(t *testing.T, l *lab) { os.RemoveAll(history.DirFor(l.state)) }, nil, 1, nil, []string{"no configuration recorded yet"}},
		{"no state file", nil, []string{"-state", ""}, 1, nil, []string{"keeps no history"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t)
			l.applied(t, l.toml(t), l.toml(t, capB("2")...), l.toml(t, capB("3")...))
			if tt.setup != nil {
				tt.setup(t, l)
			}
			var out, errOut bytes.Buffer
			code := historyCommand(append([]string{"-state", l.state}, tt.args...), &out, &errOut)
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, out.String(), errOut.String())
			}
			for _, w := range tt.out {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout does not say %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.err {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, errOut.String())
				}
			}
		})
	}
}

// TestHistoryUnwritable: a history directory the controller cannot write does not stop a
// reload: the configuration is applied, the error is logged naming the directory, and the
// versions kept stay as they were.
func TestHistoryUnwritable(t *testing.T) {
	l := newLab(t)
	var logs testutil.SyncBuffer
	l.hist = newConfigHistory(l.state, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := os.WriteFile(l.path, l.toml(t), 0o644); err != nil {
		t.Fatal(err)
	}
	b := l.watch(t)
	dir := history.DirFor(l.state)
	testutil.Unwritable(t, dir)
	l.replaceFile(t, l.toml(t, capB("2")...))
	deadline := time.Now().Add(10 * time.Second)
	for capacityOfB(b) != 2 || !strings.Contains(logs.String(), "configuration history not written") {
		if time.Now().After(deadline) {
			t.Fatalf("capacity %v, log:\n%s", capacityOfB(b), logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "dir="+dir) || !strings.Contains(logs.String(), "operation not permitted") && !strings.Contains(logs.String(), "permission denied") {
		t.Errorf("the log line does not name the directory and the error:\n%s", logs.String())
	}
	if e := l.newest(t); e.Number != 1 || e.Source != "start" {
		t.Errorf("newest version %d by %q, want version 1 kept as it was", e.Number, e.Source)
	}
}
