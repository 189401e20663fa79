package agent

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"time"
)

// UDPSender sends datagrams to one address. It connects lazily and reconnects (resolving the
// name again) after a failure, so a collector that moved to a new address is found again.
type UDPSender struct {
	Addr string
	conn net.Conn
}

// Send implements Sender.
func (s *UDPSender) Send(b []byte) error {
	if s.conn == nil {
		c, err := net.Dial("udp", s.Addr)
		if err != nil {
			return fmt.Errorf("collector %s: %w", s.Addr, err)
		}
		s.conn = c
	}
	if _, err := s.conn.Write(b); err != nil {
		s.conn.Close()
		s.conn = nil
		return fmt.Errorf("collector %s: %w", s.Addr, err)
	}
	return nil
}

// Close releases the socket.
func (s *UDPSender) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// RealClock is the wall clock.
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// After implements Clock.
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewBootNonce returns a random nonce from crypto/rand, as the push protocol requires.
func NewBootNonce() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+)
	return binary.BigEndian.Uint64(b[:])
}
