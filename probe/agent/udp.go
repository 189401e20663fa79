package agent

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
)

// ResolveTimeout bounds one background resolution and connect of a collector given by name.
const ResolveTimeout = 10 * time.Second

// WriteTimeout bounds one write, so that a full socket buffer cannot hold up the collectors
// after this one. A UDP write does not wait for the network; this is only a backstop.
const WriteTimeout = 100 * time.Millisecond

// ErrResolving is the error of a send to a collector whose name is still being resolved.
var ErrResolving = errors.New("not connected yet: resolving the name")

// SendError is the failure of a send to one collector.
type SendError struct {
	Addr string // the collector, as configured
	Err  error
}

func (e *SendError) Error() string { return "collector " + e.Addr + ": " + e.Err.Error() }

func (e *SendError) Unwrap() error { return e.Err }

// UDPSender sends datagrams to one address over its own connected UDP socket. It connects
// lazily and reconnects (resolving the name again) after a failure, so a collector that moved
// to a new address is found again. An IP address is connected at once, which takes no I/O; a
// name is resolved in the background, so a slow or failing DNS server never makes Send wait
// (sends fail with ErrResolving until the name is resolved). Errors are *SendError.
//
// Send and Close must not be called concurrently; the counters may be read at any time.
type UDPSender struct {
	Addr string

	Sent   atomic.Uint64 // datagrams written without error
	Errors atomic.Uint64 // sends that failed, a failed resolution included

	conn    net.Conn
	pending chan dialResult // a background connect in flight; nil if none
	lastErr error           // the last background connect's failure, reported until the next one ends
	// dial connects; default net.Dialer.DialContext. Tests replace it.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

type dialResult struct {
	conn net.Conn
	err  error
}

// Connect starts connecting, in the background for a name, so that the first Send finds the
// socket ready. Calling it is optional.
func (s *UDPSender) Connect() {
	if s.conn == nil {
		_ = s.connect()
	}
}

// Send implements Sender.
func (s *UDPSender) Send(b []byte) error {
	if s.conn == nil {
		if err := s.connect(); err != nil {
			s.Errors.Add(1)
			return &SendError{Addr: s.Addr, Err: err}
		}
	}
	err := s.conn.SetWriteDeadline(time.Now().Add(WriteTimeout))
	if err == nil {
		_, err = s.conn.Write(b)
	}
	if err != nil {
		s.fail()
		return &SendError{Addr: s.Addr, Err: err}
	}
	s.Sent.Add(1)
	return nil
}

// fail drops the socket after a failed write and starts connecting again: at once for an
// address, in the background for a name.
func (s *UDPSender) fail() {
	s.Errors.Add(1)
	s.conn.Close()
	s.conn = nil
	_ = s.connect()
}

// connect sets s.conn, or returns why it cannot yet.
func (s *UDPSender) connect() error {
	if s.pending == nil {
		if _, err := netip.ParseAddrPort(s.Addr); err == nil {
			c, err := s.dialer()(context.Background(), "udp", s.Addr)
			if err != nil {
				return err
			}
			s.conn = c
			return nil
		}
		ch := make(chan dialResult, 1)
		s.pending = ch
		dial, addr := s.dialer(), s.Addr
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
			defer cancel()
			c, err := dial(ctx, "udp", addr)
			ch <- dialResult{c, err}
		}()
	}
	select {
	case r := <-s.pending:
		s.pending = nil
		if r.err != nil {
			s.lastErr = r.err
			return r.err // the next send starts another attempt
		}
		s.conn, s.lastErr = r.conn, nil
		return nil
	default:
		if s.lastErr != nil {
			return fmt.Errorf("%w (the last attempt failed: %w)", ErrResolving, s.lastErr)
		}
		return ErrResolving
	}
}

func (s *UDPSender) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.dial != nil {
		return s.dial
	}
	return (&net.Dialer{}).DialContext
}

// Close releases the socket. A background connect still in flight closes its socket when it
// ends.
func (s *UDPSender) Close() error {
	if ch := s.pending; ch != nil {
		s.pending = nil
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
	}
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// MultiSender sends every datagram to each of its collectors in turn, the same bytes to each,
// over each one's own socket. A collector that fails (port unreachable, a name that does not
// resolve) costs the others nothing: UDPSender never waits for the network.
type MultiSender struct {
	Senders []*UDPSender
}

// NewMultiSender returns a MultiSender for addrs and starts connecting to each.
func NewMultiSender(addrs []string) *MultiSender {
	m := &MultiSender{Senders: make([]*UDPSender, len(addrs))}
	for i, a := range addrs {
		m.Senders[i] = &UDPSender{Addr: a}
		m.Senders[i].Connect()
	}
	return m
}

// FanoutError is the error of a MultiSender.Send that failed for some collector: one
// *SendError each in Failed, and how many collectors took the datagram.
type FanoutError struct {
	Failed    []*SendError
	Delivered int
}

func (e *FanoutError) Error() string {
	msgs := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		msgs[i] = f.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap gives the failures to errors.Is and errors.As.
func (e *FanoutError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f
	}
	return errs
}

// Send implements Sender: it sends b to every collector and returns nil, or a *FanoutError
// when any failed.
func (m *MultiSender) Send(b []byte) error {
	var fe *FanoutError
	for i, s := range m.Senders {
		err := s.Send(b)
		if err == nil {
			continue
		}
		if fe == nil {
			fe = &FanoutError{Delivered: i}
		}
		fe.Failed = append(fe.Failed, err.(*SendError))
	}
	if fe == nil {
		return nil
	}
	fe.Delivered = len(m.Senders) - len(fe.Failed)
	return fe
}

// Close closes every socket.
func (m *MultiSender) Close() error {
	var errs []error
	for _, s := range m.Senders {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
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
