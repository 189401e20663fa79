package push

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestKernelDropList checks the socket filter on a real loopback socket: a
// listed source's datagrams never reach the read loop, others do.
func TestKernelDropList(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", ":0"} { // IPv4, and dual-stack with IPv4-mapped sources
		t.Run(listen, func(t *testing.T) { testKernelDropList(t, listen) })
	}
}

func testKernelDropList(t *testing.T, listen string) {
	s, err := New(Config{Listen: listen, KeyFor: keyFor, Readers: 1}, &nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	port := s.Addr().(*net.UDPAddr).Port
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)))
	if err := setDropList(s.conns[0], []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("2001:db8::1")}); err != nil {
		t.Fatal(err)
	}
	before, ok := s.KernelDrops()
	if !ok {
		t.Fatal("KernelDrops: the kernel did not say")
	}
	send := func(local string) {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(local)), dst)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	send("127.0.0.2:0") // dropped
	send("127.0.0.1:0") // arrives
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { s.conns[0].SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 16)
	_, from, err := s.conns[0].ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := from.Addr().Unmap(); got != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("first datagram read came from %s, want 127.0.0.1 (127.0.0.2 is listed)", got)
	}
	waitDrops(t, s, before+1)
	if err := setDropList(s.conns[0], nil); err != nil {
		t.Errorf("detaching the filter: %v", err)
	}
}

// TestKernelDropListIPv6: a listed IPv6 /64 is dropped; another passes.
func TestKernelDropListIPv6(t *testing.T) {
	s, err := New(Config{Listen: "[::1]:0", KeyFor: keyFor, Readers: 1}, &nopSink{})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer s.Close()
	c, err := net.DialUDP("udp", nil, s.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 16)
	for _, tt := range []struct {
		name   string
		list   []netip.Addr
		arrive bool
	}{
		{"another /64 listed", []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("127.0.0.1")}, true},
		{"the sender's /64 listed", []netip.Addr{netip.MustParseAddr("::2")}, false}, // ::1 and ::2 share ::/64
	} {
		if err := setDropList(s.conns[0], tt.list); err != nil {
			t.Fatal(err)
		}
		before, _ := s.KernelDrops()
		if _, err := c.Write([]byte(tt.name)); err != nil {
			t.Fatal(err)
		}
		if tt.arrive {
			s.conns[0].SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := s.conns[0].ReadFromUDPAddrPort(buf)
			if err != nil || string(buf[:n]) != tt.name[:min(n, len(tt.name))] {
				t.Fatalf("%s: read %q, %v", tt.name, buf[:n], err)
			}
			continue
		}
		waitDrops(t, s, before+1)
	}
}
