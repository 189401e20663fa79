package push

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// seqSink records each backend's sequence numbers in the order accepted.
type seqSink struct {
	mu   sync.Mutex
	seqs map[string][]uint64
	n    int
	all  chan struct{}
	want int
}

func (s *seqSink) Accept(r *report.Report, _ netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs[r.BackendID] = append(s.seqs[r.BackendID], r.Seq)
	if s.n++; s.n == s.want {
		close(s.all)
	}
}

// TestReadersSpread: the kernel spreads client sockets over the readers'
// sockets, and each client's datagrams stay with one reader, so a probe's
// reports arrive complete and in order.
func TestReadersSpread(t *testing.T) {
	const clients, each, readers = 32, 50, 4
	keys := map[string][]byte{}
	for i := range clients {
		keys[fmt.Sprintf("spread-%02d", i)] = []byte(fmt.Sprintf("key-of-spread-backend-%02d-0123456789", i))
	}
	sink := &seqSink{seqs: map[string][]uint64{}, all: make(chan struct{}), want: clients * each}
	s, err := New(Config{Listen: "127.0.0.1:0", Readers: readers, Now: func() time.Time { return testEpoch },
		KeyFor: func(id string) ([]byte, bool) { k, ok := keys[id]; return k, ok }}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer serve(t, s)()
	var wg sync.WaitGroup
	for i := range clients {
		id := fmt.Sprintf("spread-%02d", i)
		c, err := net.DialUDP("udp", nil, s.Addr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(1); seq <= each; seq++ {
				if _, err := c.Write(mkDatagram(t, id, seq, testEpoch, keys[id])); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-sink.all:
	case <-time.After(10 * time.Second):
		drops, _ := s.KernelDrops()
		t.Fatalf("accepted %d of %d within 10 s (rejected %v, kernel drops %d)", s.Accepted(), clients*each, s.Rejected(), drops)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for id, seqs := range sink.seqs {
		for i, seq := range seqs {
			if seq != uint64(i+1) {
				t.Fatalf("%s: accepted seqs %v, want 1..%d in order", id, seqs, each)
			}
		}
	}
	busy := 0
	for _, r := range s.readers {
		if r.accepted.Load() > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Errorf("%d of %d readers accepted reports from %d client sockets, want the kernel to spread them", busy, readers, clients)
	}
}

// TestKernelDropListAllSockets: a listed source is dropped on every
// reader's socket, whichever its datagrams are spread to, and KernelDrops
// counts them all.
func TestKernelDropListAllSockets(t *testing.T) {
	sink := make(chanSink, 64)
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Readers: 3, Now: func() time.Time { return testEpoch }}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer serve(t, s)()
	s.dropSource(netip.MustParseAddr("127.0.0.2"), testEpoch)
	if s.kernelListed.Load() != 1 {
		t.Fatalf("kernel drop list holds %d sources, want 1", s.kernelListed.Load())
	}
	before, ok := s.KernelDrops()
	if !ok {
		t.Fatal("KernelDrops: the kernel did not say")
	}
	const clients = 24
	send := func(local string, seq uint64) {
		t.Helper()
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(local)), s.Addr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(mkDatagram(t, "a", seq, testEpoch, keyA)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range clients {
		send("127.0.0.1:0", uint64(i+1)) // accepted, on whichever socket
	}
	for range clients {
		recv(t, sink)
	}
	for i := range clients {
		send("127.0.0.2:0", uint64(100+i)) // dropped, on whichever socket
	}
	waitDrops(t, s, before+clients)
	// A reader counts a report just after handing it to the sink, so the last count can
	// trail the sink by a moment (seen once in CI, 23 of 24): wait for the count; with every
	// 127.0.0.2 datagram already dropped in the kernel, it can only reach 24, not pass it.
	testutil.Eventually(t, 5*time.Second, func() (uint64, bool) { n := s.Accepted(); return n, n >= clients },
		"accepted, want the %d from 127.0.0.1 only", clients)
	if n := s.Accepted(); n != clients {
		t.Errorf("accepted %d, want the %d from 127.0.0.1 only", n, clients)
	}
}

// TestBatchFrom decodes the source addresses recvmmsg returns.
func TestBatchFrom(t *testing.T) {
	lo, err := net.InterfaceByIndex(1)
	zone := "1"
	if err == nil {
		zone = lo.Name
	}
	v4 := func(a [4]byte, port uint16) unix.RawSockaddrInet6 {
		var sa unix.RawSockaddrInet6
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sa))
		sa4.Family, sa4.Addr = unix.AF_INET, a
		p := (*[2]byte)(unsafe.Pointer(&sa4.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		return sa
	}
	v6 := func(a string, port uint16, scope uint32) unix.RawSockaddrInet6 {
		sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: netip.MustParseAddr(a).As16(), Scope_id: scope}
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		return sa
	}
	tests := []struct {
		name string
		sa   unix.RawSockaddrInet6
		want string // "" = not an IP source
	}{
		{"ipv4", v4([4]byte{127, 0, 0, 1}, 4000), "127.0.0.1:4000"},
		{"ipv4 high port", v4([4]byte{192, 0, 2, 7}, 65535), "192.0.2.7:65535"},
		{"ipv6", v6("2001:db8::1", 9750, 0), "[2001:db8::1]:9750"},
		{"ipv4-mapped", v6("::ffff:10.0.0.1", 1234, 0), "10.0.0.1:1234"},
		{"link-local", v6("fe80::1", 80, 1), "[fe80::1%" + zone + "]:80"},
		{"not ip", unix.RawSockaddrInet6{Family: unix.AF_UNIX}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := batch{names: []unix.RawSockaddrInet6{tt.sa}}
			got, ok := b.from(0)
			if tt.want == "" {
				if ok {
					t.Errorf("from = %s, want no address", got)
				}
				return
			}
			if !ok || got.String() != tt.want {
				t.Errorf("from = %s (%v), want %s", got, ok, tt.want)
			}
		})
	}
}
