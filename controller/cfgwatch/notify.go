package cfgwatch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// notifier watches, through fsnotify, the directories that hold the watched files and every
// symlink on the way to them: editors and atomic writers replace a file's inode, and a
// Kubernetes ConfigMap swaps a `..data` directory symlink, so watching the file itself would
// go deaf after the first change. It is used by one goroutine only (the watcher's).
type notifier struct {
	fs *fsnotify.Watcher
	// dirs maps each watched directory, symlinks resolved (fsnotify names an event by the
	// path it was added with, and two paths to one directory share a kernel watch), to the
	// entry names in it that matter.
	dirs map[string]map[string]bool
}

func newNotifier(paths []string) (*notifier, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	n := &notifier{fs: fsw, dirs: map[string]map[string]bool{}}
	if err := n.watch(paths); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

func (n *notifier) close() { n.fs.Close() }

// watch makes the watch set match where the paths lead now; stale directories are dropped.
// It fails if the directory of the first path cannot be watched; the others' directories may
// be missing for now (a state directory not created yet) and are retried on every event.
func (n *notifier) watch(paths []string) error {
	want := map[string]map[string]bool{}
	must := ""
	for i, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		if i == 0 {
			must = resolve(filepath.Dir(abs))
		}
		for dir, names := range relevant(abs) {
			dir = resolve(dir)
			if want[dir] == nil {
				want[dir] = map[string]bool{}
			}
			for name := range names {
				want[dir][name] = true
			}
		}
	}
	var errs []error
	for dir := range want {
		err := addDir(n.fs, dir)
		if err == nil {
			continue
		}
		delete(want, dir) // a symlink target's directory may be gone for now; the next event retries
		if dir == must {
			errs = append(errs, fmt.Errorf("watch %s: %w", dir, err))
		}
	}
	for dir := range n.dirs {
		if want[dir] == nil {
			n.fs.Remove(dir) // already gone if the directory was removed
		}
	}
	n.dirs = want
	return errors.Join(errs...)
}

// addDir watches dir, which must be a directory: a watch on a file would go deaf when the file
// is replaced.
func addDir(fsw *fsnotify.Watcher, dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New("not a directory")
	}
	return fsw.Add(dir)
}

// resolve is dir with its symlinks resolved, or dir itself where it cannot be (missing).
func resolve(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

// relevant maps each directory to watch to the entry names in it whose change can change what
// path reads: the path's last component, each symlink it leads through (following up to 32
// hops) and each symlinked directory on the way (Kubernetes' ..data).
func relevant(path string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	add := func(p string) {
		dir, name := filepath.Dir(p), filepath.Base(p)
		if out[dir] == nil {
			out[dir] = map[string]bool{}
		}
		out[dir][name] = true
	}
	p := path
	for range 32 {
		add(p)
		// Symlinked directories on the way: a swap of one replaces everything below it.
		for d := filepath.Dir(p); d != filepath.Dir(d); d = filepath.Dir(d) {
			if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				add(d)
			}
		}
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	if final, err := filepath.EvalSymlinks(path); err == nil {
		add(final)
	}
	return out
}

// classify says whether an event makes the watcher look again, and whether what it then reads
// must settle first. Only events naming a relevant entry count, so an editor's swap file or a
// state file next to the configuration does not cause reads; a watched directory removed or
// renamed counts. fsnotify does not report a writer's close portably, so a file written in
// place (Write), or just created and still empty, is delivered only once two reads a Debounce
// apart agree: a write in progress is not taken for the new content. A rename into place or a
// symlink (ln -s) is complete at once.
func (n *notifier) classify(ev fsnotify.Event) (look, settle bool) {
	if !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) {
		return false, false // Chmod: the content is the same
	}
	if n.dirs[ev.Name] != nil {
		return true, false // a watched directory went away: look again
	}
	if !n.dirs[filepath.Dir(ev.Name)][filepath.Base(ev.Name)] {
		return false, false
	}
	if ev.Has(fsnotify.Write) {
		return true, true
	}
	if ev.Has(fsnotify.Create) {
		fi, err := os.Lstat(ev.Name)
		return true, err == nil && fi.Mode().IsRegular() && fi.Size() == 0
	}
	return true, false
}
