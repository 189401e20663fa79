package ofswitch

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"testing"
	"time"

	"flowweight/internal/testutil"
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

// shakesFrom opens n idle connections from src and waits until the server has admitted or
// refused each of them (an admission that takes another source's slot counts a fault too);
// it returns how many handshakes each source holds then.
func shakesFrom(t *testing.T, srv *Server, src string, n int) map[string]int {
	t.Helper()
	refused0 := srv.Stats().Faults[FaultTooManyHandshakes]
	srv.mu.Lock()
	held0 := len(srv.shaking)
	srv.mu.Unlock()
	for range n {
		dialFrom(t, src, srv)
	}
	testutil.Until(t, guard, func() bool {
		srv.mu.Lock()
		held := len(srv.shaking)
		srv.mu.Unlock()
		return held-held0+int(srv.Stats().Faults[FaultTooManyHandshakes]-refused0) == n
	}, "the idle connections from %s held or refused", src)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return maps.Clone(srv.shakeSrc)
}

// TestHandshakesBudgetedPerSource: one host holding idle connections cannot keep other
// hosts' switches out. Before the fix, 16 idle connections from 127.0.0.2 filled
// MaxHandshakes (16) and a switch from 127.0.0.3 was closed at accept; now a source under its
// share (MaxHandshakes/8 by default) takes the slot of 127.0.0.2's oldest handshake, and the
// switch connects.
func TestHandshakesBudgetedPerSource(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{MaxHandshakes: 16}, h)
	if got := shakesFrom(t, srv, "127.0.0.2", 16); got["127.0.0.2"] != 16 {
		t.Fatalf("one source alone holds %v, want all 16 slots", got)
	}
	// Another source takes its share from the one over it, and no more.
	if got := shakesFrom(t, srv, "127.0.0.4", 4); got["127.0.0.4"] != 16/8 || got["127.0.0.2"] != 16-16/8 {
		t.Errorf("after a second source's 4 connections the table holds %v, want it at its share %d and the first at the rest", got, 16/8)
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

// TestOneSourceConnectsManyAtOnce: one ovs-vswitchd connects all its bridges at once from
// one address. Before the fix a source was capped at its share (here 2 of 16) even with the
// table empty, and the fleet benchmark's 100 bridges took 55-79 s to connect instead of about
// a second: the refused ones wait in Open vSwitch's reconnect backoff. Once the table is
// full, the same source gets no more: it cannot take its own slots.
func TestOneSourceConnectsManyAtOnce(t *testing.T) {
	srv, _ := testServer(t, Config{MaxHandshakes: 16}, newRecHandler())
	if got := shakesFrom(t, srv, "127.0.0.2", 16); got["127.0.0.2"] != 16 {
		t.Errorf("one source with the table free holds %v, want all 16", got)
	}
	if got := srv.Stats().Faults[FaultTooManyHandshakes]; got != 0 {
		t.Errorf("%d connections refused while the table had room, want 0", got)
	}
	if got := shakesFrom(t, srv, "127.0.0.2", 1); got["127.0.0.2"] != 16 {
		t.Errorf("the table full, one more from the same source: %v, want it refused", got)
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

// TestManySourcesAtTheirShareDoNotHoldTheTable: eight sources holding their share each (2 of
// 16) fill the table with no source over its share. Before the fix, a switch from a ninth
// address was closed at accept for as long as they kept it up (the review found it); now, once
// the oldest of them has idled past staleHandshake, a newcomer takes its slot.
func TestManySourcesAtTheirShareDoNotHoldTheTable(t *testing.T) {
	h := newRecHandler()
	srv, clk := testServer(t, Config{MaxHandshakes: 16}, h)
	for i := range 8 {
		src := fmt.Sprintf("127.0.0.%d", 10+i)
		if got := shakesFrom(t, srv, src, 2); got[src] != 2 {
			t.Fatalf("%s holds %v, want its share of 2", src, got)
		}
	}
	// At once, the ninth source finds no slot: nobody is over its share, nothing has idled.
	if got := shakesFrom(t, srv, "127.0.0.3", 1); got["127.0.0.3"] != 0 {
		t.Fatalf("a ninth source admitted into a full table of fresh handshakes: %v", got)
	}
	clk.Advance(staleHandshake + time.Millisecond)
	f := newFake(t, 0x700)
	f.dial = func(net.Addr) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
		return d.Dial("tcp", srv.Addr().String())
	}
	f.connect(srv.Addr())
	if ev := h.wait(t, "connected"); ev.sw.DatapathID() != 0x700 {
		t.Fatalf("connected %v, want the switch from the ninth address", ev.sw)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if n := srv.shakeSrc["127.0.0.10"]; n != 1 {
		t.Errorf("the first source holds %d handshakes, want 1: its oldest, idle past %v, made room", n, staleHandshake)
	}
}
