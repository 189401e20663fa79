package report

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// HKDF parameters of per-backend push keys (docs/push-protocol.md, "Key
// derivation"). The version label lets a later derivation coexist with this
// one; changing any of these changes every probe's key.
const (
	DeriveSalt       = "flowweight-push-v1"
	DeriveInfoPrefix = "flowweight-push-v1 key for backend "
	derivedLen       = 32 // bytes of HKDF output, hex-encoded into the key
)

// DeriveKey returns backendID's push key: the 64 lowercase hex digits of
// HKDF-SHA256 (RFC 5869) with the controller's secret as input keying
// material, DeriveSalt as salt, DeriveInfoPrefix+backendID as info, and 32
// bytes of output. The hex digits themselves are the HMAC key, so the
// probe's key file is that line of text (LoadKey drops the newline).
//
// Why derive: every probe then holds a key that speaks for its own backend
// only (one leaked probe key forges one backend, not all), while the
// controller keeps a single secret and the operator a single command
// (`controller key`) to hand out keys.
func DeriveKey(secret []byte, backendID string) ([]byte, error) {
	if len(secret) < MinKeyLen {
		return nil, fmt.Errorf("report: controller secret is %d bytes, want >= %d", len(secret), MinKeyLen)
	}
	if !validID(backendID) {
		return nil, fmt.Errorf("report: backend id %q: want 1..%d bytes of [A-Za-z0-9._-]", backendID, MaxIDLen)
	}
	k, err := hkdf.Key(sha256.New, secret, []byte(DeriveSalt), DeriveInfoPrefix+backendID, derivedLen)
	if err != nil {
		return nil, fmt.Errorf("report: deriving the key of backend %q: %w", backendID, err)
	}
	return hex.AppendEncode(nil, k), nil
}
