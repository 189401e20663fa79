package push

import (
	"net/netip"
	"testing"
	"time"

	"flowweight/internal/report"
)

// datagramFrom seals a report of backend id with the given boot.
func datagramFrom(t testing.TB, id string, nonce, seq uint64, at time.Time, key []byte) []byte {
	t.Helper()
	r := mkReport(id, seq, at)
	r.BootNonce = nonce
	b, err := r.AppendSeal(nil, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// forgedFor is a well-formed datagram for backend id whose tag does not
// verify, from a boot the probe never had.
func forgedFor(t testing.TB, id string, seq uint64) []byte {
	d := datagramFrom(t, id, 0xbad, seq, testEpoch, keyA)
	d[len(d)-1] ^= 1
	return d
}

// listedNets reports whether the kernel list holds a, or (IPv6) an address
// of a's /64, which the filter would drop a with.
func listedNets(s *Server, a netip.Addr) bool {
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	for _, e := range s.drops.entries {
		if e.addr == a || (a.Is6() && e.addr.Is6() && net64(e.addr) == net64(a)) {
			return true
		}
	}
	return false
}

// TestOwnAddressAfterRestart is the review's finding: after a controller
// restart no report of probe a has been accepted yet, and 150 datagrams
// forged from its configured address must neither shed its next 20 signed
// reports nor put the address on the kernel drop list.
func TestOwnAddressAfterRestart(t *testing.T) {
	for _, probe := range []string{"127.0.0.5", "2001:db8:1:2::10"} {
		t.Run(probe, func(t *testing.T) {
			sink := &nopSink{}
			s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch }}, sink)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			addr := netip.MustParseAddr(probe)
			s.SetBackendAddrs(map[string][]netip.Addr{"a": {addr}, "b": {netip.MustParseAddr("127.0.0.6")}})
			from := netip.AddrPortFrom(addr, 4000)
			for i := range 150 {
				s.handle(forgedFor(t, "a", uint64(i+1)), netip.AddrPortFrom(addr, uint16(5000+i)))
			}
			for seq := uint64(1); seq <= 20; seq++ {
				s.handle(mkDatagram(t, "a", seq, testEpoch, keyA), from)
			}
			if sink.n != 20 {
				t.Errorf("%d of the probe's 20 reports accepted after 150 forged from its address (rejected %v)", sink.n, s.Rejected())
			}
			if listedNets(s, addr) {
				t.Errorf("the kernel drop list holds the probe's address")
			}
		})
	}
}

// TestOwnAddressBoundedVerification: a flood forged from a backend's own
// address costs an HMAC each only within the address's failure budget;
// past it only datagrams of the probe's live boot are verified, so the
// probe keeps flowing and the flood is shed unread. A probe's new boot
// waits for the budget to refill; the live boot restored from replay marks
// counts as known after a restart.
func TestOwnAddressBoundedVerification(t *testing.T) {
	now := testEpoch
	addr := netip.MustParseAddr("127.0.0.5")
	from := netip.AddrPortFrom(addr, 4000)
	newServer := func() (*Server, *nopSink) {
		sink := &nopSink{}
		s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return now },
			BackendFailRate: 10, BackendFailBurst: 20}, sink)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.SetBackendAddrs(map[string][]netip.Addr{"a": {addr}})
		return s, sink
	}
	s, sink := newServer()
	rej := func(s *Server, r report.Reason) uint64 { return s.Rejected()[r] }
	const boot = 0x1234
	seq := uint64(1)
	s.handle(datagramFrom(t, "a", boot, seq, now, keyA), from)
	for round := range 10 {
		for i := range 100 {
			s.handle(forgedFor(t, "a", uint64(round*100+i+1)), from)
		}
		seq++
		before := sink.n
		s.handle(datagramFrom(t, "a", boot, seq, now, keyA), from)
		if sink.n != before+1 {
			t.Fatalf("round %d: the probe's report was not accepted under the flood (rejected %v)", round, s.Rejected())
		}
	}
	if got := rej(s, report.ReasonBadMAC); got != 20 {
		t.Errorf("%d forged datagrams verified, want the budget of 20", got)
	}
	if got := rej(s, ReasonShed); got != 980 {
		t.Errorf("%d forged datagrams shed, want 980", got)
	}
	// A replay of an accepted report carries the live boot but not a seq above it: shed unread.
	bad := rej(s, report.ReasonBadMAC)
	s.handle(datagramFrom(t, "a", boot, seq, now, keyA), from)
	if rej(s, report.ReasonReplay) != 0 || rej(s, report.ReasonBadMAC) != bad {
		t.Errorf("a replay was verified past the budget: %v", s.Rejected())
	}
	// The probe restarted: its new boot waits for the budget.
	s.handle(datagramFrom(t, "a", boot+1, 1, now, keyA), from)
	if sink.n != 11 {
		t.Fatalf("a new boot was verified with the budget spent (accepted %d)", sink.n)
	}
	now = now.Add(time.Second) // refills 10
	s.handle(datagramFrom(t, "a", boot+1, 2, now, keyA), from)
	if sink.n != 12 {
		t.Errorf("the probe's new boot was not accepted once the budget refilled (rejected %v)", s.Rejected())
	}

	// After a restart with the replay marks restored, the probe's boot is known at once.
	marks := s.ReplayMarks()
	r, rsink := newServer()
	if err := r.RestoreReplayMarks(marks); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		r.handle(forgedFor(t, "a", uint64(i+1)), from)
	}
	r.handle(datagramFrom(t, "a", boot+1, 3, now, keyA), from)
	if rsink.n != 1 || rej(r, report.ReasonBadMAC) != 20 {
		t.Errorf("restarted server: accepted %d, verified %d forged; want 1 and 20 (rejected %v)", rsink.n, rej(r, report.ReasonBadMAC), r.Rejected())
	}
}

// TestNeighbourCannotShedProbe: a host in the probe's IPv6 /64 (or behind
// its IPv4 address for other backends) sending bad datagrams from rotating
// addresses exhausts the /64's budget and is shed, but neither sheds the
// probe's reports from its configured address nor gets the /64 on the
// kernel drop list, with or without an accepted report before.
func TestNeighbourCannotShedProbe(t *testing.T) {
	probe := netip.MustParseAddr("2001:db8:1:2::10")
	for _, tt := range []struct {
		name  string
		first bool // a report of the probe was accepted before the flood
		bad   func(i int) []byte
	}{
		{"after a restart, forged for the probe's backend", false, func(i int) []byte { return forgedFor(t, "a", uint64(i+1)) }},
		{"running, forged for the probe's backend", true, func(i int) []byte { return forgedFor(t, "a", uint64(i+1)) }},
		{"running, junk", true, func(int) []byte { return make([]byte, 200) }},
		{"after a restart, unknown backend", false, func(i int) []byte { return datagramFrom(t, "zz", 1, uint64(i+1), testEpoch, keyA) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := &nopSink{}
			s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch }}, sink)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.SetBackendAddrs(map[string][]netip.Addr{"a": {probe}})
			from := netip.AddrPortFrom(probe, 4000)
			seq := uint64(0)
			if tt.first {
				seq++
				s.handle(mkDatagram(t, "a", seq, testEpoch, keyA), from)
			}
			accepted := sink.n
			for round := range 20 {
				for i := range 100 {
					n := round*100 + i
					nb := probe.As16()
					nb[12], nb[13], nb[14], nb[15] = 0xee, byte(n>>16), byte(n>>8), byte(n)
					s.handle(tt.bad(n), netip.AddrPortFrom(netip.AddrFrom16(nb), 4000))
				}
				seq++
				s.handle(mkDatagram(t, "a", seq, testEpoch, keyA), from)
			}
			if got := sink.n - accepted; got != 20 {
				t.Errorf("%d of the probe's 20 reports accepted under its neighbour's flood (rejected %v)", got, s.Rejected())
			}
			if s.limit.allow(netip.MustParseAddr("2001:db8:1:2::ee:1"), testEpoch.UnixNano()) {
				t.Error("the neighbour's /64 still has budget: the per-source budget no longer holds")
			}
			if listedNets(s, probe) {
				t.Error("the kernel drop list holds the probe's /64")
			}
		})
	}
}

// TestSetBackendAddrsUnlists: a source on the kernel list that a reload
// makes a backend's address is taken off at once.
func TestSetBackendAddrsUnlists(t *testing.T) {
	if !kernelSupported {
		t.Skip("no kernel drop list here")
	}
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch }, SourceFailBurst: 5}, &nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := netip.MustParseAddrPort("127.0.0.9:4000")
	for range 10 {
		s.handle(forgedFor(t, "b", 1), src)
	}
	if s.kernelListed.Load() != 1 {
		t.Fatalf("kernel drop list holds %d sources, want the flooder", s.kernelListed.Load())
	}
	s.SetBackendAddrs(map[string][]netip.Addr{"b": {netip.MustParseAddr("::ffff:127.0.0.9")}}) // mapped: counts as IPv4
	if s.kernelListed.Load() != 0 || listedNets(s, src.Addr()) {
		t.Errorf("kernel drop list holds %d sources after the address became backend b's, want 0", s.kernelListed.Load())
	}
	for range 10 {
		s.handle(forgedFor(t, "a", 1), src)
	}
	if s.kernelListed.Load() != 0 {
		t.Errorf("a backend's address was listed again by datagrams for another backend")
	}
}

// TestEpochOf ties the offsets the server reads before verifying to the
// encoder's, in both versions.
func TestEpochOf(t *testing.T) {
	for _, v := range []byte{report.Version1, report.Version2} {
		r := mkReport("a", 0x0102030405060708, testEpoch)
		r.BootNonce, r.Version = 0xa1b2c3d4e5f60718, v
		if v == report.Version1 {
			r.Signals = 0
		}
		b, err := r.AppendSeal(nil, keyA)
		if err != nil {
			t.Fatal(err)
		}
		if n, seq := epochOf(b); n != r.BootNonce || seq != r.Seq {
			t.Errorf("version %d: epochOf = %x, %x; want %x, %x", v, n, seq, r.BootNonce, r.Seq)
		}
	}
}

// TestProtected: a backend's configured or last good address, and any
// address in the /64 of an IPv6 one, is never listed; others are.
func TestProtected(t *testing.T) {
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch }}, &nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetBackendAddrs(map[string][]netip.Addr{"a": {netip.MustParseAddr("2001:db8:1:2::10"), netip.MustParseAddr("192.0.2.1")}})
	s.handle(mkDatagram(t, "b", 1, testEpoch, keyB), netip.MustParseAddrPort("[2001:db8:9:9::1]:4000"))
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"2001:db8:1:2::10", true}, {"2001:db8:1:2:ffff::1", true}, {"192.0.2.1", true},
		{"2001:db8:9:9::1", true}, {"2001:db8:9:9::2", true}, // b's last good address, and its /64
		{"2001:db8:1:3::10", false}, {"192.0.2.2", false},
	} {
		if got := s.protected(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("protected(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	s.Forget("b")
	if s.protected(netip.MustParseAddr("2001:db8:9:9::2")) {
		t.Error("a forgotten backend's /64 is still protected")
	}
}

// TestOwnAddressNoAllocs: verifying, or shedding past its budget, a datagram forged from a
// backend's own address allocates nothing between log lines.
func TestOwnAddressNoAllocs(t *testing.T) {
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch },
		BackendFailBurst: 300}, &nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := netip.MustParseAddr("127.0.0.5")
	s.SetBackendAddrs(map[string][]netip.Addr{"a": {addr}})
	from := netip.AddrPortFrom(addr, 4000)
	s.handle(mkDatagram(t, "a", 1, testEpoch, keyA), from)
	forged := forgedFor(t, "a", 2)
	for _, name := range []string{"verified", "shed"} { // the budget of 300 is spent by the second
		if n := testing.AllocsPerRun(200, func() { s.handle(forged, from) }); n != 0 {
			t.Errorf("%s: %v allocs per datagram, want 0", name, n)
		}
	}
	if s.Rejected()[ReasonShed] == 0 {
		t.Error("the shed case shed nothing")
	}
}
