package report

import (
	"errors"
	"fmt"
)

// Reason classifies a rejected datagram or report. The values are stable
// strings so they can be used directly as metric label values and log fields.
type Reason string

// The rejection reasons. Open returns the first six, Guard.Check the last two.
const (
	ReasonTruncated      Reason = "truncated"       // shorter than the header says or than the minimum
	ReasonOversized      Reason = "oversized"       // longer than MaxDatagram
	ReasonVersion        Reason = "version"         // magic is ours, version is not one we speak
	ReasonUnknownBackend Reason = "unknown_backend" // no key for the backend id
	ReasonBadMAC         Reason = "bad_mac"         // tag does not verify with the backend's key
	ReasonMalformed      Reason = "malformed"       // bad magic, lengths, id, reserved bits or field values
	ReasonReplay         Reason = "replay"          // sequence or boot epoch already seen
	ReasonClockSkew      Reason = "clock_skew"      // report time too far from the collector's clock
)

// Reasons lists every Reason in a fixed order, so counters can be kept in an
// array and exported with every label present from the start.
var Reasons = [...]Reason{
	ReasonTruncated,
	ReasonOversized,
	ReasonVersion,
	ReasonUnknownBackend,
	ReasonBadMAC,
	ReasonMalformed,
	ReasonReplay,
	ReasonClockSkew,
}

// Error is the type of every rejection returned by Open and Guard.Check, and
// of every validation failure returned by AppendSeal.
type Error struct {
	Reason Reason
	// BackendID is the id the datagram claimed, when it could be read; it is
	// not authenticated for ReasonUnknownBackend and ReasonBadMAC.
	BackendID string
	Err       error
}

func (e *Error) Error() string {
	if e.BackendID != "" {
		return fmt.Sprintf("report %s from backend %q: %v", e.Reason, e.BackendID, e.Err)
	}
	return fmt.Sprintf("report %s: %v", e.Reason, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of the *Error in err's chain, or "" when there
// is none.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func reject(reason Reason, id, format string, args ...any) *Error {
	return &Error{Reason: reason, BackendID: id, Err: fmt.Errorf(format, args...)}
}
