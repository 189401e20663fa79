package ofswitch

import (
	"flowweight/internal/testutil"
	"net"
	"net/netip"
	"testing"
)

// dialFrom opens a TCP connection to srv from the loopback address src (all of 127.0.0.0/8
// is local on Linux), so a test can play several hosts.
func dialFrom(t *testing.T, src string, srv *Server) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestHandshakesBudgetedPerSource: one host holding idle connections cannot take every
// handshake slot. Before the fix, 16 idle connections from 127.0.0.2 filled MaxHandshakes
// (16) and a switch from 127.0.0.3 was closed at accept; now 127.0.0.2 holds its share
// (MaxHandshakes/8 by default) and the switch connects.
func TestHandshakesBudgetedPerSource(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{MaxHandshakes: 16}, h)
	const idle = 16
	for range idle {
		dialFrom(t, "127.0.0.2", srv)
	}
	perSource := 16 / 8
	testutil.Until(t, guard, func() bool {
		srv.mu.Lock()
		held := len(srv.shaking)
		srv.mu.Unlock()
		return held+int(srv.Stats().Faults[FaultTooManyHandshakes]) == idle
	}, "the idle connections held or refused")
	srv.mu.Lock()
	held := len(srv.shaking)
	srv.mu.Unlock()
	if held != perSource {
		t.Errorf("one source holds %d handshake slots, want its share %d", held, perSource)
	}
	f := newFake(t, 0x600)
	f.dial = func(net.Addr) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
		return d.Dial("tcp", srv.Addr().String())
	}
	f.connect(srv.Addr())
	if ev := h.wait(t, "connected"); ev.sw.DatapathID() != 0x600 {
		t.Fatalf("connected %v, want the switch from another address", ev.sw)
	}
}

func TestSourceKey(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 40000}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7"},
		// One IPv6 host owns a /64: its addresses are one source.
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1"), Port: 1}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:bbbb::9"), Port: 2}, "2001:db8:1:2::/64"},
		{&net.UnixAddr{Name: "@", Net: "unix"}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := sourceKey(tt.addr); got != tt.want {
			t.Errorf("sourceKey(%v) = %q, want %q", tt.addr, got, tt.want)
		}
	}
	_ = netip.Addr{}
}
