package push

import (
	"net/netip"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

func TestSourceLimit(t *testing.T) {
	const sec = int64(time.Second)
	a := netip.MustParseAddr("192.0.2.1")
	tests := []struct {
		name  string
		steps []struct {
			at    int64 // ns after the start
			fails int   // failures charged at that time
			allow bool  // allow afterwards
		}
	}{
		{"burst then shed", []struct {
			at    int64
			fails int
			allow bool
		}{{1, 9, true}, {1, 1, false}}},
		{"refills at the rate", []struct {
			at    int64
			fails int
			allow bool
		}{{1, 10, false}, {1 + sec/4, 0, false}, {1 + sec/2, 0, true}, {1 + sec/2, 1, false}}},
		{"refill stops at the burst", []struct {
			at    int64
			fails int
			allow bool
		}{{1, 10, false}, {1 + 100*sec, 9, true}, {1 + 100*sec, 1, false}}},
		{"a clock stepping back refills nothing", []struct {
			at    int64
			fails int
			allow bool
		}{{10 * sec, 10, false}, {sec, 0, false}, {sec + sec/2, 0, true}}}, // refilling resumes from the new time
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newSourceLimit(2, 10) // 2 a second, burst 10
			start := testEpoch.UnixNano()
			for i, s := range tt.steps {
				for range s.fails {
					l.fail(a, start+s.at)
				}
				if got := l.allow(a, start+s.at); got != s.allow {
					t.Fatalf("step %d: allow = %v, want %v", i, got, s.allow)
				}
			}
		})
	}
}

func TestSourceLimitKeys(t *testing.T) {
	l := newSourceLimit(1, 5)
	now := testEpoch.UnixNano()
	flood := netip.MustParseAddr("2001:db8:1:2::1")
	for range 5 {
		l.fail(flood, now)
	}
	same64 := netip.MustParseAddr("2001:db8:1:2:ffff::9")
	if l.allow(same64, now) {
		t.Error("another address of the flooder's /64 is not shed: IPv6 sources count per /64")
	}
	// Other sources keep their budget unless both of their buckets are
	// shared with the flooder's; over many addresses, nearly all do.
	spared := 0
	for i := range 1000 {
		a := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		if l.allow(a, now) {
			spared++
		}
	}
	if spared < 999 {
		t.Errorf("%d of 1000 other sources still allowed, want at least 999", spared)
	}
}

// TestServerSheds drives handle with an injected clock: a source that sent
// SourceFailBurst rejected datagrams is shed before the HMAC, and listed in
// the kernel filter; genuine sources, and a probe whose address a flooder
// forges, keep flowing; the budget refills with time.
func TestServerSheds(t *testing.T) {
	now := testEpoch
	sink := &nopSink{}
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return now },
		SourceFailRate: 10, SourceFailBurst: 5}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	probeA := netip.MustParseAddrPort("127.0.0.1:4000")
	flooder := netip.MustParseAddrPort("127.0.0.2:4000")
	forged := badMAC(t)(0) // claims backend "a"
	seqA, seqB := uint64(0), uint64(0)
	good := func(id string, from netip.AddrPort) {
		t.Helper()
		before := sink.n
		var d []byte
		if id == "a" {
			seqA++
			d = mkDatagram(t, "a", seqA, now, keyA)
		} else {
			seqB++
			d = mkDatagram(t, "b", seqB, now, keyB)
		}
		s.handle(d, from)
		if sink.n != before+1 {
			t.Fatalf("genuine report of %s from %s not accepted (rejected %v)", id, from, s.Rejected())
		}
	}
	rej := func(r report.Reason) uint64 { return s.Rejected()[r] }

	good("a", probeA)
	for range 5 {
		s.handle(forged, flooder)
	}
	if rej(report.ReasonBadMAC) != 5 || rej(ReasonShed) != 0 {
		t.Fatalf("within the burst: %v, want 5 bad_mac", s.Rejected())
	}
	for range 100 {
		s.handle(forged, flooder)
		s.handle([]byte("junk"), flooder)
	}
	if rej(report.ReasonBadMAC) != 5 || rej(ReasonShed) != 100 || rej(report.ReasonTruncated) != 100 {
		t.Fatalf("after the burst: %v, want the forged ones shed (framing is still counted by reason)", s.Rejected())
	}
	if kernelSupported && s.kernelListed.Load() != 1 {
		t.Errorf("kernel drop list holds %d sources, want the flooder", s.kernelListed.Load())
	}
	good("b", netip.MustParseAddrPort("127.0.0.3:4000"))

	// A flood forging probe a's address: shed for other backends, never for a's own
	// reports, and the address is not put on the kernel drop list.
	forgedB := mkDatagram(t, "b", 99, now, keyA)
	shed := rej(ReasonShed)
	for range 10 {
		s.handle(forgedB, probeA)
	}
	if rej(ReasonShed) != shed+5 {
		t.Errorf("forged datagrams for b from probe a's address: %d shed, want 5 after the burst", rej(ReasonShed)-shed)
	}
	good("a", probeA)
	if kernelSupported && s.kernelListed.Load() != 1 {
		t.Errorf("kernel drop list holds %d sources, want only the flooder (probe a's address is spared)", s.kernelListed.Load())
	}

	var bad uint64
	// Time refills the budget: the flooder is heard again, and the kernel list expires.
	now = now.Add(KernelDropFor)
	shed, bad = rej(ReasonShed), rej(report.ReasonBadMAC)
	s.handle(forged, flooder)
	if rej(ReasonShed) != shed || rej(report.ReasonBadMAC) != bad+1 {
		t.Errorf("after %s: %v, want the flooder's datagram looked at again", KernelDropFor, s.Rejected())
	}
	if s.kernelListed.Load() != 0 {
		t.Errorf("kernel drop list holds %d sources after %s, want 0", s.kernelListed.Load(), KernelDropFor)
	}

	// A clock stepping back an hour does not keep a source listed for that hour.
	for range 10 {
		s.handle(forged, flooder)
	}
	if kernelSupported && s.kernelListed.Load() != 1 {
		t.Fatalf("kernel drop list holds %d sources, want the flooder again", s.kernelListed.Load())
	}
	now = now.Add(-time.Hour)
	s.handle(mkDatagram(t, "b", 1000, now, keyB), netip.MustParseAddrPort("127.0.0.3:4000"))
	if s.kernelListed.Load() != 0 {
		t.Errorf("kernel drop list holds %d sources after the clock stepped back, want 0", s.kernelListed.Load())
	}
}

// TestHandleBadNoAllocs: rejecting or shedding an unauthenticated datagram
// allocates nothing between log lines.
func TestHandleBadNoAllocs(t *testing.T) {
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch },
		SourceFailBurst: 500}, &nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.drops.broken = true
	from := netip.MustParseAddrPort("127.0.0.2:4000")
	unknown := mkDatagram(t, "zz", 1, testEpoch, keyA)
	for _, tt := range []struct {
		name string
		d    []byte
	}{
		{"bad tag", badMAC(t)(0)},
		{"unknown backend", unknown},
		{"junk", make([]byte, 200)},
		{"shed", badMAC(t)(0)}, // the budget of 500 is spent by now
	} {
		if n := testing.AllocsPerRun(200, func() { s.handle(tt.d, from) }); n != 0 {
			t.Errorf("%s: %v allocs per datagram, want 0", tt.name, n)
		}
	}
	if s.Rejected()[ReasonShed] == 0 {
		t.Error("the shed case shed nothing")
	}
}

// waitDrops waits until the socket's kernel drop count is want (loopback
// delivers in a softirq, possibly on another CPU, so not by Write's return).
func waitDrops(t *testing.T, s *Server, want uint64) {
	t.Helper()
	got := testutil.Eventually(t, 5*time.Second, func() (uint64, bool) { got, _ := s.KernelDrops(); return got, got >= want },
		"kernel drops, want %d", want)
	if got != want {
		t.Fatalf("kernel drops %d, want %d", got, want)
	}
}
