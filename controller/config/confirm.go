package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Confirmation is the operator's one-shot consent to a reload that removes too much (see
// Removal.Mass), left by `flowweight-controller reload -allow-removal` in a small file the
// controller watches. It names the exact content it consents to by its SHA-256: a file cut
// short afterwards has another digest, so the consent cannot leak to an accident, and it
// expires, so a consent left lying around does not apply to the same content months later.
//
// It is a file rather than a key in controller.toml because a key in the file itself would be
// read from a truncated file just the same (TOML keys of [controller] come first), and would
// stay there disarming the check for every later reload.
type Confirmation struct {
	Version int       `json:"version"`
	SHA256  string    `json:"sha256"`  // hex digest of the whole configuration file
	Expires time.Time `json:"expires"` // ignored after this
}

// MaxConfirmationSize bounds what is parsed from the marker file.
const MaxConfirmationSize = 4096

// Confirm returns a confirmation of exactly data, valid for ttl from now.
func Confirm(data []byte, now time.Time, ttl time.Duration) Confirmation {
	sum := sha256.Sum256(data)
	return Confirmation{Version: 1, SHA256: hex.EncodeToString(sum[:]), Expires: now.Add(ttl).UTC().Truncate(time.Second)}
}

// Encode renders the marker file.
func (c Confirmation) Encode() []byte {
	data, _ := json.MarshalIndent(c, "", "  ") // cannot fail: strings, an int and a time
	return append(data, '\n')
}

// Allows reports whether c consents to a configuration whose whole content is data, at now.
func (c Confirmation) Allows(data []byte, now time.Time) bool {
	sum := sha256.Sum256(data)
	return c.SHA256 == hex.EncodeToString(sum[:]) && now.Before(c.Expires)
}

// ParseConfirmation decodes a marker file strictly.
func ParseConfirmation(data []byte) (Confirmation, error) {
	var c Confirmation
	if len(data) > MaxConfirmationSize {
		return c, fmt.Errorf("%d bytes, more than %d", len(data), MaxConfirmationSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Confirmation{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Confirmation{}, errors.New("data after the JSON object")
	}
	var errs []error
	if c.Version != 1 {
		errs = append(errs, fmt.Errorf("version: %d, want 1", c.Version))
	}
	if b, err := hex.DecodeString(c.SHA256); err != nil || len(b) != sha256.Size || c.SHA256 != hex.EncodeToString(b) {
		errs = append(errs, fmt.Errorf("sha256: %q is not 64 lowercase hex digits", c.SHA256))
	}
	if c.Expires.IsZero() {
		errs = append(errs, errors.New("expires: missing"))
	}
	if err := errors.Join(errs...); err != nil {
		return Confirmation{}, err
	}
	return c, nil
}
