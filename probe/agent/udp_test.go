package agent

import (
	"net"
	"strings"
	"testing"
)

func TestUDPSender(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
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
	n, _, err := pc.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "report" {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
}

// Nobody listening: the kernel's port-unreachable comes back as an error on a later send,
// which names the collector, and the sender reconnects afterwards.
func TestUDPSenderUnreachable(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	s := &UDPSender{Addr: addr}
	defer s.Close()
	var sendErr error
	for range 10 {
		if sendErr = s.Send([]byte("x")); sendErr != nil {
			break
		}
	}
	if sendErr == nil || !strings.Contains(sendErr.Error(), addr) || !strings.Contains(sendErr.Error(), "refused") {
		t.Fatalf("error %v", sendErr)
	}
	if s.conn != nil {
		t.Error("connection kept after an error")
	}
	if err := s.Send([]byte("x")); err != nil {
		t.Errorf("send after reconnect: %v", err)
	}
}

func TestNewBootNonce(t *testing.T) {
	if a, b := NewBootNonce(), NewBootNonce(); a == b {
		t.Errorf("two nonces equal: %x", a)
	}
}
