package lab

import (
	"bytes"
	"strings"
	"sync"
)

// TB is the part of testing.TB that ForTest uses, so that this package does
// not import testing.
type TB interface {
	Helper()
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
}

// ForTest returns a lab in t.TempDir() whose log goes to the test log.
// At cleanup it writes diagnostics for every bridge into the test log if the
// test failed, then closes the lab and reports teardown errors as failures.
func ForTest(t TB) *Lab {
	t.Helper()
	l, err := New(t.TempDir(), &tbWriter{t: t})
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			l.mu.Lock()
			bridges := append([]*Bridge(nil), l.bridges...)
			l.mu.Unlock()
			var buf bytes.Buffer
			if len(bridges) == 0 {
				l.SaveDiagnostics(nil, &buf)
			}
			for _, b := range bridges {
				l.SaveDiagnostics(b, &buf)
			}
			t.Logf("lab %s diagnostics:\n%s", l.Prefix, buf.String())
		}
		if err := l.Close(); err != nil {
			t.Errorf("lab %s close: %v", l.Prefix, err)
		}
	})
	return l
}

// tbWriter turns the lab's slog lines into t.Logf calls.
type tbWriter struct {
	mu  sync.Mutex
	t   TB
	buf []byte
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Logf("%s", strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
}
