package cfgwatch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirMask is what a watched directory reports. Not IN_MODIFY: a file being written is read
// once its writer closes it (IN_CLOSE_WRITE) or once it is renamed into place (IN_MOVED_TO).
const dirMask = unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// inotify watches the directories that hold the watched files and every symlink on the way to
// them: editors and atomic writers replace a file's inode, and a Kubernetes ConfigMap swaps a
// `..data` directory symlink, so watching the file itself would go deaf after the first change.
type inotify struct {
	f  *os.File
	fd int

	mu      sync.Mutex
	watches map[int32]*dirWatch // by watch descriptor
}

// dirWatch is one watched directory and the entry names in it that matter.
type dirWatch struct {
	dir   string
	names map[string]bool
}

func newInotify(paths []string) (*inotify, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	// Non-blocking, so the runtime poller owns it and close unblocks a pending read.
	in := &inotify{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, watches: map[int32]*dirWatch{}}
	if err := in.watch(paths); err != nil {
		in.close()
		return nil, err
	}
	return in, nil
}

func (in *inotify) close() { in.f.Close() }

// watch makes the watch set match where the paths lead now; stale directories are dropped.
// It fails if the directory of the first path cannot be watched; the others' directories may
// be missing for now (a state directory not created yet) and are retried on every event.
func (in *inotify) watch(paths []string) error {
	want := map[string]map[string]bool{}
	var must []string
	for i, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		if i == 0 {
			must = append(must, filepath.Dir(abs))
		}
		for dir, names := range relevant(abs) {
			if want[dir] == nil {
				want[dir] = map[string]bool{}
			}
			for n := range names {
				want[dir][n] = true
			}
		}
	}
	next := map[int32]*dirWatch{}
	var errs []error
	for dir, names := range want {
		wd, err := unix.InotifyAddWatch(in.fd, dir, dirMask)
		if err != nil {
			for _, m := range must {
				if m == dir {
					errs = append(errs, fmt.Errorf("inotify_add_watch %s: %w", dir, err))
				}
			}
			continue // a symlink target's directory may be gone for now; the next event retries
		}
		w := next[int32(wd)]
		if w == nil {
			w = &dirWatch{dir: dir, names: map[string]bool{}} // two paths to one directory share a descriptor
			next[int32(wd)] = w
		}
		for n := range names {
			w.names[n] = true
		}
	}
	in.mu.Lock()
	old := in.watches
	in.watches = next
	in.mu.Unlock()
	for wd := range old {
		if _, ok := next[wd]; !ok {
			unix.InotifyRmWatch(in.fd, uint32(wd)) // already gone if its directory was removed
		}
	}
	return errors.Join(errs...)
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

// read turns the kernel's events into "look again" signals on ch (coalesced: ch has room for
// one) until the descriptor is closed. Only events naming a relevant entry count, so an
// editor's swap file or a state file next to the configuration does not cause reads.
func (in *inotify) read(ch chan<- bool) error {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.PathMax))
	for {
		n, err := in.f.Read(buf)
		if err != nil {
			return err
		}
		signal := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : min(off+unix.SizeofInotifyEvent+int(ev.Len), n)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			name := string(trimNul(nameBytes))
			if in.matters(ev.Wd, ev.Mask, name) {
				signal = true
			}
		}
		if signal {
			select {
			case ch <- true:
			default:
			}
		}
	}
}

func (in *inotify) matters(wd int32, mask uint32, name string) bool {
	if mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		return true // events were lost, or a watched directory went away: look again
	}
	in.mu.Lock()
	w := in.watches[wd]
	in.mu.Unlock()
	if w == nil || !w.names[name] {
		return false
	}
	if mask&unix.IN_CREATE != 0 && mask&unix.IN_ISDIR == 0 {
		// A regular file just created is still empty; its IN_CLOSE_WRITE follows. A symlink
		// (ln -s) is complete when created.
		fi, err := os.Lstat(filepath.Join(w.dir, name))
		return err == nil && fi.Mode()&os.ModeSymlink != 0
	}
	return true
}

func trimNul(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
