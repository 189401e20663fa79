package testutil

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test, so Eventually's failure can be checked.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = strings.TrimSpace(fmt.Sprintf(format, args...))
}

func TestEventually(t *testing.T) {
	n := 0
	got := Eventually(t, 5*time.Second, func() (int, bool) { n++; return n, n == 3 }, "count to three")
	if got != 3 {
		t.Fatalf("returned %d, want 3", got)
	}
	f := &fakeT{TB: t}
	Eventually(f, 5*time.Millisecond, func() (string, bool) { return "still closed", false }, "door %s", "open")
	if !strings.Contains(f.failed, "door open") || !strings.Contains(f.failed, "still closed") {
		t.Fatalf("failure %q: want the message and the last observed value", f.failed)
	}
	f = &fakeT{TB: t}
	Until(f, 5*time.Millisecond, func() bool { return false }, "never")
	if !strings.Contains(f.failed, "never") {
		t.Fatalf("failure %q: want the message", f.failed)
	}
}

func TestClock(t *testing.T) {
	c := NewClock(Start)
	a, b := c.After(time.Second), c.After(3*time.Second)
	if d := c.WaitTimer(t, time.Second); d != time.Second {
		t.Fatalf("first timer %v", d)
	}
	c.Advance(time.Second)
	select {
	case at := <-a:
		if !at.Equal(Start.Add(time.Second)) {
			t.Fatalf("fired at %v", at)
		}
	default:
		t.Fatal("a due timer did not fire")
	}
	select {
	case <-b:
		t.Fatal("a timer fired early")
	default:
	}
	// Concurrent readers and advancers (go test -race checks).
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				c.Now()
				c.Advance(time.Millisecond)
			}
		})
	}
	wg.Wait()
	if got := c.Now().Sub(Start); got != time.Second+400*time.Millisecond {
		t.Fatalf("advanced by %v", got)
	}
	c.Advance(2 * time.Second)
	select {
	case <-b:
	default:
		t.Fatal("the second timer did not fire when due")
	}
}

func TestFixtureEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.toml")
	if err := os.WriteFile(path, []byte("a = 1\nb = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Edit(Fixture(path), "a = 1", "a = 3", "b = 2", "b = 4\nc = 5"); got != "a = 3\nb = 4\nc = 5\n" {
		t.Fatalf("edited %q", got)
	}
	for name, f := range map[string]func(){
		"missing file": func() { Fixture(filepath.Join(t.TempDir(), "none.toml")) },
		"edit misses":  func() { Edit("a = 1\n", "b = 2", "b = 3") },
		"odd pairs":    func() { Edit("a = 1\n", "a = 1") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestResponders: the TCP server serves each connection and closes it; the UDP responder
// answers what reply returns and nothing when it returns nil.
func TestResponders(t *testing.T) {
	c, err := net.Dial("tcp4", TCPServer(t, func(c net.Conn) { c.Write([]byte("hello")) }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := io.ReadAll(c); string(got) != "hello" || err != nil {
		t.Fatalf("tcp: read %q, %v; want hello and the close", got, err)
	}
	u, err := net.Dial("udp4", UDPResponder(t, func(b []byte) []byte {
		if string(b) == "quiet" {
			return nil
		}
		return append([]byte("re:"), b...)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	buf := make([]byte, 64)
	u.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := u.Write([]byte("quiet")); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	// quiet gets no answer, so the one that comes is ping's.
	if n, err := u.Read(buf); string(buf[:n]) != "re:ping" || err != nil {
		t.Fatalf("udp: read %q, %v; want re:ping", buf[:n], err)
	}
}
