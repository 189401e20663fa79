package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"flowweight/internal/secretfile"
)

// Version is the format this package writes and the only one it reads.
const Version = 1

// Bounds on what a state file may hold: a file the controller did not write (or a disk that
// returned garbage) must not take memory without limit.
const (
	MaxFileSize = 16 << 20
	MaxBackends = 65536
)

// File is the whole state file.
type File struct {
	Version int       `json:"version"`
	Written time.Time `json:"written"`
	// Backends by name: a host's name, which is the same in every service it backs.
	Backends map[string]Backend `json:"backends"`
	// Replay holds the push server's replay high-water mark of each backend, in the push
	// package's own encoding: this package only keeps it.
	Replay map[string]json.RawMessage `json:"replay,omitempty"`
	// Weights are the weights last written to the switches, by service name and then backend
	// name, on the weighting's total (not the switch's slot counts). A restarted controller
	// starts from them: they are its own, where a switch's word is anyone's who can connect.
	// Absent in files written before it; a controller older than this field refuses a file
	// that has it (unknown field) and starts without the file.
	Weights map[string]map[string]uint16 `json:"weights,omitempty"`
}

// Backend is what is remembered about one backend.
type Backend struct {
	// Service is the service the backend was in when this was saved; learned capacity is
	// relative to that service's pool and is restored only into the same service.
	Service string `json:"service"`
	// OperatorDrain is the drain set through the API (not the probe's own drain flag).
	OperatorDrain bool `json:"operator_drain,omitempty"`
	// LearnedCapacity is the learned capacity factor (0: none learned yet, which means 1).
	LearnedCapacity float64 `json:"learned_capacity,omitempty"`
	// Also is the learned capacity in the other services of a host that backs several
	// (config [[host]]), by service name: learning is per service, and one entry per name
	// would let the last service overwrite the others'. Absent for a host in one service, so
	// such files read as they always did, by older controllers too.
	Also map[string]float64 `json:"also_learned,omitempty"`
	// Removed is when a reload took the backend out of the configuration; nil while it is
	// configured. Entries removed long ago are dropped by the controller.
	Removed *time.Time `json:"removed,omitempty"`
}

// LearnedIn is the capacity learned for the backend in service (0: none).
func (b Backend) LearnedIn(service string) float64 {
	if b.Service == service {
		return b.LearnedCapacity
	}
	return b.Also[service]
}

// Learn records l as the capacity learned in service: the first service recorded is the
// entry's Service, later ones go to Also. l == 0 records nothing.
func (b *Backend) Learn(service string, l float64) {
	switch {
	case l == 0:
	case b.Service == "" || b.Service == service:
		b.Service, b.LearnedCapacity = service, l
	default:
		if b.Also == nil {
			b.Also = map[string]float64{}
		}
		b.Also[service] = l
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Decode parses and checks a state file entirely: an error means nothing in it may be used.
func Decode(data []byte) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%d bytes, more than %d", len(data), MaxFileSize)
	}
	if err := checkKeys(data, reflect.TypeFor[File]()); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	for name, raw := range f.Replay {
		// Kept compact, as the push package wrote it, whatever indentation the file had.
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, fmt.Errorf("replay %q: %w", name, err)
		}
		f.Replay[name] = buf.Bytes()
	}
	return &f, nil
}

// Validate checks every entry and returns all problems joined.
func (f *File) Validate() error {
	var errs []error
	switch {
	case f.Version == 0:
		errs = append(errs, errors.New("version: missing"))
	case f.Version > Version:
		errs = append(errs, fmt.Errorf("version: %d was written by a newer controller; this one reads version %d", f.Version, Version))
	case f.Version != Version:
		errs = append(errs, fmt.Errorf("version: %d is not %d", f.Version, Version))
	}
	if len(f.Backends) > MaxBackends {
		errs = append(errs, fmt.Errorf("backends: %d entries, more than %d", len(f.Backends), MaxBackends))
	}
	for name, b := range f.Backends {
		key := fmt.Sprintf("backends %q", name)
		if !nameRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: not a backend name", key))
		}
		if !nameRE.MatchString(b.Service) {
			errs = append(errs, fmt.Errorf("%s.service: %q is not a service name", key, b.Service))
		}
		if l := b.LearnedCapacity; l != 0 && !(l >= 1e-3 && l <= 1e3) {
			errs = append(errs, fmt.Errorf("%s.learned_capacity: %v outside [0.001,1000]", key, l))
		}
		for svc, l := range b.Also {
			if !nameRE.MatchString(svc) || svc == b.Service {
				errs = append(errs, fmt.Errorf("%s.also_learned: %q is not a service name other than service", key, svc))
			}
			if !(l >= 1e-3 && l <= 1e3) {
				errs = append(errs, fmt.Errorf("%s.also_learned %q: %v outside [0.001,1000]", key, svc, l))
			}
		}
		if b.Removed != nil && b.Removed.IsZero() {
			errs = append(errs, fmt.Errorf("%s.removed: zero time", key))
		}
	}
	if len(f.Replay) > MaxBackends {
		errs = append(errs, fmt.Errorf("replay: %d entries, more than %d", len(f.Replay), MaxBackends))
	}
	for name := range f.Replay {
		if !nameRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("replay %q: not a backend name", name))
		}
	}
	n := 0
	for svc, ws := range f.Weights {
		if !nameRE.MatchString(svc) {
			errs = append(errs, fmt.Errorf("weights %q: not a service name", svc))
		}
		n += len(ws)
		for name := range ws {
			if !nameRE.MatchString(name) {
				errs = append(errs, fmt.Errorf("weights %q %q: not a backend name", svc, name))
			}
		}
	}
	if n > MaxBackends {
		errs = append(errs, fmt.Errorf("weights: %d entries, more than %d", n, MaxBackends))
	}
	return errors.Join(errs...)
}

// Encode renders f as indented JSON (keys sorted), ending in a newline.
func Encode(f *File) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// CorruptError is a state file that exists but cannot be used as a whole.
type CorruptError struct {
	Path string
	Err  error
}

func (e *CorruptError) Error() string { return fmt.Sprintf("state file %s: %v", e.Path, e.Err) }
func (e *CorruptError) Unwrap() error { return e.Err }

// Load reads and decodes path. A missing file is an error satisfying errors.Is(err,
// fs.ErrNotExist) (a first start); any other failure is a *CorruptError. The file is read as
// a private file (secretfile.ReadPrivate): a regular file, opened without blocking, not
// readable by others, not writable by group or others, owned by this user or root, in a
// directory others cannot write; whoever can write it can undo drains and lock probes out.
func Load(path string) (*File, error) {
	data, err := secretfile.ReadPrivate(path, MaxFileSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, &CorruptError{Path: path, Err: err}
	}
	f, err := Decode(data)
	if err != nil {
		return nil, &CorruptError{Path: path, Err: err}
	}
	return f, nil
}

// Quarantine moves an unusable state file aside to path+".corrupt" (replacing an older one),
// so the next write does not destroy what an operator may want to inspect.
func Quarantine(path string) (string, error) {
	aside := path + ".corrupt"
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	return aside, syncDir(filepath.Dir(path))
}

// Save encodes f and replaces path with it atomically.
func Save(path string, f *File) error {
	data, err := Encode(f)
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	return WriteFileAtomic(path, data, 0o600)
}

// WriteFileAtomic replaces path with data so that a reader (or a crash at any moment) sees
// either the old file or the new one whole: it writes a temporary file in the same directory,
// syncs it, renames it over path and syncs the directory. On error the old file is untouched
// and the temporary file removed.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return WriteFileAtomicAs(path, data, perm, nil)
}

// WriteFileAtomicAs is WriteFileAtomic that calls prepare on the temporary file before it is
// renamed into place (to give it the owner of the file it replaces, so that a reader never
// sees the new content with another owner).
func WriteFileAtomicAs(path string, data []byte, perm os.FileMode, prepare func(*os.File) error) error {
	return writeAtomic(path, data, perm, func(f *os.File, b []byte) error {
		if _, err := f.Write(b); err != nil {
			return err
		}
		if prepare != nil {
			return prepare(f)
		}
		return nil
	})
}

// writeAtomic is WriteFileAtomic with the write step replaceable, so a test can make it fail
// half-way.
func writeAtomic(path string, data []byte, perm os.FileMode, write func(*os.File, []byte) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = write(tmp, data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Prune drops entries of removed backends older than keep, then the oldest removed ones
// beyond max. Configured backends (Removed nil) are never dropped.
func Prune(backends map[string]Backend, now time.Time, keep time.Duration, max int) {
	var removed []string
	for name, b := range backends {
		if b.Removed == nil {
			continue
		}
		if now.Sub(*b.Removed) > keep {
			delete(backends, name)
			continue
		}
		removed = append(removed, name)
	}
	if len(removed) <= max {
		return
	}
	// Oldest first; names break ties so the result does not depend on map order.
	slices.SortFunc(removed, func(a, b string) int {
		if c := backends[a].Removed.Compare(*backends[b].Removed); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, name := range removed[:len(removed)-max] {
		delete(backends, name)
	}
}
