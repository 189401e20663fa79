package testutil

import (
	"fmt"
	"testing"
	"time"
)

// poll is how often a condition is checked: often enough that a test does not wait for
// nothing, seldom enough that the polling does not starve what it waits for.
const poll = time.Millisecond

// Eventually calls observe until it reports done and returns the value it observed last. If
// within passes first, it fails t with msg and that last value, so the failure says what the
// test saw instead of only that it waited. The deadline only turns a hang into a failure: a
// test never relies on it passing.
func Eventually[T any](t testing.TB, within time.Duration, observe func() (T, bool), msg string, args ...any) T {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v, done := observe()
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last observed: %+v", fmt.Sprintf(msg, args...), within, v)
			return v
		}
		time.Sleep(poll) // the polling interval, not a wait for the outcome
	}
}

// Until is Eventually for a condition with nothing to show but whether it holds.
func Until(t testing.TB, within time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	Eventually(t, within, func() (bool, bool) { ok := cond(); return ok, ok }, msg, args...)
}
