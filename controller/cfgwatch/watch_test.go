package cfgwatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type harness struct {
	t     *testing.T
	w     *Watcher
	got   chan Snapshot
	reads chan bool // every read an event caused: delivered or not
}

func start(t *testing.T, cfg Config) *harness {
	t.Helper()
	return startWith(t, cfg, nil)
}

// startWith is start with a hook that adjusts the watcher before it runs.
func startWith(t *testing.T, cfg Config, adjust func(*Watcher)) *harness {
	t.Helper()
	h := &harness{t: t, got: make(chan Snapshot, 64), reads: make(chan bool, 64)}
	cfg.OnChange = func(s Snapshot) { h.got <- s }
	if cfg.Debounce == 0 {
		cfg.Debounce = 20 * time.Millisecond
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
	w.afterRead = func(delivered bool) {
		select {
		case h.reads <- delivered:
		default: // a test that does not look at reads must not block the watcher
		}
	}
	if adjust != nil {
		adjust(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return h
}

// next waits for the next delivery; the deadline only turns a hang into a failure.
func (h *harness) next() Snapshot {
	h.t.Helper()
	select {
	case s := <-h.got:
		return s
	case <-time.After(10 * time.Second):
		h.t.Fatal("no delivery within 10s")
		return Snapshot{}
	}
}

// delivered consumes the report of the read behind the delivery just expected.
func (h *harness) delivered() {
	h.t.Helper()
	select {
	case d := <-h.reads:
		if !d {
			h.t.Fatal("a read that did not deliver, before the one that did")
		}
	case <-time.After(10 * time.Second):
		h.t.Fatal("no read report within 10s")
	}
}

// expect waits for a delivery whose first file holds want.
func (h *harness) expect(want string) Snapshot {
	h.t.Helper()
	s := h.next()
	if got := string(s.Files[0].Data); got != want {
		h.t.Fatalf("delivered %q (trigger %s, err %v), want %q", got, s.Trigger, s.Files[0].Err, want)
	}
	return s
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWatchInotify(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.toml")
	write(t, path, "v1")
	h := start(t, Config{Paths: []string{path}})
	if h.w.Mode() != "inotify" {
		t.Fatalf("mode %s", h.w.Mode())
	}

	// write and close in place
	write(t, path, "v2-in-place")
	h.expect("v2-in-place")
	h.delivered()

	// rename into place (what atomic writers and most editors do)
	tmp := filepath.Join(dir, ".controller.toml.tmp")
	write(t, tmp, "v3-renamed")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	h.expect("v3-renamed")
	h.delivered()

	// the same content again is read but not delivered
	write(t, path, "v3-renamed")
	select {
	case delivered := <-h.reads:
		if delivered {
			t.Fatal("unchanged content was delivered")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no read after a write")
	}
	if len(h.got) != 0 {
		t.Fatalf("unchanged content was delivered: %q", (<-h.got).Files[0].Data)
	}
	write(t, path, "v4")
	h.expect("v4")

	// truncate, close, then write: only the empty file or the final one may be delivered
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	write(t, path, "v5-after-truncate")
	for {
		s := h.next()
		got := string(s.Files[0].Data)
		if got == "v5-after-truncate" {
			break
		}
		if got != "" {
			t.Fatalf("delivered %q between the truncation and the write", got)
		}
	}
}

func TestWatchSymlinkSwapSameStamp(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.toml"), filepath.Join(dir, "b.toml")
	write(t, a, "AAAA")
	write(t, b, "BBBB")
	stamp := time.Unix(1.7e9, 0)
	for _, p := range []string{a, b} {
		if err := os.Chtimes(p, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "controller.toml")
	if err := os.Symlink("a.toml", path); err != nil {
		t.Fatal(err)
	}
	h := start(t, Config{Paths: []string{path}})
	tmp := filepath.Join(dir, "controller.toml.new")
	if err := os.Symlink("b.toml", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	h.expect("BBBB")

	// ln -sf: unlink, then a new symlink
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.toml", path); err != nil {
		t.Fatal(err)
	}
	for {
		s := h.next()
		if string(s.Files[0].Data) == "AAAA" {
			break
		}
		if s.Files[0].Data != nil {
			t.Fatalf("delivered %q", s.Files[0].Data)
		}
	}

	// an edit of the symlink's target, in a directory other than the link's
	other := t.TempDir()
	target := filepath.Join(other, "real.toml")
	write(t, target, "R1")
	tmp = filepath.Join(dir, "controller.toml.new")
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	h.expect("R1")
	write(t, target, "R2")
	h.expect("R2")
}

// TestWatchConfigMap replays what the kubelet does to a mounted ConfigMap: the file is a
// symlink through ..data, a symlink to a timestamped directory, and an update renames a new
// ..data over the old one. The file itself, its size and its mtime never change.
func TestWatchConfigMap(t *testing.T) {
	dir := t.TempDir()
	stamp := time.Unix(1.7e9, 0)
	version := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name, "controller.toml")
		write(t, p, content)
		if err := os.Chtimes(p, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_12_01_01", "one")
	if err := os.Symlink("..2026_12_01_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "controller.toml")
	if err := os.Symlink("..data/controller.toml", path); err != nil {
		t.Fatal(err)
	}
	h := start(t, Config{Paths: []string{path}})
	for i, content := range []string{"two", "six"} {
		name := []string{"..2026_12_01_02", "..2026_12_01_03"}[i]
		version(name, content)
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		h.expect(content)
	}
}

func TestWatchSecondPathAndForce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.toml")
	marker := path + ".allow-removal"
	write(t, path, "cfg")
	h := start(t, Config{Paths: []string{path, marker}})
	write(t, marker, "yes")
	s := h.expect("cfg")
	if string(s.Files[1].Data) != "yes" || s.Files[1].Path != marker {
		t.Fatalf("marker %+v", s.Files[1])
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if s := h.expect("cfg"); s.Files[1].Data != nil || !os.IsNotExist(s.Files[1].Err) {
		t.Fatalf("a removed marker delivered %+v", s.Files[1])
	}
	h.w.Force("SIGHUP")
	if s := h.expect("cfg"); s.Trigger != "SIGHUP" {
		t.Fatalf("trigger %q", s.Trigger)
	}
}

func TestWatchBaseline(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.toml")
	write(t, path, "changed before the watch started")
	h := start(t, Config{Paths: []string{path}, Baseline: [][]byte{[]byte("what the caller loaded")}})
	h.expect("changed before the watch started")
}

func TestWatchPoll(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.toml")
	write(t, path, "p1")
	h := start(t, Config{Paths: []string{path}, Poll: 5 * time.Millisecond})
	if h.w.Mode() != "poll" {
		t.Fatalf("mode %s", h.w.Mode())
	}
	write(t, path, "p2")
	h.expect("p2")
	tmp := filepath.Join(dir, "x")
	write(t, tmp, "p3")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	h.expect("p3")
	h.w.Force("SIGHUP")
	if s := h.expect("p3"); s.Trigger != "SIGHUP" {
		t.Fatalf("trigger %q", s.Trigger)
	}
}

func TestWatchRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Paths: []string{"x"}},
		{Paths: []string{"x"}, OnChange: func(Snapshot) {}, Baseline: [][]byte{nil, nil}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestReadFileLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, make([]byte, MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readFile(path); err == nil {
		t.Fatal("a file over the limit was read")
	}
	empty := filepath.Join(t.TempDir(), "empty")
	write(t, empty, "")
	if data, err := readFile(empty); err != nil || data == nil {
		t.Fatalf("an empty file reads as %v, %v; want empty, not absent", data, err)
	}
}

// TestWatchMissingSecondDirectory: a second path whose directory does not exist yet (a state
// directory created later) does not cost the first path its inotify watch, and is seen once
// the directory appears and any event makes the watcher look again.
func TestWatchMissingSecondDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.toml")
	write(t, path, "cfg")
	marker := filepath.Join(dir, "state", "confirm")
	h := start(t, Config{Paths: []string{path, marker}})
	if h.w.Mode() != "inotify" {
		t.Fatalf("mode %s", h.w.Mode())
	}
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, path, "cfg2") // an event: the watcher looks again and now watches state/
	h.expect("cfg2")
	write(t, marker, "yes")
	if s := h.expect("cfg2"); string(s.Files[1].Data) != "yes" {
		t.Fatalf("marker %+v", s.Files[1])
	}
}

// TestWatchDirectoryRemoved: the configuration's directory removed and made again. The watch
// on the old directory is gone; the watcher polls meanwhile and returns to inotify once the
// directory is back, and the new content is delivered.
func TestWatchDirectoryRemoved(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "etc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "controller.toml")
	write(t, path, "one")
	h := startWith(t, Config{Paths: []string{path}}, func(w *Watcher) { w.fallback = 5 * time.Millisecond })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if s := h.next(); s.Files[0].Data != nil {
		t.Fatalf("after the directory went: %+v", s.Files[0])
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, path, "two")
	h.expect("two")
	write(t, path, "three") // inotify again (or polling: either must see it)
	h.expect("three")
}

// TestWatchFIFOAtPath: a FIFO at a watched path (here the confirmation's) is refused without
// blocking, with an error naming the path and what it is, and the watcher goes on delivering:
// the file's later changes and a forced reload.
func TestWatchFIFOAtPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.toml")
	marker := filepath.Join(dir, "confirm")
	write(t, path, "cfg")
	h := start(t, Config{Paths: []string{path, marker}})
	if err := syscall.Mkfifo(marker, 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, path, "cfg1")
	s := h.expect("cfg1")
	if err := s.Files[1].Err; s.Files[1].Data != nil || err == nil ||
		!strings.Contains(err.Error(), marker) || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("the FIFO delivered %+v", s.Files[1])
	}
	write(t, path, "cfg2")
	h.expect("cfg2")
	h.w.Force("SIGHUP")
	if s := h.expect("cfg2"); s.Trigger != "SIGHUP" {
		t.Fatalf("trigger %q", s.Trigger)
	}
}

// TestWatchWriteInProgress: a file written in place is not delivered half written. Each time
// the watcher has read a changed content once, the writer adds a chunk before the watcher
// reads again (from inside the hook, so the order is certain); only the content that then
// stays the same, the whole file, may be delivered.
func TestWatchWriteInProgress(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.toml")
	write(t, path, "v1")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const chunks = 5
	var mu sync.Mutex // the writer runs on the test's goroutine first, then in the hook
	var want strings.Builder
	next := func() {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("line %d\n", want.Len())
		want.WriteString(line)
		if _, err := f.WriteString(line); err != nil {
			t.Error(err)
		}
	}
	written := 1
	h := startWith(t, Config{Paths: []string{path}}, func(w *Watcher) {
		w.onPending = func() {
			mu.Lock()
			more := written < chunks
			if more {
				written++
			}
			mu.Unlock()
			if more {
				next()
			}
		}
	})
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	next()
	for {
		s := h.next()
		got := string(s.Files[0].Data)
		mu.Lock()
		done, n := got == want.String() && written == chunks, written
		mu.Unlock()
		if done {
			break
		}
		if got != "" { // the truncation alone may be delivered, as in TestWatchInotify
			t.Fatalf("delivered %q while the file was being written (%d of %d chunks)", got, n, chunks)
		}
	}
}
