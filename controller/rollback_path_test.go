package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRollbackTrustsTheRecordedPathOnlyAsFarAsItChecks: without -config the command writes
// the file the history says the running configuration came from. The history belongs to the
// controller's user and the command runs as root, so a recorded path must not make root
// create a file, or overwrite one holding other content: each is refused, naming the path and
// -config, and nothing is written anywhere.
func TestRollbackTrustsTheRecordedPathOnlyAsFarAsItChecks(t *testing.T) {
	for _, tt := range []struct {
		name  string
		file  func(l *lab) string // the path the running version records
		setup func(t *testing.T, l *lab, path string)
		args  []string
		want  string
	}{
		{"a file that does not exist", func(l *lab) string { return filepath.Join(l.dir, "new.conf") }, nil, nil, "does not exist: name the file to write with -config"},
		{"a file of other content, with -force", func(l *lab) string { return filepath.Join(l.dir, "other.conf") },
			func(t *testing.T, l *lab, path string) {
				if err := os.WriteFile(path, []byte("not a configuration\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}, []string{"-force"}, "-force overwrites only a file named with -config"},
		{"a relative path", func(*lab) string { return "controller.toml" }, nil, nil, "no absolute configuration path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t)
			path := tt.file(l)
			if tt.setup != nil {
				tt.setup(t, l, path)
			}
			before, beforeErr := os.ReadFile(path)
			v1, v2 := l.toml(t), l.toml(t, capB("2")...)
			l.hist.applied(path, v1, "start", 5)
			l.hist.applied(path, v2, "file changed", 5)
			var out, errOut bytes.Buffer
			code := rollbackCommand(append([]string{"-state", l.state, "-wait", "0"}, tt.args...), &out, &errOut)
			if code != 1 || !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("exit %d, want 1 saying %q\nstdout: %s\nstderr: %s", code, tt.want, out.String(), errOut.String())
			}
			after, afterErr := os.ReadFile(path)
			if !bytes.Equal(before, after) || (beforeErr == nil) != (afterErr == nil) {
				t.Errorf("%s changed: %q (%v), was %q (%v)", path, after, afterErr, before, beforeErr)
			}
		})
	}
}
