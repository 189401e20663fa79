package health

import (
	"strings"
	"testing"
	"time"
)

func TestTimedOut(t *testing.T) {
	for _, tc := range []struct {
		err  string
		want bool
	}{
		{"GET http://127.0.0.1:8080/healthz: timeout", true},
		{"tcp connect 127.0.0.1:9000: timeout", true},
		{"udp 127.0.0.1:53: no answer: timeout", true},
		{"timeout", true},
		{"GET http://127.0.0.1:8080/healthz: connect: connection refused", false},
		{"GET http://timeout/: status 503 Service Unavailable", false},
		{"GET http://x/: read: connection reset by peer", false},
		{"", false},
	} {
		if got := TimedOut(tc.err); got != tc.want {
			t.Errorf("TimedOut(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestLongTimeoutKeepsItsCause: a timeout behind a URL longer than MaxErrLen still reads as
// a timeout; any other long message is cut at the end as before.
func TestLongTimeoutKeepsItsCause(t *testing.T) {
	long := "GET http://127.0.0.1:8080/" + strings.Repeat("a", 200)
	r := fail(0, time.Second, long+": timeout")
	if len(r.Err) > MaxErrLen || !TimedOut(r.Err) || !strings.HasPrefix(r.Err, "GET http://127.0.0.1:8080/aaa") {
		t.Fatalf("%d bytes %q", len(r.Err), r.Err)
	}
	r = fail(0, time.Second, long+": connection refused")
	if len(r.Err) != MaxErrLen || TimedOut(r.Err) {
		t.Fatalf("%d bytes %q", len(r.Err), r.Err)
	}
}
