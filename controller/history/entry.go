package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Format is the version file format this package writes and the only one it reads.
const Format = 1

// MaxEntrySize bounds one version file: a configuration is read up to 16 MiB, and JSON
// escaping can double a quote-heavy file.
const MaxEntrySize = 40 << 20

// maxMeta bounds the source and file fields: a line of text each.
const maxMeta = 4096

// Entry is one applied configuration.
type Entry struct {
	Format int       `json:"format"`
	Number uint64    `json:"number"` // 1, 2, ...; never reused, even when old versions are dropped
	Time   time.Time `json:"time"`   // when it was applied (UTC)
	SHA256 string    `json:"sha256"` // of Content, hex
	// Source is what applied it: "start", "file changed", "poll", "SIGHUP",
	// "controller reload -allow-removal", "rollback to version N".
	Source  string `json:"source"`
	File    string `json:"file"`    // the configuration file it was read from
	Content string `json:"content"` // the file's bytes (valid UTF-8, as TOML must be)
}

// NewEntry is version n of content.
func NewEntry(n uint64, content []byte, source, file string, now time.Time) Entry {
	sum := sha256.Sum256(content)
	return Entry{Format: Format, Number: n, Time: now.UTC(), SHA256: hex.EncodeToString(sum[:]),
		Source: source, File: file, Content: string(content)}
}

// Validate checks every field; the content must hash to SHA256, so a version damaged on disk
// is never applied as if it were the one recorded.
func (e *Entry) Validate() error {
	var errs []error
	if e.Format != Format {
		errs = append(errs, fmt.Errorf("format: %d, this controller reads %d", e.Format, Format))
	}
	if e.Number == 0 {
		errs = append(errs, errors.New("number: missing"))
	}
	if e.Time.IsZero() {
		errs = append(errs, errors.New("time: missing"))
	}
	// Source and file are printed as they are by `history` and `rollback`, usually on root's
	// terminal: a control character (an escape sequence, a newline) could rewrite what it shows.
	if e.Source == "" || len(e.Source) > maxMeta || !utf8.ValidString(e.Source) || hasControl(e.Source) {
		errs = append(errs, errors.New("source: missing, too long, not UTF-8 or holding a control character"))
	}
	if len(e.File) > maxMeta || !utf8.ValidString(e.File) || hasControl(e.File) {
		errs = append(errs, errors.New("file: too long, not UTF-8 or holding a control character"))
	}
	if !utf8.ValidString(e.Content) {
		errs = append(errs, errors.New("content: not UTF-8"))
	}
	sum := sha256.Sum256([]byte(e.Content))
	if want := hex.EncodeToString(sum[:]); e.SHA256 != want {
		errs = append(errs, fmt.Errorf("sha256: %.16s... does not match the content (%.16s...): the file was changed or damaged", e.SHA256, want))
	}
	return errors.Join(errs...)
}

// Encode renders e as indented JSON ending in a newline.
func Encode(e *Entry) ([]byte, error) { return encode(e, e.Validate) }

// Decode parses a version file strictly (no unknown field, nothing after the object) and
// validates it: an error means none of it may be used.
func Decode(data []byte) (*Entry, error) {
	return decode(data, MaxEntrySize, (*Entry).Validate)
}

// encode validates v and renders it as indented JSON ending in a newline.
func encode(v any, validate func() error) ([]byte, error) {
	if err := validate(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// decode parses data, at most max bytes, as one T strictly (no unknown field, nothing after
// the object) and validates it.
func decode[T any](data []byte, max int, validate func(*T) error) (*T, error) {
	if len(data) > max {
		return nil, fmt.Errorf("%d bytes, more than %d", len(data), max)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v T
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	if err := validate(&v); err != nil {
		return nil, err
	}
	return &v, nil
}

// hasControl reports whether s holds a control character (C0, DEL or C1).
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// Short is the hash's first 12 hex digits, as listings show it.
func (e *Entry) Short() string { return e.SHA256[:min(12, len(e.SHA256))] }
