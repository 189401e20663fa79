package report

import (
	"bytes"
	"fmt"

	"flowweight/internal/secretfile"
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
// writable one lets anyone replace it (secretfile.Read, shared with the
// controller's API token). It refuses non-regular files, files over 4 KiB,
// and keys shorter than MinKeyLen bytes. Errors name the path.
func LoadKey(path string) ([]byte, error) {
	b, err := secretfile.Read(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
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
