package sample

import (
	"os"
	"testing"
	"time"
)

// burnEnv makes the test binary, run again by a test, burn one core for the given duration
// instead of running tests, and exit by itself, so nothing outlives a failed test for long;
// the parent measures it (TestServiceCPURealProcess, the cgroup integration tests).
const burnEnv = "FLOWWEIGHT_TEST_BURN"

// extraMain is set by the integration tests for their own re-exec modes; it reports whether
// it handled the run and with which exit code.
var extraMain func() (code int, handled bool)

func TestMain(m *testing.M) {
	if extraMain != nil {
		if code, ok := extraMain(); ok {
			os.Exit(code)
		}
	}
	if d, err := time.ParseDuration(os.Getenv(burnEnv)); err == nil {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
