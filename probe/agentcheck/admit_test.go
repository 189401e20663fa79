package agentcheck

import (
	"flowweight/internal/testutil"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// holdFrom connects from the loopback address from, reads the reply and keeps the connection
// open until the test ends. It returns the reply ("" when the server closed at once).
func holdFrom(t *testing.T, from, addr string) string {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(c, buf, len("up ready 50%\n"))
	if err != nil && n == 0 {
		return ""
	}
	return string(buf[:n])
}

// One source cannot hold every slot, and a checker always finds one: a client holding 16
// connections from one address once left HAProxy's check with an empty reply.
func TestServerSourceBudgetAndReservedSlots(t *testing.T) {
	const reply = "up ready 50%\n"
	srv := &Server{Timeout: time.Minute, IdleTimeout: time.Minute, Checkers: []netip.Prefix{netip.MustParsePrefix("127.0.0.200/32")}}
	srv.Set(Status{Healthy: true, Percent: 50})
	addr := start(t, srv)

	// One source opens all 16 slots' worth: only its budget is served.
	served := 0
	for range DefaultMaxConns {
		if holdFrom(t, "127.0.0.1", addr) == reply {
			served++
		}
	}
	if served != DefaultMaxPerSource {
		t.Fatalf("one source got %d replies, want its budget of %d", served, DefaultMaxPerSource)
	}
	if got := holdFrom(t, "127.0.0.2", addr); got != reply {
		t.Fatalf("another source got %q while the first held its budget, want %q", got, reply)
	}
	// Many sources fill every slot but the reserved ones...
	for i := 3; ; i++ {
		from := netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}).String()
		n := 0
		for range DefaultMaxPerSource {
			if holdFrom(t, from, addr) == reply {
				n++
			}
		}
		if n < DefaultMaxPerSource {
			break
		}
		if i > 20 {
			t.Fatal("the slots never filled")
		}
	}
	if got := holdFrom(t, "127.0.0.100", addr); got != "" {
		t.Fatalf("a new source got %q with only the reserved slots free, want no reply", got)
	}
	// ...which the checker gets, more than one source's budget of them.
	for i := range DefaultReserved {
		if got := holdFrom(t, "127.0.0.200", addr); got != reply {
			t.Fatalf("checker connection %d got %q, want %q", i, got, reply)
		}
	}
	if got := holdFrom(t, "127.0.0.200", addr); got != "" {
		t.Fatalf("a checker past MaxConns got %q, want no reply", got)
	}
	if srv.Stats.SourceLimited.Load() == 0 || srv.Stats.ReservedFull.Load() == 0 {
		t.Errorf("stats %d source-limited, %d reserved-full; want both counted", srv.Stats.SourceLimited.Load(), srv.Stats.ReservedFull.Load())
	}
}

// Without checkers configured, the per-source budget alone keeps a slot for HAProxy against
// one client.
func TestServerSourceBudgetWithoutCheckers(t *testing.T) {
	srv := &Server{Timeout: time.Minute, IdleTimeout: time.Minute}
	srv.Set(Status{Healthy: true, Percent: 50})
	addr := start(t, srv)
	for range DefaultMaxConns + 4 {
		holdFrom(t, "127.0.0.1", addr)
	}
	if got := holdFrom(t, "127.0.0.2", addr); got != "up ready 50%\n" {
		t.Fatalf("HAProxy's address got %q", got)
	}
}

// A peer that neither sends nor closes after the reply loses its connection after
// IdleTimeout, not Timeout, and its slot is free again.
func TestServerClosesIdleConnections(t *testing.T) {
	srv := &Server{MaxConns: 1, Timeout: time.Minute, IdleTimeout: 50 * time.Millisecond}
	srv.Set(Status{Healthy: true, Percent: 3})
	addr := start(t, srv)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c) // returns when the server closes
	if err != nil || string(b) != "up ready 3%\n" {
		t.Fatalf("got %q, %v; want the reply, then the server's close well before Timeout", b, err)
	}
	testutil.Eventually(t, 5*time.Second, func() (string, bool) { got := ask(t, addr, ""); return got, got == "up ready 3%\n" },
		"the idle connection's slot was never freed")
}

func TestSourceKey(t *testing.T) {
	a := sourceKey(netip.MustParseAddr("2001:db8:1:2:aaaa::1"))
	b := sourceKey(netip.MustParseAddr("2001:db8:1:2:bbbb::9"))
	c := sourceKey(netip.MustParseAddr("2001:db8:1:3::1"))
	if a != b || a == c {
		t.Errorf("keys %v %v %v: want one per /64", a, b, c)
	}
	if k := sourceKey(netip.MustParseAddr("10.1.2.3")); k.String() != "10.1.2.3" {
		t.Errorf("IPv4 key %v", k)
	}
}
