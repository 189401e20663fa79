package secretfile

import (
	"fmt"
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
	data, fi, err := regfile.ReadInfo(path, max)
	if err != nil {
		return nil, err
	}
	if err := checkMode(fi.Mode()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := CheckOwner(fi); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := CheckDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return data, nil
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
