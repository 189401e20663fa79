package push

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
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

// TestKernelDropListSparesBackendAddress is the review's finding through a
// real socket: after a controller restart (no report of the probe accepted
// yet), 150 datagrams forged from the probe's configured address put it on
// the kernel drop list, and the probe's next 20 signed reports never
// reached the read loop. Its configured address is never listed.
func TestKernelDropListSparesBackendAddress(t *testing.T) {
	sink := newStreamSink(nil, 20)
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch }, Readers: 1}, sink)
	if err != nil {
		t.Fatal(err)
	}
	probe := netip.MustParseAddr("127.0.0.5")
	s.SetBackendAddrs(map[string][]netip.Addr{"a": {probe}})
	defer serve(t, s)()
	dial := func() *net.UDPConn {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(probe, 0)), s.Addr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	forger, genuine := dial(), dial()
	for i := range 150 {
		if _, err := forger.Write(forgedFor(t, "a", uint64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	// The socket is a FIFO with one reader: once a marker from the forger is
	// handled, the forged datagrams were too.
	testutil.Until(t, 5*time.Second, func() bool {
		_, _ = forger.Write(make([]byte, 10)) // truncated: counted, and charged like the rest
		return s.Rejected()[report.ReasonTruncated] > 0
	}, "condition")
	for seq := uint64(1); seq <= 20; seq++ {
		if _, err := genuine.Write(mkDatagram(t, "a", seq, testEpoch, keyA)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-sink.done:
	case <-time.After(5 * time.Second):
		drops, _ := s.KernelDrops()
		t.Fatalf("%d of the probe's 20 reports accepted within 5 s (kernel drops %d, listed %d, rejected %v)",
			sink.n.Load(), drops, s.kernelListed.Load(), s.Rejected())
	}
	if n := s.kernelListed.Load(); n != 0 {
		t.Errorf("kernel drop list holds %d sources, want none: the only sender is the probe's address", n)
	}
}
