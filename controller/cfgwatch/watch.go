package cfgwatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"flowweight/internal/regfile"
)

// MaxFileSize bounds one read of a watched file: a configuration is kilobytes, and a path
// pointed by mistake at a huge file must not exhaust memory.
const MaxFileSize = 16 << 20

// DefaultPoll is the polling period when file notifications are not available.
const DefaultPoll = 2 * time.Second

// Config says which files to watch and whom to tell.
type Config struct {
	// Paths are the files to watch, as the operator names them (symlinks are followed and
	// their swaps seen). Snapshot.Files has one entry per path, in this order.
	Paths []string
	// Baseline is the content the caller has already acted on, one entry per path (nil: the
	// file was absent). A difference found when the watch starts is delivered at once. Nil
	// Baseline: the watcher reads the files itself when it starts.
	Baseline [][]byte
	// Debounce is the quiet time after the last event of a burst before the files are read;
	// default 200ms. A burst never delays a read by more than 10 Debounce. A file written in
	// place is delivered once two reads Debounce apart agree.
	Debounce time.Duration
	// Poll, when positive, reads the files every Poll instead of using file notifications
	// (file systems whose changes inotify does not see, e.g. NFS written from another host). A
	// polled change is delivered once the content has been the same at two polls in a row, so
	// a write in progress is not read. Notifications failing to start fall back to DefaultPoll.
	Poll time.Duration
	// OnChange gets every snapshot whose content differs from the last one delivered, and
	// every forced one. It runs on the watcher's goroutine: events queue while it runs.
	OnChange func(Snapshot)
	Logger   *slog.Logger
}

// Snapshot is the content of every watched file read once, at one moment.
type Snapshot struct {
	Files   []File
	Trigger string // "file changed", "poll", or the reason given to Force
}

// File is one watched file's content.
type File struct {
	Path string
	Data []byte // nil when absent or unreadable
	Err  error  // why Data is nil; errors.Is(Err, fs.ErrNotExist) for a missing file
}

// Watcher delivers the content of a set of files when it changes.
type Watcher struct {
	cfg    Config
	log    *slog.Logger
	force  chan string
	last   [][]byte  // content last delivered (or the baseline)
	notify *notifier // nil in poll mode
	pend   bool      // a change noticed at start, to deliver when Run begins
	// fellBack: polling stands in for a notification watch that failed; it is retried at
	// every poll, which comes every fallback (DefaultPoll; shorter in tests).
	fellBack bool
	fallback time.Duration
	// afterRead, if set (tests), sees each read an event caused and whether it was delivered.
	afterRead func(delivered bool)
	// onPending, if set (tests), runs when a changed content has been read once and waits
	// for a second read to agree.
	onPending func()
}

// New sets the watches up (so a change made after New returns is seen) and reads nothing it
// was given as a baseline. It fails only on a configuration mistake; a system without file
// notifications (inotify's limits reached, say) gets polling, logged once.
func New(cfg Config) (*Watcher, error) {
	if len(cfg.Paths) == 0 {
		return nil, errors.New("cfgwatch: no paths")
	}
	if cfg.Baseline != nil && len(cfg.Baseline) != len(cfg.Paths) {
		return nil, fmt.Errorf("cfgwatch: %d baselines for %d paths", len(cfg.Baseline), len(cfg.Paths))
	}
	if cfg.OnChange == nil {
		return nil, errors.New("cfgwatch: OnChange is required")
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{cfg: cfg, log: cfg.Logger, force: make(chan string, 1), fallback: DefaultPoll}
	if cfg.Poll <= 0 {
		n, err := newNotifier(cfg.Paths)
		if err != nil {
			w.log.Warn("file watch: notifications unavailable, polling the content instead", "paths", cfg.Paths,
				"poll", DefaultPoll.String(), "err", err)
			w.toPoll()
		} else {
			w.notify = n
		}
	}
	now := w.read("start")
	if cfg.Baseline == nil {
		w.last = contents(now)
	} else {
		w.last = cfg.Baseline
		w.pend = !sameContent(w.last, contents(now))
	}
	return w, nil
}

// Mode is "inotify" (file notifications: fsnotify, which is inotify on Linux) or "poll" (at
// start; a failed watch falls back to polling later).
func (w *Watcher) Mode() string {
	if w.notify != nil {
		return "inotify"
	}
	return "poll"
}

// Force asks for a read and a delivery even if nothing changed (SIGHUP). It never blocks; a
// force already pending absorbs this one.
func (w *Watcher) Force(reason string) {
	select {
	case w.force <- reason:
	default:
	}
}

// Run watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	if w.pend {
		w.deliver(w.read("file changed"))
	}
	for ctx.Err() == nil {
		if w.notify == nil {
			w.runPoll(ctx)
		} else {
			w.runNotify(ctx)
		}
	}
	return nil
}

// runNotify watches until ctx ends or notifications stop working (fsnotify closed its
// channels, or the configuration's directory went away); then it leaves w.notify nil, for
// polling.
func (w *Watcher) runNotify(ctx context.Context) {
	n := w.notify
	defer n.close()
	var b burst
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-n.fs.Events:
			if !ok {
				w.stopped(ctx, errors.New("fsnotify closed its events"))
				return
			}
			if look, settle := n.classify(ev); look {
				b.event(w.cfg.Debounce, settle)
			}
		case err, ok := <-n.fs.Errors:
			if !ok {
				w.stopped(ctx, errors.New("fsnotify closed its errors"))
				return
			}
			// Events were lost (the kernel's queue overflowed) or one could not be read: look
			// again, and let what is read settle.
			w.log.Warn("file watch: events lost, reading the files again", "err", err)
			b.event(w.cfg.Debounce, true)
		case <-b.fire:
			b.fire = nil
			ok := w.rewatch()
			s := w.read("file changed")
			cur := contents(s)
			changed := !sameContent(w.last, cur)
			if changed && ok && b.settle && !sameContent(b.pending, cur) {
				b.confirm(w.cfg.Debounce, cur) // read again before delivering
				if w.onPending != nil {
					w.onPending()
				}
				continue
			}
			if changed {
				w.deliver(s)
			}
			if w.afterRead != nil {
				w.afterRead(changed)
			}
			b.settle, b.pending = false, nil
			if !ok {
				w.toPoll()
				return
			}
		case why := <-w.force:
			ok := w.rewatch()
			w.deliver(w.read(why))
			if !ok {
				w.toPoll()
				return
			}
		}
	}
}

// stopped falls back to polling rather than go deaf (unless the watcher is stopping anyway).
func (w *Watcher) stopped(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	w.log.Warn("file watch: notifications stopped, polling the content instead", "err", err, "poll", DefaultPoll.String())
	w.toPoll()
}

// burst debounces events: fire comes Debounce after the last event, at most 10 Debounce
// after the first. settle: some event wrote a file in place, so a changed content is read
// twice (pending holds the first read) before it is delivered.
type burst struct {
	timer   *time.Timer
	fire    <-chan time.Time
	start   time.Time
	settle  bool
	pending [][]byte
}

func (b *burst) event(debounce time.Duration, settle bool) {
	now := time.Now()
	if b.fire == nil {
		b.start = now
	}
	wait := debounce
	if limit := b.start.Add(10 * debounce); now.Add(wait).After(limit) {
		wait = max(limit.Sub(now), 0)
	}
	b.arm(wait)
	b.settle = b.settle || settle
}

func (b *burst) confirm(debounce time.Duration, read [][]byte) {
	b.pending = read
	b.start = time.Now()
	b.arm(debounce)
}

func (b *burst) arm(wait time.Duration) {
	if b.timer == nil {
		b.timer = time.NewTimer(wait)
	} else {
		b.timer.Reset(wait)
	}
	b.fire = b.timer.C
}

func (w *Watcher) toPoll() {
	w.notify, w.fellBack = nil, true
}

// runPoll polls until ctx ends or, when it stands in for a failed notification watch, until
// notifications can watch again (the configuration's directory is back).
func (w *Watcher) runPoll(ctx context.Context) {
	period := w.cfg.Poll
	if w.fellBack {
		period = w.fallback
	}
	t := time.NewTicker(period)
	defer t.Stop()
	prev := w.last
	for {
		select {
		case <-ctx.Done():
			return
		case why := <-w.force:
			s := w.read(why)
			prev = contents(s)
			w.deliver(s)
		case <-t.C:
			if w.fellBack {
				if n, err := newNotifier(w.cfg.Paths); err == nil {
					w.log.Info("file watch: notifications work again", "paths", w.cfg.Paths)
					w.notify, w.fellBack = n, false
					if s := w.read("file changed"); !sameContent(w.last, contents(s)) {
						w.deliver(s) // a change made while the watch was being set up
					}
					return
				}
			}
			s := w.read("poll")
			cur := contents(s)
			if !sameContent(cur, w.last) && sameContent(cur, prev) {
				w.deliver(s)
			}
			prev = cur
		}
	}
}

// rewatch follows symlinks again after a change (a swapped symlink may point elsewhere now).
// false: the configuration's own directory cannot be watched any more (it was removed).
func (w *Watcher) rewatch() bool {
	if err := w.notify.watch(w.cfg.Paths); err != nil {
		w.log.Warn("file watch: cannot watch the configuration's directory; polling the content until it can", "err", err,
			"poll", DefaultPoll.String())
		return false
	}
	return true
}

func (w *Watcher) deliver(s Snapshot) {
	w.last = contents(s)
	w.cfg.OnChange(s)
}

func (w *Watcher) read(trigger string) Snapshot {
	s := Snapshot{Trigger: trigger, Files: make([]File, len(w.cfg.Paths))}
	for i, p := range w.cfg.Paths {
		data, err := readFile(p)
		s.Files[i] = File{Path: p, Data: data, Err: err}
	}
	return s
}

// readFile reads the whole file once, at most MaxFileSize bytes. Only a regular file is
// read, and it is opened without blocking: a FIFO put at a watched path (the confirmation's,
// say) used to block the watcher in open for good, so no reload, not even SIGHUP's, was
// delivered again. Errors name the path.
func readFile(path string) ([]byte, error) {
	return regfile.Read(path, MaxFileSize)
}

func contents(s Snapshot) [][]byte {
	out := make([][]byte, len(s.Files))
	for i, f := range s.Files {
		out[i] = f.Data
	}
	return out
}

func sameContent(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
