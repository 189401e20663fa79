package health

import "strings"

// TimeoutCause is the cause every check writes at the end of Result.Err when the service
// did not answer within the check's Timeout: "GET http://…/healthz: timeout". It travels in
// the push report's health_error (docs/push-protocol.md), so the collector can tell a
// service that is slow to answer from one that refused, reset or answered wrongly without a
// new wire field: only a late answer may be load rather than death.
const TimeoutCause = "timeout"

// TimedOut reports whether a failed check's Err says the service did not answer in time,
// rather than refused, reset, or answered with a bad status or body.
func TimedOut(err string) bool {
	return err == TimeoutCause || strings.HasSuffix(err, ": "+TimeoutCause)
}
