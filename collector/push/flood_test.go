package push

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/internal/report"
)

// genuineSink counts the genuine reports (seq <= limit) and signals the
// marker reports above it.
type genuineSink struct {
	limit  uint64
	got    atomic.Uint64
	marker chan uint64
}

func (g *genuineSink) Accept(r *report.Report, _ netip.AddrPort) {
	if r.Seq <= g.limit {
		g.got.Add(1)
		return
	}
	select {
	case g.marker <- r.Seq:
	default:
	}
}

// floodResult is one run of the flood harness.
type floodResult struct {
	genuine, sent uint64        // genuine reports accepted, sent
	badSent       uint64        // bad datagrams the flooders got into the socket layer
	bad           uint64        // bad datagrams the read loop handled (rejected or shed)
	kernel        uint64        // datagrams the kernel dropped (buffer full or drop list)
	elapsed       time.Duration // from the first datagram to the last one handled
}

// floodHarness runs a real server on loopback. Two goroutines, each with
// its own sockets on 127.2.0.0/16 and 127.3.0.0/16 (sources addresses
// each), send bad datagrams (badFor makes them) as fast as they can, at
// most maxBad each; meanwhile a
// genuine probe on 127.0.0.1 sends n reports for backend "a", one every
// gap. When the genuine sender is done the flooders stop; a marker report
// is then sent (again every 50 ms until one arrives), and as the socket is
// a FIFO everything before it was handled or dropped by then.
func floodHarness(tb testing.TB, n int, gap time.Duration, maxBad, sources int, badFor func(i int) []byte, readLoopOnly bool) floodResult {
	tb.Helper()
	sink := &genuineSink{limit: uint64(n), marker: make(chan uint64, 1)}
	var now atomic.Int64
	now.Store(testEpoch.UnixNano())
	s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return time.Unix(0, now.Load()) }}, sink)
	if err != nil {
		tb.Fatal(err)
	}
	s.drops.broken = readLoopOnly // before Serve: the read loop owns it then
	defer serve(tb, s)()
	dial := func(local string) *net.UDPConn {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(local)), s.Addr().(*net.UDPAddr))
		if err != nil {
			tb.Fatal(err)
		}
		return c
	}
	var stop atomic.Bool
	var badSent atomic.Uint64
	var wg sync.WaitGroup
	start := time.Now()
	for f := range 2 {
		// Flooder f sends from 127.f+2.0.1, or round-robin from as many
		// addresses of 127.f+2.0.0/16 as sources says.
		var conns []*net.UDPConn
		for j := range max(sources, 1) {
			c := dial(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, byte(f + 2), byte((j + 1) >> 8), byte(j + 1)}), 0).String())
			defer c.Close()
			conns = append(conns, c)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < maxBad && !stop.Load(); i++ {
				if _, err := conns[i%len(conns)].Write(badFor(i)); err == nil {
					badSent.Add(1)
				}
			}
		}()
	}
	g := dial("127.0.0.1:0")
	defer g.Close()
	dgrams := make([][]byte, n)
	for i := range dgrams {
		dgrams[i] = mkDatagram(tb, "a", uint64(i+1), testEpoch, keyA)
	}
	tick := time.NewTicker(gap)
	for _, d := range dgrams {
		<-tick.C
		if _, err := g.Write(d); err != nil {
			tb.Fatal(err)
		}
	}
	tick.Stop()
	stop.Store(true)
	wg.Wait()
	deadline := time.After(30 * time.Second)
	retry := time.NewTicker(50 * time.Millisecond)
	defer retry.Stop()
	for seq := uint64(n + 1); ; seq++ {
		if _, err := g.Write(mkDatagram(tb, "a", seq, testEpoch, keyA)); err != nil {
			tb.Fatal(err)
		}
		select {
		case <-sink.marker:
		case <-retry.C:
			continue
		case <-deadline:
			tb.Fatalf("no marker report got through within 30 s after the flood (accepted %d, rejected %v)", s.Accepted(), s.Rejected())
		}
		break
	}
	var bad uint64
	for _, c := range s.Rejected() {
		bad += c
	}
	kernel, _ := s.KernelDrops()
	return floodResult{genuine: sink.got.Load(), sent: uint64(n), badSent: badSent.Load(), bad: bad,
		kernel: kernel, elapsed: time.Since(start)}
}

// badMAC is a well-formed report for the configured backend "a" whose tag
// does not verify: the most expensive thing to reject (it costs an HMAC).
func badMAC(tb testing.TB) func(int) []byte {
	d := mkDatagram(tb, "a", 1, testEpoch, keyA)
	d[len(d)-1] ^= 1
	return func(int) []byte { return d }
}

// BenchmarkFlood measures the push server under a flood of bad datagrams on
// loopback: how many of 200 genuine reports (one every 5 ms) are accepted
// while two goroutines send at most 200 000 bad datagrams each, how many
// bad datagrams the read loop handled per second, and how many the kernel
// dropped. "kernel" is the server as configured (flooding sources go on
// the socket filter's drop list); "readloop" turns the drop list off, so
// everything is shed in the read loop; "500sources" spreads each flooder
// over 250 addresses, more than the drop list holds (MaxKernelDrops). Run with -benchtime=1x: each
// iteration is one full run of about a second.
func BenchmarkFlood(b *testing.B) {
	for _, tt := range []struct {
		name string
		bad  func(testing.TB) func(int) []byte
	}{
		{"bad_mac", badMAC},
		{"garbage", func(testing.TB) func(int) []byte {
			g := make([]byte, 200)
			return func(int) []byte { return g }
		}},
	} {
		for _, mode := range []struct {
			name     string
			sources  int
			readLoop bool
		}{{"kernel", 1, false}, {"readloop", 1, true}, {"500sources", 250, false}} {
			b.Run(tt.name+"/"+mode.name, func(b *testing.B) {
				var res floodResult
				for b.Loop() {
					res = floodHarness(b, 200, 5*time.Millisecond, 200_000, mode.sources, tt.bad(b), mode.readLoop)
				}
				b.ReportMetric(float64(res.genuine), "genuine_accepted")
				b.ReportMetric(float64(res.sent), "genuine_sent")
				b.ReportMetric(float64(res.badSent), "bad_sent")
				b.ReportMetric(float64(res.bad), "bad_handled")
				b.ReportMetric(float64(res.bad)/res.elapsed.Seconds(), "bad_handled/s")
				b.ReportMetric(float64(res.kernel), "kernel_dropped")
			})
		}
	}
}

// BenchmarkHandleBad is the read loop's cost per bad datagram, without the
// socket: a forged tag for a configured backend within a source's failure
// budget (key lookup and HMAC), the same once the source is shed, and junk
// that fails the framing.
func BenchmarkHandleBad(b *testing.B) {
	forged := badMAC(b)(0)
	for _, tt := range []struct {
		name  string
		d     []byte
		burst int
	}{
		{"bad_mac", forged, 1 << 30},
		{"shed", forged, 1},
		{"garbage", make([]byte, 200), 1 << 30},
	} {
		b.Run(tt.name, func(b *testing.B) {
			s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Now: func() time.Time { return testEpoch },
				SourceFailBurst: tt.burst}, &nopSink{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.drops.broken = true // no socket filter: this measures the read loop
			from := netip.MustParseAddrPort("127.0.0.2:4000")
			b.ReportAllocs()
			for b.Loop() {
				s.handle(tt.d, from)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "datagrams/s")
		})
	}
}
