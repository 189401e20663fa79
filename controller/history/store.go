package history

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"flowweight/controller/state"
	"flowweight/internal/secretfile"
)

// DirFor is the history directory of the controller whose state file is statePath: next to
// it, because the state directory is the one place the systemd unit lets the controller
// write, and the history is what the controller did, not what the operator wrote.
func DirFor(statePath string) string { return statePath + ".history" }

// Store is a history directory.
type Store struct {
	Dir string
}

// fileName is version n's file: zero-padded so a listing sorts by number.
func fileName(n uint64) string { return fmt.Sprintf("%08d.json", n) }

// parseName returns the version number a file name stands for; ok false for any other name
// (temporary files of an interrupted write, an operator's notes).
func parseName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".json")
	if !ok || len(digits) < 8 || len(digits) > 20 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	// One spelling per number: "000000001.json" is not version 1's file.
	return n, err == nil && n > 0 && fileName(n) == name
}

// Problem is a version file that could not be used: it is skipped, and the caller reports it.
type Problem struct {
	Number uint64
	Path   string
	Err    error
}

func (p Problem) Error() string { return fmt.Sprintf("configuration history: %s: %v", p.Path, p.Err) }

// List returns the readable versions, oldest first, and a Problem for each version file that
// is not (corrupt, not private, unreadable). The error is for the directory itself: a missing
// directory is an error satisfying errors.Is(err, fs.ErrNotExist) (no configuration recorded
// yet).
func (s Store) List() ([]Entry, []Problem, error) {
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("configuration history: %w", err)
	}
	var out []Entry
	var bad []Problem
	for _, de := range des {
		n, ok := parseName(de.Name())
		if !ok {
			continue
		}
		path := filepath.Join(s.Dir, de.Name())
		e, err := s.read(path, n)
		if err != nil {
			bad = append(bad, Problem{Number: n, Path: path, Err: err})
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmpNum(a.Number, b.Number) })
	slices.SortFunc(bad, func(a, b Problem) int { return cmpNum(a.Number, b.Number) })
	return out, bad, nil
}

func cmpNum(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// read reads one version file as private (secretfile.ReadStateDirFile: regular, not readable
// by others, owned by this user, root or the owner of the state directory, in a directory
// only they can change): a version is what a rollback applies, so whoever could write it
// could choose the next configuration. The state directory's owner counts because the
// controller writes as its own user and an operator reads as root.
func (s Store) read(path string, n uint64) (Entry, error) {
	data, err := secretfile.ReadStateDirFile(path, MaxEntrySize)
	if err != nil {
		return Entry{}, err
	}
	e, err := Decode(data)
	if err != nil {
		return Entry{}, err
	}
	if e.Number != n {
		return Entry{}, fmt.Errorf("number: %d in a file named for version %d", e.Number, n)
	}
	return *e, nil
}

// Get returns version n. An unknown version's error lists the versions kept.
func (s Store) Get(n uint64) (Entry, error) {
	path := filepath.Join(s.Dir, fileName(n))
	e, err := s.read(path, n)
	if err == nil {
		return e, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Entry{}, fmt.Errorf("configuration history: version %d: %w", n, err)
	}
	kept, _, lerr := s.List()
	if lerr != nil {
		return Entry{}, lerr
	}
	return Entry{}, fmt.Errorf("configuration history %s: no version %d (kept: %s)", s.Dir, n, numbers(kept))
}

// numbers lists the version numbers of es ("none" for none).
func numbers(es []Entry) string {
	if len(es) == 0 {
		return "none"
	}
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = strconv.FormatUint(e.Number, 10)
	}
	return strings.Join(parts, ", ")
}

// Record keeps content as a new version applied now by source, unless it is the newest
// version's content already (a restart or a SIGHUP of the same file is no new version), and
// then drops the oldest versions beyond keep (at least 1). added is false when nothing was written. The
// directory is created (0700) if missing. An error names the path; versions already kept are
// never touched by a failed write, and a failure to drop old ones leaves the new one written.
func (s Store) Record(content []byte, source, file string, now time.Time, keep int) (e Entry, added bool, err error) {
	keep = max(keep, 1) // the new version itself (controller.config_history's bounds are the configuration's)
	if err := os.Mkdir(s.Dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return Entry{}, false, fmt.Errorf("configuration history: %w", err)
	}
	newest, hi, err := s.Newest()
	if err != nil && !errors.Is(err, errNoVersion) {
		if hi == 0 {
			return Entry{}, false, err // the directory itself
		}
		newest = Entry{} // a damaged newest version: the new one is written after it
	}
	next, err := s.nextNumber()
	if err != nil {
		return Entry{}, false, err
	}
	e = NewEntry(next, content, source, file, now)
	if newest.Number != 0 && newest.SHA256 == e.SHA256 && newest.Number == next-1 {
		return newest, false, nil
	}
	data, err := Encode(&e)
	if err != nil {
		return Entry{}, false, fmt.Errorf("configuration history %s: %w", s.Dir, err)
	}
	if err := state.WriteFileAtomic(filepath.Join(s.Dir, fileName(next)), data, 0o600); err != nil {
		return Entry{}, false, fmt.Errorf("configuration history: %w", err)
	}
	return e, true, s.prune(keep)
}

// errNoVersion is Newest's error for a directory holding no version file.
var errNoVersion = errors.New("no version recorded")

// Newest reads only the highest-numbered version file, and returns it with that number: what
// a reload's Record and a waiting rollback need, without reading every version kept (up to
// config_history of them, each up to 40 MiB). hi is 0 when the directory could not be read or
// holds no version file; with hi > 0 and an error, that file is damaged.
func (s Store) Newest() (e Entry, hi uint64, err error) {
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return Entry{}, 0, fmt.Errorf("configuration history: %w", err)
	}
	for _, de := range des {
		if n, ok := parseName(de.Name()); ok && n > hi {
			hi = n
		}
	}
	if hi == 0 {
		return Entry{}, 0, fmt.Errorf("configuration history %s: %w", s.Dir, errNoVersion)
	}
	path := filepath.Join(s.Dir, fileName(hi))
	e, err = s.read(path, hi)
	if err != nil {
		return Entry{}, hi, Problem{Number: hi, Path: path, Err: err}
	}
	return e, hi, nil
}

// nextNumber is one more than the highest version file's number, readable or not: a corrupt
// newest version is not overwritten, and numbers never go back.
func (s Store) nextNumber() (uint64, error) {
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return 0, fmt.Errorf("configuration history: %w", err)
	}
	var hi uint64
	for _, de := range des {
		if n, ok := parseName(de.Name()); ok && n > hi {
			hi = n
		}
	}
	if hi == ^uint64(0) {
		return 0, fmt.Errorf("configuration history %s: version numbers exhausted", s.Dir)
	}
	return hi + 1, nil
}

// prune removes the version files beyond the newest keep (by number, readable or not).
func (s Store) prune(keep int) error {
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return fmt.Errorf("configuration history: %w", err)
	}
	var nums []uint64
	for _, de := range des {
		if n, ok := parseName(de.Name()); ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	var errs []error
	for len(nums) > keep {
		path := filepath.Join(s.Dir, fileName(nums[0]))
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("configuration history: drop old version: %w", err))
		}
		nums = nums[1:]
	}
	return errors.Join(errs...)
}
