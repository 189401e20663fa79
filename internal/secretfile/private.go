package secretfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"flowweight/internal/regfile"
)

// ReadPrivate reads a file the controller writes for itself and trusts on reading (the state
// file): a regular file of at most max bytes, opened without blocking, that passes Read's mode
// checks, belongs to this process's user or root, and sits in a directory that only they can
// change (owned by them, not writable by group or others unless sticky, as /tmp is: there
// nobody else can rename over a file they do not own). A file anyone could write or replace
// would be instructions from anyone. Errors name the path.
func ReadPrivate(path string, max int64) ([]byte, error) {
	data, err := readOwned(regfile.ReadInfo, path, max, -1)
	if err != nil {
		return nil, err
	}
	if err := CheckDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return data, nil
}

// readOwned reads the regular file at path, at most max bytes, refusing it unless it passes
// Read's mode checks and belongs to this process's user, root or the uid also (-1: none).
func readOwned(read func(string, int64) ([]byte, fs.FileInfo, error), path string, max int64, also int) ([]byte, error) {
	data, fi, err := read(path, max)
	if err != nil {
		return nil, err
	}
	if err := checkMode(fi.Mode()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkOwner(fi, also); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// ReadStateDirFile is ReadPrivate for a file in a directory under a service's state directory
// (path = STATE/SUB/FILE), read by that service or by an operator's command run as root or as
// another user: the file and SUB may then also belong to the owner of STATE, as when systemd's
// StateDirectory= gives the service's user /var/lib/NAME and the operator runs `controller
// history` as root. STATE must be owned by this user, root or SUB's owner and be writable by
// nobody else (no sticky exception), so no one else could have made SUB; SUB must not be
// writable by group or others; FILE must not be a symbolic link. Errors name the path.
func ReadStateDirFile(path string, max int64) ([]byte, error) {
	sub := filepath.Dir(path)
	sfi, err := os.Stat(sub)
	if err != nil {
		return nil, err
	}
	trusted := -1
	if pfi, err := os.Stat(filepath.Dir(sub)); err == nil && pfi.Mode().Perm()&0o022 == 0 &&
		checkOwner(pfi, ownerOf(sfi)) == nil {
		trusted = ownerOf(sfi)
	}
	if err := checkOwner(sfi, trusted); err != nil {
		return nil, fmt.Errorf("directory %s: %w", sub, err)
	}
	if m := sfi.Mode(); m.Perm()&0o022 != 0 {
		return nil, fmt.Errorf("directory %s: writable by group or others (mode %04o): anyone could replace the file; chmod go-w it", sub, m.Perm())
	}
	// The file itself must not be a symbolic link: written only by rename, a link there was
	// planted, and would have root open whatever it names (a root-owned private file passes
	// every check above, and its decode errors would quote it).
	return readOwned(regfile.ReadInfoNoFollow, path, max, trusted)
}

// CheckDir refuses a directory that others can change: not owned by this process's user or
// root, or writable by group or others without the sticky bit. Errors name the directory.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if err := CheckOwner(fi); err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if m := fi.Mode(); m.Perm()&0o022 != 0 && m&os.ModeSticky == 0 {
		return fmt.Errorf("directory %s: writable by group or others (mode %04o): anyone could replace the file; chmod go-w it", dir, m.Perm())
	}
	return nil
}
