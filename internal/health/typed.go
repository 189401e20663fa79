package health

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// Prober is one check of any type: *Checker (http, https), *TCPChecker and *UDPChecker. A
// caller that checks by configured type holds one of these.
type Prober interface {
	Check(ctx context.Context) Result
}

// TCPSpec is a tcp check: the port accepts a connection within Timeout. It is the cheapest
// check and says only that something listens, as HAProxy's plain "check" does.
type TCPSpec struct {
	Addr    string // host:port
	Timeout time.Duration
}

// TCPChecker checks that one address accepts TCP connections.
type TCPChecker struct {
	Addr    string
	Timeout time.Duration
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	now     func() time.Time
}

// NewTCP returns a TCPChecker for s.
func NewTCP(s TCPSpec) (*TCPChecker, error) {
	if err := checkAddr(s.Addr); err != nil {
		return nil, err
	}
	if s.Timeout <= 0 {
		return nil, fmt.Errorf("health.timeout %v: want > 0", s.Timeout)
	}
	return &TCPChecker{Addr: s.Addr, Timeout: s.Timeout, dial: (&net.Dialer{KeepAlive: -1}).DialContext, now: time.Now}, nil
}

// Check connects and closes at once; it returns within Timeout (or sooner if ctx ends).
func (c *TCPChecker) Check(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	start := c.now()
	conn, err := c.dial(ctx, "tcp", c.Addr)
	if err != nil {
		return fail(0, c.now().Sub(start), "tcp connect "+c.Addr+": "+cause(err))
	}
	lat := c.now().Sub(start)
	conn.Close()
	return Result{OK: true, Latency: lat}
}

// MaxPayload bounds a udp check's request and expected answer: the largest payload of one
// IPv4 UDP datagram.
const MaxPayload = 65507

// UDPSpec is a udp check: Send goes out in one datagram, and the first answer must hold
// Expect within Timeout. UDP has no connection to accept, so only an answer proves that the
// service is there; the expected bytes keep any answer (an error reply) from passing.
type UDPSpec struct {
	Addr    string // host:port
	Timeout time.Duration
	Send    []byte // the request, 1 to MaxPayload bytes
	Expect  []byte // bytes the answer must contain, 1 to MaxPayload
}

// UDPChecker checks one UDP service by request and expected answer.
type UDPChecker struct {
	Addr    string
	Timeout time.Duration
	Send    []byte
	Expect  []byte
	now     func() time.Time
}

// NewUDP returns a UDPChecker for s.
func NewUDP(s UDPSpec) (*UDPChecker, error) {
	if err := checkAddr(s.Addr); err != nil {
		return nil, err
	}
	if s.Timeout <= 0 {
		return nil, fmt.Errorf("health.timeout %v: want > 0", s.Timeout)
	}
	if len(s.Send) == 0 || len(s.Send) > MaxPayload {
		return nil, fmt.Errorf("health.send: %d bytes, want 1-%d", len(s.Send), MaxPayload)
	}
	if len(s.Expect) == 0 || len(s.Expect) > MaxPayload {
		return nil, fmt.Errorf("health.expect: %d bytes, want 1-%d", len(s.Expect), MaxPayload)
	}
	return &UDPChecker{Addr: s.Addr, Timeout: s.Timeout, Send: bytes.Clone(s.Send), Expect: bytes.Clone(s.Expect), now: time.Now}, nil
}

// Check sends the request from a new socket and judges the first answer; it returns within
// Timeout (or sooner if ctx ends). The socket is connected, so the kernel hands it only
// datagrams from the service's address, and an ICMP port unreachable for the request comes
// back as "connection refused": a closed port fails at once, with that reason, instead of
// at the timeout. A new socket (a new source port) for each check means an answer that
// arrives after its check timed out cannot pass the next one.
func (c *UDPChecker) Check(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	start := c.now()
	failf := func(format string, args ...any) Result {
		return fail(0, c.now().Sub(start), "udp "+c.Addr+": "+fmt.Sprintf(format, args...))
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", c.Addr)
	if err != nil {
		return failf("%s", cause(err))
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(c.Send); err != nil {
		return failf("send: %s", udpCause(err))
	}
	buf := make([]byte, MaxPayload+1)
	n, err := conn.Read(buf)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return failf("%s", ctx.Err())
		}
		return failf("no answer: %s", udpCause(err))
	}
	if !bytes.Contains(buf[:n], c.Expect) {
		return failf("answer of %d bytes lacks %q", n, c.Expect)
	}
	return Result{OK: true, Latency: c.now().Sub(start)}
}

// udpCause is cause, naming what a refused UDP request means.
func udpCause(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection refused (ICMP port unreachable: nothing listens on the port)"
	}
	return cause(err)
}

func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("health address %q: %w", addr, err)
	}
	if host == "" || port == "" {
		return fmt.Errorf("health address %q: want host:port", addr)
	}
	return nil
}

// ParseCA reads a PEM bundle of CA certificates for Spec.RootCAs. It refuses a bundle with
// no certificate, and any block that is not a valid certificate, naming its position, so a
// wrong file (a key, a truncated copy) is found when the configuration loads rather than as
// a failing check.
func ParseCA(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			if len(bytes.TrimSpace(rest)) > 0 && n == 0 {
				return nil, errors.New("not PEM: want one or more \"-----BEGIN CERTIFICATE-----\" blocks")
			}
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, b.Type)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, errors.New("no certificate: want one or more \"-----BEGIN CERTIFICATE-----\" blocks")
	}
	return pool, nil
}

// ParseHex reads a udp payload written in hex: pairs of hex digits, upper or lower case,
// optionally separated by white space or colons ("00 01 ab", "0001AB", "de:ad"). A byte's two
// digits must stand together, so a misplaced separator is found rather than re-paired.
// Errors name the offset of the first bad character.
func ParseHex(s string) ([]byte, error) {
	out := make([]byte, 0, len(s)/2)
	for i := 0; i < len(s); {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ':' {
			i++
			continue
		}
		hi, ok := unhex(c)
		if !ok {
			return nil, fmt.Errorf("%q at offset %d is not a hex digit", rune(c), i)
		}
		if i+1 >= len(s) {
			return nil, fmt.Errorf("offset %d: a lone hex digit %q; a byte is two digits", i, rune(c))
		}
		lo, ok := unhex(s[i+1])
		if !ok {
			return nil, fmt.Errorf("offset %d: %q follows the hex digit %q; a byte is two digits together", i+1, rune(s[i+1]), rune(c))
		}
		out = append(out, hi<<4|lo)
		i += 2
	}
	if len(out) == 0 {
		return nil, errors.New("no hex digits")
	}
	return out, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
