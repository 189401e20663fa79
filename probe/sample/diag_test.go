package sample

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// diagMsg builds one netlink message of a sock_diag dump answer.
func diagMsg(seq uint32, typ, flags uint16, payload []byte) []byte {
	ne := binary.NativeEndian
	b := ne.AppendUint32(nil, uint32(unix.SizeofNlMsghdr+len(payload)))
	b = ne.AppendUint16(b, typ)
	b = ne.AppendUint16(b, flags)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// sockMsg is an inet_diag_msg for a socket in state with local port sport.
func sockMsg(seq uint32, state uint8, sport uint16) []byte {
	p := make([]byte, sizeofDiagMsg)
	p[0], p[1] = unix.AF_INET, state
	binary.BigEndian.PutUint16(p[4:6], sport)
	binary.BigEndian.PutUint16(p[6:8], 40000)
	return diagMsg(seq, sockDiagByFamily, unix.NLM_F_MULTI, p)
}

func doneMsg(seq uint32, flags uint16) []byte {
	return diagMsg(seq, unix.NLMSG_DONE, unix.NLM_F_MULTI|flags, make([]byte, 4))
}

func errMsg(seq uint32, errno unix.Errno) []byte {
	p := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	return diagMsg(seq, unix.NLMSG_ERROR, 0, append(p, make([]byte, 16)...))
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func TestCountDiagMessages(t *testing.T) {
	ports := NewPortSet(80, 443)
	tests := []struct {
		name        string
		data        []byte
		n           uint32
		done, intr  bool
		err         string
		errIs       error
		wantNoError bool
	}{
		{"counts local ports", cat(sockMsg(7, 1, 80), sockMsg(7, 1, 443), sockMsg(7, 1, 8080), sockMsg(7, 1, 80)), 3, false, false, "", nil, true},
		{"done", cat(sockMsg(7, 1, 80), doneMsg(7, 0)), 1, true, false, "", nil, true},
		{"not established", cat(sockMsg(7, 10, 80), sockMsg(7, 6, 443)), 0, false, false, "", nil, true},
		{"other sequence skipped", cat(sockMsg(6, 1, 80), doneMsg(6, 0), sockMsg(7, 1, 80)), 1, false, false, "", nil, true},
		{"interrupted", cat(sockMsg(7, 1, 80), doneMsg(7, unix.NLM_F_DUMP_INTR)), 1, true, true, "", nil, true},
		{"error", cat(sockMsg(7, 1, 80), errMsg(7, unix.EPERM)), 1, false, false, "operation not permitted", unix.EPERM, false},
		{"ack", errMsg(7, 0), 0, true, false, "", nil, true},
		{"short header", []byte{1, 2, 3}, 0, false, false, "shorter than a message header", nil, false},
		{"length beyond data", sockMsg(7, 1, 80)[:40], 0, false, false, "message length", nil, false},
		{"length below header", append(binary.NativeEndian.AppendUint32(nil, 4), make([]byte, 12)...), 0, false, false, "message length 4", nil, false},
		{"short socket message", diagMsg(7, sockDiagByFamily, 0, make([]byte, 10)), 0, false, false, "10 bytes", nil, false},
		{"short error", diagMsg(7, unix.NLMSG_ERROR, 0, nil), 0, false, false, "short error", nil, false},
	}
	for _, tt := range tests {
		n, done, intr, err := CountDiagMessages(tt.data, 7, ports)
		if tt.wantNoError != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) ||
			(tt.errIs != nil && !errors.Is(err, tt.errIs)) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			continue
		}
		if n != tt.n || done != tt.done || intr != tt.intr {
			t.Errorf("%s: n=%d done=%v intr=%v, want %d %v %v", tt.name, n, done, intr, tt.n, tt.done, tt.intr)
		}
	}
}

func FuzzCountDiagMessages(f *testing.F) {
	f.Add(cat(sockMsg(7, 1, 80), sockMsg(7, 1, 443), doneMsg(7, 0)))
	f.Add(errMsg(7, unix.ENOENT))
	f.Add(doneMsg(7, unix.NLM_F_DUMP_INTR))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, _, _, _ := CountDiagMessages(data, 7, NewPortSet(80, 443))
		if int(n) > len(data)/(unix.SizeofNlMsghdr+sizeofDiagMsg) {
			t.Fatalf("%d sockets from %d bytes", n, len(data))
		}
	})
}

func TestAppendDiagRequest(t *testing.T) {
	b := AppendDiagRequest(nil, 0x01020304, unix.AF_INET6)
	ne := binary.NativeEndian
	if len(b) != 72 || ne.Uint32(b[0:4]) != 72 || ne.Uint16(b[4:6]) != sockDiagByFamily ||
		ne.Uint16(b[6:8]) != unix.NLM_F_REQUEST|unix.NLM_F_DUMP || ne.Uint32(b[8:12]) != 0x01020304 {
		t.Fatalf("header % x", b[:16])
	}
	if b[16] != unix.AF_INET6 || b[17] != unix.IPPROTO_TCP || b[18] != 0 || ne.Uint32(b[20:24]) != 1<<1 {
		t.Errorf("request % x: want family, TCP, no extensions, states = ESTABLISHED only", b[16:24])
	}
}

// fakeCounter fails with errs in turn, then counts n.
type fakeCounter struct {
	errs  []error
	n     uint32
	calls int
}

func (f *fakeCounter) Count(*PortSet) (uint32, error) {
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return 0, err
	}
	return f.n, nil
}

// sock_diag is used when it works; /proc when it fails, for good after diagFailLimit failures
// in a row or at once when netlink is not permitted.
func TestConnsFallback(t *testing.T) {
	files := map[string][]byte{"/tcp": fixture(t, "proc_net_tcp")}
	procConns := func(d ConnCounter) *Conns {
		return &Conns{Ports: NewPortSet(18080), Diag: d, Tables: []Table{{File: "/tcp"}}, Read: mapReader(files)}
	}
	ctx := context.Background()
	transient := errors.New("sock_diag: receive: no buffer space")

	d := &fakeCounter{errs: []error{transient}, n: 42}
	c := procConns(d)
	if v, err := c.Sample(ctx); err != nil || v.Conns != 3 || !strings.HasPrefix(v.ConnsVia, "proc (sock_diag failed: ") {
		t.Errorf("transient failure: %+v %v, want the /proc count", v, err)
	}
	if v, err := c.Sample(ctx); err != nil || v.Conns != 42 || v.ConnsVia != ConnsViaNetlink {
		t.Errorf("after a transient failure: %+v %v, want sock_diag again", v, err)
	}

	d = &fakeCounter{errs: []error{transient, transient, transient}, n: 42}
	c = procConns(d)
	for range diagFailLimit {
		c.Sample(ctx)
	}
	if v, err := c.Sample(ctx); err != nil || v.Conns != 3 || !strings.Contains(v.ConnsVia, "given up") || d.calls != diagFailLimit {
		t.Errorf("after %d failures: %+v %v, %d calls; want /proc for good", diagFailLimit, v, err, d.calls)
	}

	d = &fakeCounter{errs: []error{unix.EPERM}, n: 42}
	c = procConns(d)
	c.Sample(ctx)
	if v, _ := c.Sample(ctx); v.Conns != 3 || d.calls != 1 {
		t.Errorf("EPERM: %+v after %d calls, want /proc at once", v, d.calls)
	}
}

// listenAndConnect opens a listener on addr and n connections to it, accepted, and closes them
// all at cleanup. It returns the listener's port.
func listenAndConnect(t *testing.T, network, addr string, n int) uint16 {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	for range n {
		c, err := net.Dial(network, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
	}
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// sock_diag and /proc/net/tcp{,6} count the same connections on this machine: IPv4 and IPv6
// listeners on loopback, some with accepted connections, some only listening. The test's own
// client sockets have ephemeral local ports and are not counted.
func TestSockDiagAgreesWithProc(t *testing.T) {
	ports := []uint16{
		listenAndConnect(t, "tcp4", "127.0.0.1:0", 3),
		listenAndConnect(t, "tcp4", "127.0.0.1:0", 2),
		listenAndConnect(t, "tcp4", "127.0.0.1:0", 0),
		listenAndConnect(t, "tcp6", "[::1]:0", 2),
		listenAndConnect(t, "tcp6", "[::1]:0", 0),
	}
	set := NewPortSet(ports...)
	d := &SockDiag{}
	defer d.Close()
	viaDiag, err := d.Count(set)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := (&Conns{Ports: set}).Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if viaDiag != 7 || pv.Conns != 7 {
		t.Errorf("sock_diag counted %d, /proc %d; want 7 each (ports %v)", viaDiag, pv.Conns, ports)
	}
	// Each listener alone, through the sampler as the probe builds it.
	c := NewConns(nil)
	for i, want := range []uint32{3, 2, 0, 2, 0} {
		c.Ports = NewPortSet(ports[i])
		v, err := c.Sample(context.Background())
		if err != nil || v.Conns != want || v.ConnsVia != ConnsViaNetlink {
			t.Errorf("port %d: %+v %v, want %d via sock_diag", ports[i], v, err, want)
		}
	}
	// The socket is kept: a second count on the same SockDiag works.
	if n, err := d.Count(set); err != nil || n != 7 {
		t.Errorf("second count: %d %v", n, err)
	}
	t.Logf("compat request (both families in one dump) refused by this kernel: %v", d.noCompat)
	// The per-family requests, used where the kernel refuses the compat one, agree too.
	d.noCompat = true
	if n, err := d.Count(set); err != nil || n != 7 {
		t.Errorf("per-family dumps: %d %v, want 7", n, err)
	}
}

// With MaxAge a count is reused while younger than it, then counted again; a failed count is
// returned as the failure it is and never replaced by an older count.
func TestConnsMaxAge(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1000, 0)
	now := t0
	d := &fakeCounter{}
	// No /proc table to fall back on, so a failed sock_diag count fails the sample.
	unreadable := func(name string) ([]byte, error) { return nil, fmt.Errorf("read %s: %w", name, unix.EIO) }
	c := &Conns{Ports: NewPortSet(80), Diag: d, Tables: []Table{{File: "/tcp"}}, Read: unreadable, MaxAge: 5 * time.Second, Now: func() time.Time { return now }}
	steps := []struct {
		at        time.Duration
		n         uint32 // what the kernel counts now
		fail      bool   // the kernel refuses this count
		want      uint32
		wantCalls int
	}{
		{at: 0, n: 7, want: 7, wantCalls: 1},
		{at: time.Second, n: 9, want: 7, wantCalls: 1},             // reused
		{at: 4999 * time.Millisecond, n: 9, want: 7, wantCalls: 1}, // still younger than MaxAge
		{at: 5 * time.Second, n: 9, want: 9, wantCalls: 2},         // counted again
		{at: 10 * time.Second, n: 11, fail: true, wantCalls: 3},
		{at: 10500 * time.Millisecond, n: 11, want: 11, wantCalls: 4}, // after a failure: counted
		{at: 11 * time.Second, n: 12, want: 11, wantCalls: 4},
		{at: 8 * time.Second, n: 13, want: 13, wantCalls: 5}, // the clock went back: counted
	}
	for i, s := range steps {
		now = t0.Add(s.at)
		d.n = s.n
		if s.fail {
			d.errs = []error{unix.ENOBUFS}
		}
		v, err := c.Sample(ctx)
		switch {
		case s.fail && err == nil:
			t.Errorf("step %d (%v): %+v, want the failure", i, s.at, v)
		case !s.fail && (err != nil || v.Conns != s.want):
			t.Errorf("step %d (%v): %d %v, want %d", i, s.at, v.Conns, err, s.want)
		}
		if d.calls != s.wantCalls {
			t.Errorf("step %d (%v): %d counts so far, want %d", i, s.at, d.calls, s.wantCalls)
		}
	}
}
