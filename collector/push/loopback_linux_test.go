package push

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"flowweight/collector"
	"flowweight/internal/report"
)

// streamSink counts accepted reports (handing them on to next, if set),
// wakes a sender waiting for room in its window every wakeEvery reports,
// and closes done at the want-th.
type streamSink struct {
	next Sink
	want uint64
	n    atomic.Uint64
	wake chan struct{}
	done chan struct{}
}

const wakeEvery = 256

func newStreamSink(next Sink, want uint64) *streamSink {
	return &streamSink{next: next, want: want, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (s *streamSink) Accept(r *report.Report, from netip.AddrPort) {
	if s.next != nil {
		s.next.Accept(r, from)
	}
	n := s.n.Add(1)
	if n%wakeEvery == 0 {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	if n == s.want {
		close(s.done)
	}
}

// streamCase is one shape of BenchmarkServeLoopbackStream.
type streamCase struct {
	name    string
	pool    bool // the sink is a collector.Pool (as in the controller), not a counter
	readers int  // Config.Readers
	batch   int  // datagrams per recvmmsg
	gso     bool // the client sends each batch as one UDP GSO buffer (UDP_SEGMENT)
	// backends, when more than the client's sockets, are spread over them
	// (socket k sends for backends k, k+streamSockets, ...), as behind a
	// NAT: the per-backend state no longer fits in the caches.
	backends int
}

// sendWindow bounds the datagrams sent and not yet accepted, well below what
// the receive buffer holds (ReadBuffer, which the kernel doubles, over a
// truesize of about 1 KiB per small datagram), so none is lost to a full
// buffer however the two cores are shared: the benchmark measures
// throughput, not how the kernel drops.
const sendWindow = 2048

// sendBatch is how many datagrams one sendmmsg call carries.
const sendBatch = 64

// The client: streamSenders goroutines, each locked to its own thread,
// sending from streamSockets sockets, one backend each.
const (
	streamSenders = 2
	streamSockets = 64
)

// BenchmarkServeLoopbackStream is the server's throughput through real
// 127.0.0.1 sockets: sender goroutines keep up to sendWindow datagrams in
// flight, each client socket a backend of its own as real probes are,
// until b.N reports reached the sink. Every datagram sent must be
// accepted, and the kernel must have dropped none.
//
// The server runs with readers (Config.Readers) and batch (datagrams per
// recvmmsg; 1 is a system call per datagram, as before batching). The
// client sends sendBatch datagrams per system call, either as a sendmmsg
// of separate datagrams, each going down and up the whole stack, or as one
// UDP GSO buffer (gso), which loopback carries up to the receiving socket
// whole and splits into datagrams there: the server sees the same
// datagrams, and the client costs far less of the shared cores.
//
// The client shares the machine's cores with the server. cpu-ns/report is
// the whole process's CPU time (user + system) per report; client-ns/report
// is that of the sender threads alone (getrusage per thread: each sender is
// locked to its thread) and server-ns/report the rest. The kernel's
// receive path on loopback runs mostly in the sender's system call, so it
// is counted as the client's.
func BenchmarkServeLoopbackStream(b *testing.B) {
	for _, tc := range []streamCase{
		{name: "sendmmsg/count/readers=1/batch=1", readers: 1, batch: 1},
		{name: "sendmmsg/count/readers=1/batch=64", readers: 1, batch: 64},
		{name: "sendmmsg/count/readers=2/batch=1", readers: 2, batch: 1},
		{name: "sendmmsg/count/readers=2/batch=64", readers: 2, batch: 64},
		{name: "sendmmsg/pool/readers=2/batch=64", readers: 2, batch: 64, pool: true},
		{name: "gso/count/readers=1/batch=1", readers: 1, batch: 1, gso: true},
		{name: "gso/count/readers=1/batch=64", readers: 1, batch: 64, gso: true},
		{name: "gso/count/readers=2/batch=64", readers: 2, batch: 64, gso: true},
		{name: "gso/pool/readers=2/batch=64", readers: 2, batch: 64, gso: true, pool: true},
		{name: "gso/pool/readers=2/batch=64/backends=100000", readers: 2, batch: 64, gso: true, pool: true, backends: 100_000},
	} {
		b.Run(tc.name, func(b *testing.B) { benchStream(b, tc) })
	}
}

func benchStream(b *testing.B, tc streamCase) {
	backends := max(tc.backends, streamSockets)
	keys := make(map[string][]byte, backends)
	names := make([]string, backends)
	for i := range names {
		names[i] = fmt.Sprintf("stream-%06d", i) // one length: a GSO buffer holds datagrams of one size
		keys[names[i]] = []byte(fmt.Sprintf("key-of-stream-backend-%06d-0123456789", i))
	}
	// The backends report in turn, each its reports 1, 2, ...; b.N in all.
	// Backend j's go out on socket j % streamSockets.
	dgrams := make([][][]byte, streamSockets)
	seqs := make([]uint64, backends)
	for i := range b.N {
		j := i % backends
		seqs[j]++
		k := j % streamSockets
		dgrams[k] = append(dgrams[k], mkDatagram(b, names[j], seqs[j], testEpoch, keys[names[j]]))
	}
	var next Sink
	var pool *collector.Pool
	if tc.pool {
		pool = collector.NewPool(collector.Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: time.Minute,
			Warmup: time.Second, Alpha: 0.3})
		pool.SetBackends(names)
		next = pool
	}
	sink := newStreamSink(next, uint64(b.N))
	s, err := New(Config{Listen: "127.0.0.1:0", Now: func() time.Time { return testEpoch }, Readers: tc.readers,
		KeyFor: func(id string) ([]byte, bool) { k, ok := keys[id]; return k, ok }}, sink)
	if err != nil {
		b.Fatal(err)
	}
	s.readBatch = tc.batch
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			b.Error(err)
		}
	}()
	conns := make([]*net.UDPConn, streamSockets)
	for i := range conns {
		c, err := net.DialUDP("udp", nil, s.Addr().(*net.UDPAddr))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
		if tc.gso && len(dgrams[i]) > 0 {
			if err := setGSO(c, len(dgrams[i][0])); err != nil {
				b.Skipf("no UDP GSO: %v", err)
			}
		}
	}
	drops0, _ := s.KernelDrops()

	var sent atomic.Uint64
	var clientCPU atomic.Int64 // ns
	errs := make(chan error, streamSenders)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := processCPU()
	for g := range streamSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			t0 := threadCPU()
			defer func() { clientCPU.Add(threadCPU() - t0) }()
			var mine []int
			for k := g; k < streamSockets; k += streamSenders {
				mine = append(mine, k)
			}
			errs <- sendStream(conns, dgrams, mine, &sent, sink, tc.gso)
		}()
	}
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	var sendErr error
	for range streamSenders {
		if err := <-errs; err != nil && sendErr == nil {
			sendErr = err
		}
	}
	if sendErr == nil {
		select {
		case <-sink.done:
		case <-timeout.C:
		}
	}
	wg.Wait()
	cpu := processCPU() - cpu0
	b.StopTimer()
	drops1, _ := s.KernelDrops()
	if got := sink.n.Load(); sendErr != nil || got != uint64(b.N) || s.Accepted() != uint64(b.N) {
		b.Fatalf("sent %d, the sink got %d, accepted %d, rejected %v, kernel drops %d, send error %v",
			sent.Load(), got, s.Accepted(), s.Rejected(), drops1-drops0, sendErr)
	}
	if pool != nil {
		var reports uint64
		for _, st := range pool.Snapshot(nil) {
			reports += st.Reports
		}
		if reports != uint64(b.N) {
			b.Fatalf("the pool counted %d reports of %d", reports, b.N)
		}
	}
	n := float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "reports/s")
	b.ReportMetric(float64(drops1-drops0), "kernel-drops")
	b.ReportMetric(float64(cpu)/n, "cpu-ns/report")
	b.ReportMetric(float64(clientCPU.Load())/n, "client-ns/report")
	b.ReportMetric(float64(cpu-clientCPU.Load())/n, "server-ns/report")
}

// sendStream sends the datagrams of the sockets in mine, sendBatch at a
// time from each in turn, keeping sent - accepted within sendWindow.
func sendStream(conns []*net.UDPConn, dgrams [][][]byte, mine []int, sent *atomic.Uint64, sink *streamSink, gso bool) error {
	next := make([]int, len(conns))
	var hdrs [sendBatch]unix.Mmsghdr
	var iovs [sendBatch]unix.Iovec
	stuck := time.NewTimer(time.Hour)
	defer stuck.Stop()
	for left := len(mine); left > 0; {
		left = 0
		for _, k := range mine {
			todo := dgrams[k][next[k]:]
			if len(todo) == 0 {
				continue
			}
			left++
			n := min(len(todo), sendBatch)
			for sent.Load()+uint64(n)-sink.n.Load() > sendWindow {
				stuck.Reset(5 * time.Second)
				select {
				case <-sink.wake:
				case <-stuck.C:
					return fmt.Errorf("no room in the window for 5 s: sent %d, accepted %d", sent.Load(), sink.n.Load())
				}
			}
			for i, d := range todo[:n] {
				iovs[i] = unix.Iovec{Base: &d[0]}
				iovs[i].SetLen(len(d))
				hdrs[i] = unix.Mmsghdr{Hdr: unix.Msghdr{Iov: &iovs[i]}}
				hdrs[i].Hdr.SetIovlen(1)
			}
			var m int
			var err error
			if gso {
				m, err = sendGSO(conns[k], iovs[:n])
			} else {
				m, err = sendmmsg(conns[k], hdrs[:n])
			}
			if err != nil {
				return err
			}
			next[k] += m
			sent.Add(uint64(m))
		}
	}
	return nil
}

// sendmmsg sends hdrs on c (connected) in one call, waiting while the socket is
// not writable; it returns how many were sent.
func sendmmsg(c *net.UDPConn, hdrs []unix.Mmsghdr) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), 0, 0, 0)
		if e == unix.EAGAIN {
			return false
		}
		if e != 0 {
			serr = e
		}
		n = int(r)
		return true
	})
	return n, errors.Join(err, serr)
}

// setGSO makes each send on c a buffer of datagrams of size bytes, which
// the kernel splits (UDP_SEGMENT) on the receiving side of loopback: one
// trip down the stack for a batch.
func setGSO(c *net.UDPConn, size int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, size) }); err != nil {
		return err
	}
	return serr
}

// sendGSO sends iovs, datagrams of the size given to setGSO, as one buffer.
func sendGSO(c *net.UDPConn, iovs []unix.Iovec) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	h := unix.Msghdr{Iov: &iovs[0]}
	h.SetIovlen(len(iovs))
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		_, _, e := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&h)), 0)
		if e == unix.EAGAIN {
			return false
		}
		if e != 0 {
			serr = e
		}
		return true
	})
	if err := errors.Join(err, serr); err != nil {
		return 0, err
	}
	return len(iovs), nil
}

func processCPU() int64 { return rusageNS(unix.RUSAGE_SELF) }
func threadCPU() int64  { return rusageNS(unix.RUSAGE_THREAD) }

func rusageNS(who int) int64 {
	var u unix.Rusage
	if err := unix.Getrusage(who, &u); err != nil {
		return 0
	}
	return u.Utime.Nano() + u.Stime.Nano()
}
