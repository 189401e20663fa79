package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"flowweight/controller/config"
	"flowweight/controller/history"
	"flowweight/controller/state"
	"flowweight/internal/regfile"
)

const rollbackUsage = `usage: flowweight-controller rollback [-state FILE] [-allow-removal] [-force] [-wait D] [-config FILE] [N]

Applies version N of the configuration again (default: the version before the running one;
see flowweight-controller history). It checks version N as a reload would (it must still
validate, with the files it names; a change a reload cannot make, such as a listen address,
is refused) and with the same removal guard: a version that removes a service, every backend
of a service or more than half of all backends needs -allow-removal. Then it writes version
N to FILE (the file the running configuration was read from), atomically, as the operator's
new file, and the running controller applies it
through its ordinary reload, recording it as a new version ("rollback to version N"). If the
controller refuses it, or has not applied it within -wait, FILE is put back as it was.

FILE must hold the running configuration: a file with changes never applied is not
overwritten without -force. A configuration directory the command cannot write (a
Kubernetes ConfigMap) cannot be rolled back here: roll back its source, with -show's output
(flowweight-controller history -show N).

Flags:
`

// rollbackCommand is `flowweight-controller rollback`.
func rollbackCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rollback", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file; default: the one the running configuration was read from (the history says)")
	statePath := fs.String("state", defaultState, "the controller's state file (as given to the controller)")
	allow := fs.Bool("allow-removal", false, "confirm the removals the version makes")
	force := fs.Bool("force", false, "overwrite FILE even if it holds changes that were never applied")
	wait := fs.Duration("wait", 15*time.Second, "wait this long for the controller to apply the version (0: write FILE and return, for a stopped controller)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), rollbackUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 1 || *wait < 0 {
		fs.Usage()
		return 2
	}
	var want uint64
	if fs.NArg() == 1 {
		n, err := parseVersion(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "rollback:", err)
			return 2
		}
		want = n
	}
	rb := &rollback{cfgPath: *cfgPath, statePath: *statePath, allow: *allow, force: *force, out: stdout, errOut: stderr, unlock: func() {}}
	defer func() { rb.unlock() }()
	if err := rb.prepare(want); err != nil {
		fmt.Fprintln(stderr, "rollback:", err)
		return 1
	}
	if rb.target.SHA256 == rb.running.SHA256 {
		fmt.Fprintf(stdout, "version %d has the running configuration's content (version %d); nothing to do\n", rb.target.Number, rb.running.Number)
		return 0
	}
	// From here an interrupt (Ctrl-C, SIGTERM, or SIGHUP when the operator's session drops)
	// ends the wait as a timeout does: the file is put back, rather than left holding a
	// version the controller may refuse.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	fmt.Fprintf(stdout, "rolling back to version %d (applied %s by %s, sha256 %s): %s\n",
		rb.target.Number, rb.target.Time.UTC().Format(time.RFC3339), rb.target.Source, rb.target.Short(), printable(rb.changes, false))
	if err := rb.write(); err != nil {
		fmt.Fprintln(stderr, "rollback:", err)
		return 1
	}
	if *wait == 0 {
		fmt.Fprintf(stdout, "wrote version %d to %s; the controller applies it when it sees the change (or at its next start)\n", rb.target.Number, rb.file)
		return 0
	}
	e, err := rb.await(ctx, *wait)
	if err != nil {
		fmt.Fprintln(stderr, "rollback:", err)
		if rerr := rb.restore(); rerr != nil {
			fmt.Fprintf(stderr, "rollback: %s NOT put back: %v\n", rb.file, rerr)
		} else {
			fmt.Fprintf(stderr, "rollback: %s is back as it was (version %d); nothing changed\n", rb.file, rb.running.Number)
		}
		return 1
	}
	fmt.Fprintf(stdout, "the controller applied version %d as version %d (%s)\n", rb.target.Number, e.Number, e.Source)
	return 0
}

// rollback is one run of the command.
type rollback struct {
	cfgPath, statePath string
	allow, force       bool
	out, errOut        io.Writer

	store           history.Store
	running, target history.Entry
	changes         string // config.Summary from running to target
	removes         bool   // the target removes something (a confirmation goes with it)
	file            string // cfgPath with its symlinks resolved: what is written
	recorded        bool   // cfgPath is the history's, not the operator's -config
	before          []byte // the file's content before (nil: there was none)
	like            os.FileInfo
	wroteConfirm    bool
	unlock          func() // releases the history's lock (lockDir)
}

// prepare finds the versions and checks the target as the running controller's reload would,
// writing nothing.
func (rb *rollback) prepare(want uint64) error {
	store, err := historyStore(rb.statePath)
	if err != nil {
		return err
	}
	rb.store = store
	unlock, err := lockDir(store.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err == nil {
		rb.unlock = unlock
	}
	kept, err := listHistory(store, rb.errOut)
	if err != nil {
		return err
	}
	rb.running = kept[len(kept)-1]
	// The running configuration is the newest version: if that one is damaged, the newest
	// readable one is not it, and the checks (the removal guard, the file's content) would be
	// made against the wrong configuration.
	if _, hi, err := store.Newest(); err != nil || hi != rb.running.Number {
		if err == nil {
			err = fmt.Errorf("version %d", hi)
		}
		return fmt.Errorf("the newest version, the running configuration, cannot be read (%v); nothing written. A reload records a new one: fix or remove the file, then SIGHUP the controller", err)
	}
	if err := rb.checkPath(); err != nil {
		return err
	}
	switch {
	case want != 0:
		if rb.target, err = store.Get(want); err != nil {
			return err
		}
	case len(kept) < 2:
		return fmt.Errorf("nothing to roll back to: %s keeps only version %d, the running one", store.Dir, rb.running.Number)
	default:
		rb.target = kept[len(kept)-2]
	}
	if rb.target.SHA256 == rb.running.SHA256 {
		return nil
	}
	if err := rb.checkFile(); err != nil {
		return err
	}
	next, err := config.LoadData(rb.cfgPath, []byte(rb.target.Content))
	if err == nil {
		err = checkKeys(next)
	}
	if err != nil {
		return fmt.Errorf("version %d no longer validates; nothing written:\n%w", rb.target.Number, err)
	}
	cur, err := config.Parse(rb.cfgPath, []byte(rb.running.Content))
	if err != nil {
		return fmt.Errorf("the running version %d does not parse (written by another controller version?): %w", rb.running.Number, err)
	}
	if err := config.RestartNeeded(cur, next); err != nil {
		return fmt.Errorf("version %d cannot be applied by a reload; nothing written:\n%w", rb.target.Number, err)
	}
	r := config.Compare(cur, next)
	cut := config.CutShort([]byte(rb.running.Content), []byte(rb.target.Content))
	if r.NeedsConfirmation(cut) && !rb.allow {
		why := ""
		if cut != "" && !r.Mass() {
			why = " (" + cut + ")"
		}
		return fmt.Errorf("version %d would remove %s%s; nothing written. If that is intended, run again with -allow-removal", rb.target.Number, r, why)
	}
	rb.removes = r.Any()
	// The summary compares the versions as written, as `history` does: next holds what its
	// files gave (passphrases), cur does not, and every such key would show as changed.
	written, err := config.Parse(rb.cfgPath, []byte(rb.target.Content))
	if err != nil {
		return fmt.Errorf("version %d does not parse: %w", rb.target.Number, err)
	}
	rb.changes = config.Summary(cur, written)
	return nil
}

// checkPath makes -config the file the running configuration was read from, and refuses
// another: a rollback written to a file the controller does not read would only time out.
//
// Without -config the path is the history's. The history belongs to the controller's user,
// and the command usually runs as root, so the path is trusted only as far as checkFile
// checks it: an absolute path to an existing file that holds the running version's content.
// Creating a file, or overwriting other content (-force), needs the operator to name the
// file; otherwise whoever can write the state directory could make root write any path.
func (rb *rollback) checkPath() error {
	if rb.cfgPath == "" {
		if !filepath.IsAbs(rb.running.File) {
			return fmt.Errorf("the running version %d records no absolute configuration path (%q); name the file with -config", rb.running.Number, rb.running.File)
		}
		if rb.force {
			return fmt.Errorf("-force overwrites only a file named with -config (the running configuration, version %d, was read from %s)", rb.running.Number, rb.running.File)
		}
		rb.cfgPath, rb.recorded = rb.running.File, true
		return nil
	}
	abs, err := filepath.Abs(rb.cfgPath)
	if err != nil {
		return err
	}
	if rb.running.File != "" && abs != rb.running.File {
		return fmt.Errorf("-config %s: the running configuration (version %d) was read from %s; leave -config out, or name that file",
			rb.cfgPath, rb.running.Number, rb.running.File)
	}
	return nil
}

// checkFile finds the file to write (symlinks followed: an operator's link, or a ConfigMap's
// ..data, stays a link) and refuses to overwrite content that was never applied.
func (rb *rollback) checkFile() error {
	file, err := filepath.EvalSymlinks(rb.cfgPath)
	if errors.Is(err, fs.ErrNotExist) && !rb.recorded {
		rb.file = rb.cfgPath // nothing to lose: written as a new file
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s, where the history says the running configuration was read from, does not exist: name the file to write with -config", rb.cfgPath)
	}
	if err != nil {
		return err
	}
	rb.file = file
	data, fi, err := regfile.ReadInfo(file, config.MaxFileSize)
	if err != nil {
		return err
	}
	rb.before, rb.like = data, fi
	if sum := sha256Hex(data); sum != rb.running.SHA256 && !rb.force {
		return fmt.Errorf("%s holds content that was never applied (sha256 %.12s; the running configuration is version %d, %s): a rollback would overwrite it. Keep a copy, then run again with -force",
			rb.cfgPath, sum, rb.running.Number, rb.running.Short())
	}
	return nil
}

// write leaves the request (and, with -allow-removal, the confirmation) next to the state
// file, then replaces the configuration file; the controller's watcher does the rest.
func (rb *rollback) write() error {
	if rb.allow && rb.removes {
		conf := config.Confirm([]byte(rb.target.Content), time.Now(), 15*time.Minute)
		if err := state.WriteFileAtomic(confirmPath(rb.cfgPath, rb.statePath), conf.Encode(), 0o644); err != nil {
			return err
		}
		rb.wroteConfirm = true
	}
	req, err := history.EncodeRequest(&history.Request{Format: history.Format, Version: rb.target.Number,
		SHA256: rb.target.SHA256, Expires: time.Now().Add(time.Hour)})
	if err == nil {
		err = state.WriteFileAtomic(history.RequestFor(rb.statePath), req, 0o644)
	}
	if err == nil {
		err = rb.replaceIf(rb.before, []byte(rb.target.Content))
	}
	if err != nil {
		rb.cleanup()
		return fmt.Errorf("%w; nothing changed", err)
	}
	return nil
}

// replace writes content to the configuration file atomically, with the mode and owner of the
// file it replaces (0644 root's for a new one): the controller's user must still read it.
func (rb *rollback) replace(content []byte) error {
	perm := os.FileMode(0o644)
	if rb.like != nil {
		perm = rb.like.Mode().Perm()
	}
	err := state.WriteFileAtomicAs(rb.file, content, perm, func(f *os.File) error { return sameOwner(f, rb.like) })
	if errors.Is(err, fs.ErrPermission) || isReadOnly(err) {
		return fmt.Errorf("%w (a read-only configuration, such as a ConfigMap: roll back its source instead; `flowweight-controller history -show %d` prints the version)", err, rb.target.Number)
	}
	return err
}

// replaceIf replaces the file with content only if it still holds was (nil: no file), read
// just before: an operator's edit, or another tool's, since the command last looked is never
// overwritten. (A write between this read and the rename can still be lost: no lock covers
// an editor.)
func (rb *rollback) replaceIf(was, content []byte) error {
	if err := rb.stillHolds(was); err != nil {
		return err
	}
	return rb.replace(content)
}

// stillHolds checks that the file holds was (nil: that there is no file).
func (rb *rollback) stillHolds(was []byte) error {
	now, err := regfile.Read(rb.file, config.MaxFileSize)
	switch {
	case errors.Is(err, fs.ErrNotExist) && was == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s was removed since the rollback read it; left as it is", rb.file)
	case err != nil:
		return err
	case was == nil:
		return fmt.Errorf("%s was created since the rollback looked (sha256 %.12s); left as it is", rb.file, sha256Hex(now))
	case !bytes.Equal(now, was):
		return fmt.Errorf("%s changed since the rollback read it (sha256 %.12s, not %.12s: an edit, or another rollback); left as it is", rb.file, sha256Hex(now), sha256Hex(was))
	}
	return nil
}

// await waits for the controller to record the target's content as a new version, or to
// refuse it.
func (rb *rollback) await(ctx context.Context, wait time.Duration) (history.Entry, error) {
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if e, _, err := rb.store.Newest(); err == nil && e.Number > rb.running.Number && e.SHA256 == rb.target.SHA256 {
			return e, nil
		}
		if data, err := regfile.Read(history.RequestFor(rb.statePath), history.MaxRequestSize); err == nil {
			if r, err := history.DecodeRequest(data); err == nil && r.Refused != "" && r.SHA256 == rb.target.SHA256 {
				return history.Entry{}, fmt.Errorf("the controller refused version %d: %s", rb.target.Number, printable(r.Refused, true))
			}
		}
		if time.Now().After(deadline) {
			return history.Entry{}, fmt.Errorf("the controller did not apply version %d within %v (is it running, with -state %s? one that polls its file with -config-poll needs two periods: raise -wait)",
				rb.target.Number, wait, rb.statePath)
		}
		select {
		case <-ctx.Done():
			return history.Entry{}, fmt.Errorf("interrupted while waiting for the controller to apply version %d", rb.target.Number)
		case <-tick.C:
		}
	}
}

// restore puts the configuration file back as it was and removes what write left; only if
// the file still holds what the rollback wrote, so an edit made while it waited stays.
func (rb *rollback) restore() error {
	target := []byte(rb.target.Content)
	var err error
	if rb.before != nil {
		err = rb.replaceIf(target, rb.before)
	} else if err = rb.stillHolds(target); err == nil {
		err = os.Remove(rb.file)
	}
	rb.cleanup()
	return err
}

func (rb *rollback) cleanup() {
	os.Remove(history.RequestFor(rb.statePath))
	if rb.wroteConfirm {
		os.Remove(confirmPath(rb.cfgPath, rb.statePath))
	}
}

// isReadOnly reports a read-only file system (EROFS), as a ConfigMap mount is.
func isReadOnly(err error) bool {

	return errors.Is(err, syscall.EROFS)
}
