package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadStateDirFile: a file a service wrote under its state directory is read by root (or
// its own user) when the state directory and the file's directory are the service's and no
// one else can change them; a state directory others can write (even sticky, as /tmp), a
// directory writable by group, a file readable by others or owned by a third user is refused,
// naming the path.
func TestReadStateDirFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
	const svc, other = 64011, 64012 // the service's user, a third user
	for _, tt := range []struct {
		name                  string
		stateMode, subMode    os.FileMode
		stateUID, subUID, uid int
		fileMode              os.FileMode
		want                  string // "" accepted
	}{
		{"the service's own files", 0o700, 0o700, svc, svc, svc, 0o600, ""},
		{"root's", 0o700, 0o700, 0, 0, 0, 0o600, ""},
		{"a state directory root made for the service", 0o755, 0o700, 0, svc, svc, 0o600, ""},
		{"state directory anyone can write", 0o777, 0o700, svc, svc, svc, 0o600, "owned by uid 64011"},
		{"sticky state directory", 0o1777, 0o700, 0, svc, svc, 0o600, "owned by uid 64011"},
		{"directory writable by group", 0o700, 0o770, svc, svc, svc, 0o600, "writable by group or others"},
		{"file readable by others", 0o700, 0o700, svc, svc, svc, 0o644, "readable by others"},
		{"file of a third user", 0o700, 0o700, svc, svc, other, 0o600, "owned by uid 64012"},
		{"state directory of a third user", 0o700, 0o700, other, svc, svc, 0o600, "owned by uid 64011"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			sub := filepath.Join(state, "sub")
			path := filepath.Join(sub, "f")
			for _, step := range []error{os.Mkdir(state, 0o700), os.Mkdir(sub, 0o700), os.WriteFile(path, []byte("x"), 0o600),
				os.Chmod(path, tt.fileMode), os.Chown(path, tt.uid, tt.uid), os.Chmod(sub, tt.subMode), os.Chown(sub, tt.subUID, tt.subUID),
				os.Chmod(state, tt.stateMode), os.Chown(state, tt.stateUID, tt.stateUID)} {
				if step != nil {
					t.Fatal(step)
				}
			}
			got, err := ReadStateDirFile(path, 16)
			switch {
			case tt.want == "" && (err != nil || string(got) != "x"):
				t.Errorf("got %q, %v; want it read", got, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), sub)):
				t.Errorf("err = %v; want one naming %s and saying %q", err, sub, tt.want)
			}
		})
	}
}

// TestReadStateDirFileRefusesLinks: a version file is only ever written by rename, so a
// symbolic link in its place was planted by whoever can write the state directory (the
// service's user); followed by root, it would read a root-owned private file elsewhere, which
// passes every owner and mode check. It is refused, naming the path, for a link to a file as
// to anything else.
func TestReadStateDirFileRefusesLinks(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	sub := filepath.Join(state, "sub")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(base, "secret")
	if err := os.WriteFile(secret, []byte("private"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{secret, filepath.Join(base, "missing"), sub} {
		path := filepath.Join(sub, "f")
		os.Remove(path)
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		got, err := ReadStateDirFile(path, 64)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("link to %s: got %q, %v; want refused as a symbolic link, naming %s", target, got, err, path)
		}
	}
}
