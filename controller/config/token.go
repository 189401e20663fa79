package config

import (
	"fmt"
	"strings"

	"flowweight/internal/secretfile"
)

// MinTokenLen is the shortest API token accepted, in bytes after trimming white space: a
// 16-byte random token cannot be guessed over HTTP. `openssl rand -hex 32` makes a good one.
const MinTokenLen = 16

// maxTokenFile bounds how much of a token file is read; a larger file is the wrong path.
const maxTokenFile = 4096

// Secret is a string that prints as "[redacted]", so a Config logged or dumped with %v never
// shows the token.
type Secret string

func (Secret) String() string   { return "[redacted]" }
func (Secret) GoString() string { return `"[redacted]"` }

// MarshalText keeps encoders (JSON, TOML) from writing the secret.
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// Reveal returns the secret itself, for the one place that compares it.
func (s Secret) Reveal() string { return string(s) }

// ReadToken reads an API bearer token: the file's content less surrounding white space
// (editors and `echo` add a newline). The file passes the push key's checks (not readable by
// others, not writable by group or others, regular, at most 4 KiB). It refuses a file that
// holds only white space, which once turned authentication off, a token shorter than
// MinTokenLen, and bytes that cannot travel in an Authorization header. Errors name the path.
func ReadToken(path string) (Secret, error) {
	b, err := secretfile.Read(path, maxTokenFile)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return parseToken(path, b)
}

// parseToken is ReadToken's check of the file's content.
func parseToken(path string, b []byte) (Secret, error) {
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s holds no token (empty or only white space)", path)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] >= 0x7f {
			return "", fmt.Errorf("%s: byte %#02x at offset %d; a token is printable ASCII with no spaces (it travels in an Authorization header)", path, tok[i], i)
		}
	}
	if len(tok) < MinTokenLen {
		return "", fmt.Errorf("%s: token is %d bytes, want at least %d (openssl rand -hex 32 makes one)", path, len(tok), MinTokenLen)
	}
	return Secret(tok), nil
}
