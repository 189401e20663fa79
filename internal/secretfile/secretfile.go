package secretfile

import (
	"fmt"
	"io"
	"os"
)

// Read returns the bytes of the secret file at path, unchanged.
//
// It refuses a file that others can read (mode&0o004) or that group or others can write
// (mode&0o022): a readable secret lets anyone on the host use it, a writable one lets anyone
// replace it. Group read stays allowed so a service group can share a file. It refuses
// non-regular files (a directory, a FIFO that would block the reader, a device) and files
// over max bytes. The mode is checked on the opened file, not the name, so a rename between
// the check and the read cannot swap the file. Errors do not repeat path when the caller
// names it; os errors carry it anyway.
func Read(path string, max int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if err := checkMode(fi.Mode()); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("larger than %d bytes, not a secret", max)
	}
	return b, nil
}

// checkMode is Read's permission rule.
func checkMode(m os.FileMode) error {
	perm := m.Perm()
	if perm&0o004 != 0 {
		return fmt.Errorf("readable by others (mode %04o); chmod o-rwx it", perm)
	}
	if perm&0o022 != 0 {
		return fmt.Errorf("writable by group or others (mode %04o); chmod go-w it", perm)
	}
	return nil
}
