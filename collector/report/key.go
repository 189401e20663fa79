package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// maxKeyFile bounds how much of a key file is read; a key is a few dozen
// bytes, a larger file is a mistake (wrong path).
const maxKeyFile = 4096

// LoadKey reads a shared HMAC key from path. The key is the file's bytes as
// they are (binary, or text such as hex: both ends use the same bytes), less
// one trailing newline ("\n" or "\r\n") that editors and `echo` add.
//
// It refuses a file that others can read (mode&0o004) or that group or
// others can write (mode&0o022): a readable key lets anyone forge reports, a
// writable one lets anyone replace it. It refuses non-regular files, files
// over 4 KiB, and keys shorter than MinKeyLen bytes. Errors name the path.
func LoadKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat() // the opened file, not the name: no race with a rename
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	perm := fi.Mode().Perm()
	if perm&0o004 != 0 {
		return nil, fmt.Errorf("key file %s: readable by others (mode %04o); chmod o-rwx it", path, perm)
	}
	if perm&0o022 != 0 {
		return nil, fmt.Errorf("key file %s: writable by group or others (mode %04o); chmod go-w it", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("key file %s: larger than %d bytes, not a key", path, maxKeyFile)
	}
	if t, ok := bytes.CutSuffix(b, []byte("\n")); ok {
		b, _ = bytes.CutSuffix(t, []byte("\r"))
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("key file %s: empty", path)
	}
	if len(b) < MinKeyLen {
		return nil, fmt.Errorf("key file %s: key is %d bytes, want >= %d", path, len(b), MinKeyLen)
	}
	return b, nil
}
