package history

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Request is what `controller rollback` leaves next to the state file while it waits for the
// running controller: the version whose content it wrote to the configuration file, so that
// the controller records what it applies as a rollback; and, when the controller refuses that
// content, why (the command then puts the file back as it was).
type Request struct {
	Format  int       `json:"format"`
	Version uint64    `json:"version"` // the version rolled back to
	SHA256  string    `json:"sha256"`  // of the content written to the configuration file
	Expires time.Time `json:"expires"` // after this it no longer names the content's source
	Refused string    `json:"refused,omitempty"`
}

// RequestFor is the rollback request's path for the state file statePath.
func RequestFor(statePath string) string { return statePath + ".rollback" }

// MaxRequestSize bounds a request file: a few fields and one error text.
const MaxRequestSize = 64 << 10

// Matches reports whether r asks for the content whose SHA-256 (hex) is sum, at now.
func (r *Request) Matches(sum string, now time.Time) bool {
	return r != nil && r.SHA256 == sum && now.Before(r.Expires)
}

// EncodeRequest renders r as JSON ending in a newline.
func EncodeRequest(r *Request) ([]byte, error) { return encode(r, r.validate) }

// DecodeRequest parses a request file strictly.
func DecodeRequest(data []byte) (*Request, error) {
	return decode(data, MaxRequestSize, (*Request).validate)
}

func (r *Request) validate() error {
	var errs []error
	if r.Format != Format {
		errs = append(errs, fmt.Errorf("format: %d, this controller reads %d", r.Format, Format))
	}
	if r.Version == 0 {
		errs = append(errs, errors.New("version: missing"))
	}
	if len(r.SHA256) != 64 || !isHex(r.SHA256) {
		errs = append(errs, errors.New("sha256: not 64 hex digits"))
	}
	if r.Expires.IsZero() {
		errs = append(errs, errors.New("expires: missing"))
	}
	if len(r.Refused) > MaxRequestSize/2 || !utf8.ValidString(r.Refused) {
		errs = append(errs, errors.New("refused: too long or not UTF-8"))
	}
	return errors.Join(errs...)
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
