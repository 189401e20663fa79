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

// DefaultPoll is the polling period when inotify is not available.
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
	// default 200ms. A burst never delays a read by more than 10 Debounce.
	Debounce time.Duration
	// Poll, when positive, reads the files every Poll instead of using inotify (file systems
	// whose changes inotify does not see, e.g. NFS written from another host). A polled change
	// is delivered once the content has been the same at two polls in a row, so a write in
	// progress is not read. inotify failing to start falls back to DefaultPoll.
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
	cfg   Config
	log   *slog.Logger
	force chan string
	last  [][]byte // content last delivered (or the baseline)
	ino   *inotify // nil in poll mode
	pend  bool     // a change noticed at start, to deliver when Run begins
	// fellBack: polling stands in for an inotify watch that failed; inotify is retried at
	// every poll, which comes every fallback (DefaultPoll; shorter in tests).
	fellBack bool
	fallback time.Duration
	// afterRead, if set (tests), sees each read an event caused and whether it was delivered.
	afterRead func(delivered bool)
}

// New sets the watches up (so a change made after New returns is seen) and reads nothing it
// was given as a baseline. It fails only on a configuration mistake; a system without
// inotify gets polling, logged once.
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
		ino, err := newInotify(cfg.Paths)
		if err != nil {
			w.log.Warn("file watch: inotify unavailable, polling the content instead", "paths", cfg.Paths,
				"poll", DefaultPoll.String(), "err", err)
			w.toPoll()
		} else {
			w.ino = ino
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

// Mode is "inotify" or "poll" (at start; a failed watch falls back to polling later).
func (w *Watcher) Mode() string {
	if w.ino != nil {
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
		if w.ino == nil {
			w.runPoll(ctx)
		} else {
			w.runInotify(ctx)
		}
	}
	return nil
}

// runInotify watches until ctx ends or inotify stops working (the kernel closed the queue,
// or the configuration's directory went away); then it leaves w.ino nil, for polling.
func (w *Watcher) runInotify(ctx context.Context) {
	ino := w.ino
	defer ino.close()
	events := make(chan bool, 1)
	errc := make(chan error, 1)
	go func() { errc <- ino.read(events) }()
	var timer *time.Timer
	var fire <-chan time.Time
	var burstStart time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-errc:
			if ctx.Err() != nil {
				return
			}
			// Keep working by polling rather than go deaf.
			w.log.Warn("file watch: inotify stopped, polling the content instead", "err", err, "poll", DefaultPoll.String())
			w.toPoll()
			return
		case <-events:
			now := time.Now()
			if fire == nil {
				burstStart = now
			}
			wait := w.cfg.Debounce
			if limit := burstStart.Add(10 * w.cfg.Debounce); now.Add(wait).After(limit) {
				wait = max(limit.Sub(now), 0)
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			fire = timer.C
		case <-fire:
			fire = nil
			ok := w.rewatch()
			s := w.read("file changed")
			changed := !sameContent(w.last, contents(s))
			if changed {
				w.deliver(s)
			}
			if w.afterRead != nil {
				w.afterRead(changed)
			}
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

func (w *Watcher) toPoll() {
	w.ino, w.fellBack = nil, true
}

// runPoll polls until ctx ends or, when it stands in for a failed inotify watch, until
// inotify can watch again (the configuration's directory is back).
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
				if ino, err := newInotify(w.cfg.Paths); err == nil {
					w.log.Info("file watch: inotify works again", "paths", w.cfg.Paths)
					w.ino, w.fellBack = ino, false
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
	if err := w.ino.watch(w.cfg.Paths); err != nil {
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
