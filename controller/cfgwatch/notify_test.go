package cfgwatch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fsnotify/fsnotify"
)

// TestEventFilter: only entries on the way to a watched file cause a read, and a regular file
// written in place (or created, still empty) must settle before it is delivered: fsnotify
// reports no close-write, so two reads a Debounce apart must agree.
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
	dir = resolve(dir)
	in, err := newNotifier([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	if in.dirs[dir] == nil {
		t.Fatalf("the file's own directory is not watched: %+v", in.dirs)
	}
	write(t, filepath.Join(dir, "plain"), "")
	if err := os.Symlink("x", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		op           fsnotify.Op
		name         string
		look, settle bool
	}{
		{fsnotify.Write, "controller.toml", true, true},
		{fsnotify.Create, "controller.toml", true, false}, // a rename into place; a symlink here
		{fsnotify.Create, "..data", true, false},
		{fsnotify.Remove, "controller.toml", true, false},
		{fsnotify.Rename, "controller.toml", true, false},
		{fsnotify.Chmod, "controller.toml", false, false},
		{fsnotify.Write, ".controller.toml.swp", false, false},
		{fsnotify.Create, "controller.state", false, false},
		{fsnotify.Remove, "", true, false}, // the watched directory itself
	}
	for _, tc := range cases {
		look, settle := in.classify(fsnotify.Event{Name: filepath.Join(dir, tc.name), Op: tc.op})
		if look != tc.look || settle != tc.settle {
			t.Errorf("op %s name %q: classify = %v, %v, want %v, %v", tc.op, tc.name, look, settle, tc.look, tc.settle)
		}
	}
	// A regular file created under a relevant name, still empty, is not complete yet.
	in.dirs[dir]["plain"] = true
	in.dirs[dir]["link"] = true
	if look, settle := in.classify(fsnotify.Event{Name: filepath.Join(dir, "plain"), Op: fsnotify.Create}); !look || !settle {
		t.Error("Create: an empty regular file must settle before it is delivered")
	}
	if look, settle := in.classify(fsnotify.Event{Name: filepath.Join(dir, "link"), Op: fsnotify.Create}); !look || settle {
		t.Error("Create: a symlink is complete when created")
	}
}
