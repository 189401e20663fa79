package push

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

func TestReadersConfig(t *testing.T) {
	sockets := func(readers int) int {
		if runtime.GOOS == "linux" {
			return readers
		}
		return 1
	}
	tests := []struct {
		name    string
		readers int
		want    int
	}{
		{"default", 0, runtime.GOMAXPROCS(0)},
		{"one", 1, 1},
		{"three", 3, 3},
		{"capped", MaxReaders + 10, MaxReaders},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Readers: tt.readers}, &nopSink{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if len(s.readers) != tt.want || s.cfg.Readers != tt.want {
				t.Errorf("%d readers (Config.Readers %d), want %d", len(s.readers), s.cfg.Readers, tt.want)
			}
			if len(s.conns) != sockets(tt.want) {
				t.Errorf("%d sockets, want %d", len(s.conns), sockets(tt.want))
			}
			port := s.Addr().(*net.UDPAddr).Port
			for i, c := range s.conns {
				if p := c.LocalAddr().(*net.UDPAddr).Port; p != port {
					t.Errorf("socket %d is bound to port %d, want %d", i, p, port)
				}
			}
		})
	}
}

// TestReadersPortInUse: a server's port is its own, whatever the number of
// readers on either side; a second one on it fails, as with one socket.
func TestReadersPortInUse(t *testing.T) {
	for _, tt := range []struct{ first, second int }{{1, 1}, {1, 4}, {4, 1}, {4, 4}} {
		t.Run(fmt.Sprintf("%d then %d", tt.first, tt.second), func(t *testing.T) {
			s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Readers: tt.first}, &nopSink{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			again, err := New(Config{Listen: s.Addr().String(), KeyFor: keyFor, Readers: tt.second}, &nopSink{})
			if err == nil {
				again.Close()
				t.Fatalf("a second server bound %s", s.Addr())
			}
		})
	}
}

// orderSink checks what collector.Pool relies on when several readers hand
// over one backend's reports: never two at once, never one twice, and a
// report of a boot other than the previous one's is that boot's newest.
type orderSink struct {
	busy atomic.Bool
	n    atomic.Uint64

	mu       sync.Mutex // only the test's reading of the results contends
	last     uint64     // nonce of the previous report
	newest   map[uint64]uint64
	seen     map[[2]uint64]bool
	problems []string
	accepted int
	switches int // reports of another boot than the previous one
}

func (o *orderSink) Accept(r *report.Report, from netip.AddrPort) {
	if !o.busy.CompareAndSwap(false, true) {
		o.problem("two reports of %s handed over at once", r.BackendID)
		return
	}
	defer o.busy.Store(false)
	runtime.Gosched() // give another reader the chance to break the rule
	o.mu.Lock()
	defer o.mu.Unlock()
	k := [2]uint64{r.BootNonce, r.Seq}
	if o.seen[k] {
		o.problems = append(o.problems, fmt.Sprintf("boot %d seq %d accepted twice", r.BootNonce, r.Seq))
	}
	o.seen[k] = true
	if o.accepted > 0 && r.BootNonce != o.last {
		o.switches++
		if r.Seq <= o.newest[r.BootNonce] {
			o.problems = append(o.problems, fmt.Sprintf("boot %d seq %d handed over after boot %d, below its newest %d",
				r.BootNonce, r.Seq, o.last, o.newest[r.BootNonce]))
		}
	}
	o.last = r.BootNonce
	o.newest[r.BootNonce] = max(o.newest[r.BootNonce], r.Seq)
	o.accepted++
	o.n.Add(1)
}

func (o *orderSink) problem(format string, args ...any) {
	o.mu.Lock()
	o.problems = append(o.problems, fmt.Sprintf(format, args...))
	o.mu.Unlock()
}

// TestReadersOneBackend sends two boots of one backend, interleaved (two
// probe processes with one id), every datagram twice from two of eight
// client sockets, so that with several readers one backend's reports are
// handled by several at once. Under -race this is also the data race test
// of the shared state (limiter, drop list, good addresses, guard).
func TestReadersOneBackend(t *testing.T) {
	for _, readers := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("readers=%d", readers), func(t *testing.T) {
			sink := &orderSink{newest: map[uint64]uint64{}, seen: map[[2]uint64]bool{}}
			s, err := New(Config{Listen: "127.0.0.1:0", KeyFor: keyFor, Readers: readers,
				Now: func() time.Time { return testEpoch }}, sink)
			if err != nil {
				t.Fatal(err)
			}
			defer serve(t, s)()
			const clients, perBoot = 8, 300
			var conns []*net.UDPConn
			for range clients {
				c, err := net.DialUDP("udp", nil, s.Addr().(*net.UDPAddr))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns = append(conns, c)
			}
			sent := 0
			for i := range 2 * perBoot {
				r := mkReport("a", uint64(i/2+1), testEpoch.Add(time.Duration(i)*time.Microsecond))
				r.BootNonce = uint64(i%2 + 1)
				d, err := r.AppendSeal(nil, keyA)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []*net.UDPConn{conns[i%clients], conns[(i+3)%clients]} {
					if _, err := c.Write(d); err != nil {
						t.Fatal(err)
					}
					sent++
				}
			}
			// Everything sent is accepted, rejected or dropped by the kernel.
			testutil.Eventually(t, 10*time.Second, func() (string, bool) {
				var handled uint64
				for _, n := range s.Rejected() {
					handled += n
				}
				drops, _ := s.KernelDrops()
				return fmt.Sprintf("%d accepted, rejected %v, kernel drops %d", s.Accepted(), s.Rejected(), drops),
					handled+s.Accepted()+drops >= uint64(sent)
			}, "of %d datagrams, not all accepted, rejected or dropped", sent)
			sink.mu.Lock()
			defer sink.mu.Unlock()
			for _, p := range sink.problems {
				t.Error(p)
			}
			rej := s.Rejected()
			if uint64(sink.accepted) != s.Accepted() || sink.accepted > 2*perBoot {
				t.Errorf("the sink got %d, the server accepted %d, of %d distinct reports", sink.accepted, s.Accepted(), 2*perBoot)
			}
			if rej[report.ReasonReplay] < uint64(sent/2) {
				t.Errorf("%d replays refused, want at least the %d second copies (rejected %v)", rej[report.ReasonReplay], sent/2, rej)
			}
			if sink.newest[1] == 0 || sink.newest[2] == 0 || sink.switches == 0 {
				t.Errorf("newest accepted seqs %v, %d boot switches: the test no longer exercises two boots", sink.newest, sink.switches)
			}
			t.Logf("%d readers: %d of %d reports accepted, %d boot switches, rejected %v", readers, sink.accepted, 2*perBoot, sink.switches, rej)
		})
	}
}
