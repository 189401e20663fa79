package agentcheck

import (
	"context"
	"errors"
	"flowweight/internal/testutil"
	"io"
	"net"
	"testing"
	"time"
)

// start runs srv on a loopback port until the test ends.
func start(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	})
	return ln.Addr().String()
}

// ask connects, sends send (as HAProxy's agent-send would), and reads until the server
// closes.
func ask(t *testing.T, addr, send string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if send != "" {
		if _, err := io.WriteString(c, send); err != nil {
			t.Fatal(err)
		}
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	return string(b)
}

func TestServerReplies(t *testing.T) {
	srv := &Server{}
	addr := start(t, srv)
	tests := []struct {
		name string
		set  *Status // nil: nothing set yet
		send string
		want string
	}{
		{"before the first report: closed without reply", nil, "", ""},
		{"healthy", &Status{Healthy: true, Percent: 42}, "", "up ready 42%\n"},
		{"agent-send input is ignored", &Status{Healthy: true, Percent: 42}, "backend/web1\n", "up ready 42%\n"},
		{"large input is ignored", &Status{Healthy: true, Percent: 7}, string(make([]byte, 16<<10)), "up ready 7%\n"},
		{"latest set wins", &Status{Healthy: true, Drained: true}, "", "up drain\n"},
		{"down", &Status{Reason: "status 503"}, "", "down ready #status 503\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.set != nil {
				srv.Set(*tt.set)
			}
			if got := ask(t, addr, tt.send); got != tt.want {
				t.Errorf("reply %q, want %q", got, tt.want)
			}
		})
	}
	if got, want := srv.Stats.NoState.Load(), uint64(1); got != want {
		t.Errorf("NoState = %d, want %d", got, want)
	}
	if got, want := srv.Stats.Served.Load(), uint64(len(tests)-1); got != want {
		t.Errorf("Served = %d, want %d", got, want)
	}
	if s, ok := srv.Status(); !ok || s.Reason != "status 503" {
		t.Errorf("Status() = %+v, %v", s, ok)
	}
}

// A client that never closes holds one of MaxConns slots; a connection beyond the bound is
// closed without a reply instead of queueing, and the slot is reused once freed.
func TestServerBoundsConnections(t *testing.T) {
	srv := &Server{MaxConns: 1, Timeout: time.Minute, IdleTimeout: time.Minute}
	srv.Set(Status{Healthy: true, Percent: 50})
	addr := start(t, srv)

	hold, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hold.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := hold.Read(buf)
	if err != nil || string(buf[:n]) != "up ready 50%\n" {
		t.Fatalf("holding connection got %q, %v", buf[:n], err)
	}
	if got := ask(t, addr, ""); got != "" {
		t.Errorf("connection over the bound got %q, want no reply", got)
	}
	if got := srv.Stats.Rejected.Load(); got != 1 {
		t.Errorf("Rejected = %d, want 1", got)
	}
	hold.Close()
	// The held slot is freed when the server reads the close; retry until then (bounded).
	testutil.Eventually(t, 5*time.Second, func() (string, bool) { got := ask(t, addr, ""); return got, got == "up ready 50%\n" },
		"slot never freed after the holding client closed")
}

// The per-connection timeout ends a client that neither reads nor closes.
func TestServerTimeout(t *testing.T) {
	srv := &Server{MaxConns: 1, Timeout: 50 * time.Millisecond}
	srv.Set(Status{Healthy: true, Percent: 1})
	addr := start(t, srv)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c) // returns when the server closes after its timeout
	if err != nil || string(b) != "up ready 1%\n" {
		t.Errorf("got %q, %v", b, err)
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	err = (&Server{}).Serve(context.Background(), ln)
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve on a closed listener = %v, want net.ErrClosed", err)
	}
}
