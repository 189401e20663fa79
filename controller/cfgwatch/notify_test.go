package cfgwatch

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEventFilter: only entries on the way to a watched file cause a read, and a regular file
// counts once written (IN_CLOSE_WRITE), not when created empty.
func TestEventFilter(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "..v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "..v1", "controller.toml"), "x")
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "controller.toml")
	if err := os.Symlink("..data/controller.toml", path); err != nil {
		t.Fatal(err)
	}
	in, err := newInotify([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	var wd int32 = -1
	for d, w := range in.watches {
		if w.dir == dir {
			wd = d
		}
	}
	if wd < 0 {
		t.Fatalf("the file's own directory is not watched: %+v", in.watches)
	}
	write(t, filepath.Join(dir, "plain"), "")
	if err := os.Symlink("x", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		mask uint32
		name string
		want bool
	}{
		{unix.IN_CLOSE_WRITE, "controller.toml", true},
		{unix.IN_MOVED_TO, "controller.toml", true},
		{unix.IN_MOVED_TO, "..data", true},
		{unix.IN_DELETE, "controller.toml", true},
		{unix.IN_CLOSE_WRITE, ".controller.toml.swp", false},
		{unix.IN_MOVED_TO, "controller.state", false},
		{unix.IN_CREATE, "controller.toml", true}, // it is a symlink here
		{unix.IN_Q_OVERFLOW, "", true},
		{unix.IN_DELETE_SELF, "", true},
	}
	for _, tc := range cases {
		if got := in.matters(wd, tc.mask, tc.name); got != tc.want {
			t.Errorf("mask %#x name %q: matters = %v, want %v", tc.mask, tc.name, got, tc.want)
		}
	}
	// A regular file created under a relevant name is not complete yet.
	in.watches[wd].names["plain"] = true
	in.watches[wd].names["link"] = true
	if in.matters(wd, unix.IN_CREATE, "plain") || !in.matters(wd, unix.IN_CREATE, "link") {
		t.Error("IN_CREATE: a regular file must wait for IN_CLOSE_WRITE, a symlink must not")
	}
}
