package agent

import (
	"context"
	"errors"
	"flowweight/internal/testutil"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUDPSender pushes to an IPv4 and an IPv6 collector address, the latter written as the
// configuration takes it ("[::1]:port").
func TestUDPSender(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(listen, func(t *testing.T) {
			pc, err := net.ListenPacket("udp", listen)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			s := &UDPSender{Addr: pc.LocalAddr().String()}
			defer s.Close()
			if err := s.Send([]byte("report")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			n, from, err := pc.ReadFrom(buf)
			if err != nil || string(buf[:n]) != "report" {
				t.Fatalf("got %q, %v", buf[:n], err)
			}
			if want := pc.LocalAddr().(*net.UDPAddr).IP; !from.(*net.UDPAddr).IP.Equal(want) {
				t.Fatalf("sent from %v, want %v", from, want)
			}
		})
	}
}

// Nobody listening: the kernel's port-unreachable comes back as an error on a later send,
// which names the collector, and the sender reconnects at once.
func TestUDPSenderUnreachable(t *testing.T) {
	addr := closedPort(t)
	s := &UDPSender{Addr: addr}
	defer s.Close()
	sendErr := sendUntilError(t, s)
	var se *SendError
	if !errors.As(sendErr, &se) || se.Addr != addr || !errors.Is(sendErr, syscall.ECONNREFUSED) ||
		!strings.Contains(sendErr.Error(), addr) || !strings.Contains(sendErr.Error(), "refused") {
		t.Fatalf("error %v", sendErr)
	}
	if s.conn == nil {
		t.Error("no new socket after an error")
	}
	if err := s.Send([]byte("x")); err != nil {
		t.Errorf("send after reconnect: %v", err)
	}
	if s.Errors.Load() != 1 || s.Sent.Load() == 0 {
		t.Errorf("sent %d, errors %d", s.Sent.Load(), s.Errors.Load())
	}
}

// A name is resolved in the background: while that takes, sends fail at once with
// ErrResolving instead of waiting, and a failed resolution is reported and tried again.
func TestUDPSenderResolvesInBackground(t *testing.T) {
	pc := listen(t)
	release := make(chan error)
	dials := make(chan string, 10)
	s := &UDPSender{Addr: "collector.test:7946", dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials <- addr
		if err := <-release; err != nil {
			return nil, err
		}
		return net.Dial(network, pc.LocalAddr().String())
	}}
	defer s.Close()
	s.Connect()
	if got := <-dials; got != "collector.test:7946" {
		t.Fatalf("dialled %q", got)
	}
	err := s.Send([]byte("early"))
	if !errors.Is(err, ErrResolving) || !strings.Contains(err.Error(), "collector collector.test:7946") {
		t.Fatalf("send while resolving: %v", err)
	}
	release <- errors.New("lookup collector.test: no such host")
	testutil.Until(t, 5*time.Second, func() bool {
		err = s.Send([]byte("x"))
		return !errors.Is(err, ErrResolving)
	}, "the failed resolution reported")
	if !strings.Contains(fmt.Sprint(err), "collector collector.test:7946: lookup collector.test: no such host") {
		t.Fatalf("failed resolution reported as %v", err)
	}
	// The next send starts another attempt, and says why the last one failed.
	err = s.Send([]byte("x"))
	if !errors.Is(err, ErrResolving) || !strings.Contains(err.Error(), "no such host") {
		t.Fatalf("send after a failed resolution: %v", err)
	}
	<-dials
	release <- nil
	testutil.Eventually(t, 5*time.Second, func() (any, bool) { v := s.Send([]byte("late")); return v, v == nil }, "connected")
	if got := read(t, pc); got != "late" {
		t.Errorf("received %q", got)
	}
	if n := s.Errors.Load(); n < 3 {
		t.Errorf("%d errors counted", n)
	}
}

// Every collector gets the same bytes, each over its own socket.
func TestMultiSender(t *testing.T) {
	a, b := listen(t), listen(t)
	m := NewMultiSender([]string{a.LocalAddr().String(), b.LocalAddr().String()})
	defer m.Close()
	for _, msg := range []string{"one", "two"} {
		if err := m.Send([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if ga, gb := read(t, a), read(t, b); ga != msg || gb != msg {
			t.Errorf("got %q and %q, want %q", ga, gb, msg)
		}
	}
	if m.Senders[0].conn.LocalAddr().String() == m.Senders[1].conn.LocalAddr().String() {
		t.Error("one socket for two collectors")
	}
}

// A closed port and a name that takes forever to resolve do not stop or delay the collector
// after them.
func TestMultiSenderFailureIsolated(t *testing.T) {
	live := listen(t)
	closed := closedPort(t)
	block := make(chan struct{})
	defer close(block)
	stuck := &UDPSender{Addr: "stuck.test:7946", dial: func(context.Context, string, string) (net.Conn, error) {
		<-block
		return nil, errors.New("never")
	}}
	m := &MultiSender{Senders: []*UDPSender{{Addr: closed}, stuck, {Addr: live.LocalAddr().String()}}}
	defer m.Close()
	refused := false
	for i := range 20 {
		msg := fmt.Sprint("report ", i)
		err := m.Send([]byte(msg))
		var fe *FanoutError
		if !errors.As(err, &fe) || fe.Delivered+len(fe.Failed) != 3 || fe.Delivered < 1 {
			t.Fatalf("send %d: %v", i, err)
		}
		if !errors.Is(err, ErrResolving) {
			t.Errorf("send %d: %v lacks the stuck name", i, err)
		}
		refused = refused || errors.Is(err, syscall.ECONNREFUSED)
		if got := read(t, live); got != msg {
			t.Fatalf("live collector got %q, want %q", got, msg)
		}
		if refused && i > 2 {
			break
		}
	}
	if !refused {
		t.Error("the closed port never refused")
	}
	if n := m.Senders[2].Errors.Load(); n != 0 {
		t.Errorf("live collector: %d errors", n)
	}
}

// listen is a UDP listener on loopback, closed at the end of the test.
func listen(t *testing.T) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// closedPort is a loopback UDP address nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

// read returns the next datagram on pc, failing the test after 5 s.
func read(t *testing.T, pc net.PacketConn) string {
	t.Helper()
	buf := make([]byte, 2048)
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatalf("read from %s: %v", pc.LocalAddr(), err)
	}
	return string(buf[:n])
}

// sendUntilError sends until s fails: the port-unreachable answer to one datagram is the
// error of a later send.
func sendUntilError(t *testing.T, s *UDPSender) error {
	t.Helper()
	for range 10 {
		if err := s.Send([]byte("x")); err != nil {
			return err
		}
	}
	t.Fatal("10 sends to a closed port without an error")
	return nil
}
