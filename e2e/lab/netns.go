package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// inNetns runs f on an OS thread switched into the network namespace at
// nsPath. Sockets f creates belong to that namespace and keep working from
// any goroutine afterwards, so tests can talk from inside a host without
// spawning tools such as ping or curl. If switching back fails the thread
// stays locked and the runtime discards it when the goroutine ends, so no
// other goroutine ever runs in the wrong namespace.
func inNetns(nsPath string, f func() error) error {
	if sysSetns < 0 {
		return errors.New("setns: unsupported architecture " + runtime.GOARCH)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", nsPath, err)
			return
		}
		ferr := f()
		if err := setns(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return // thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func setns(f *os.File) error {
	_, _, e := syscall.Syscall(uintptr(sysSetns), f.Fd(), syscall.CLONE_NEWNET, 0)
	if e != 0 {
		return e
	}
	return nil
}

// DialContext dials from inside the host's namespace.
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := inNetns("/run/netns/"+h.NS, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("host %s: dial %s %s: %w", h.Name, network, address, err)
	}
	return c, nil
}

// DialFromPort dials (tcp or udp) from inside the host's namespace with a chosen local port, so a test
// can draw a client's source ports at random instead of taking the kernel's near-sequential
// ones (whose hashes are not a uniform sample of a switch's select-group slots).
func (h *Host) DialFromPort(ctx context.Context, network, address string, port uint16) (net.Conn, error) {
	var c net.Conn
	err := inNetns("/run/netns/"+h.NS, func() error {
		var err error
		var la net.Addr = &net.TCPAddr{IP: h.Addr().AsSlice(), Port: int(port)}
		if strings.HasPrefix(network, "udp") {
			la = &net.UDPAddr{IP: h.Addr().AsSlice(), Port: int(port)}
		}
		d := net.Dialer{LocalAddr: la}
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("host %s: dial %s %s from port %d: %w", h.Name, network, address, port, err)
	}
	return c, nil
}

// DialFrom dials from inside the host's namespace from local, one of the host's addresses
// (a secondary one a test added), on a port the kernel picks.
func (h *Host) DialFrom(ctx context.Context, network, address string, local netip.Addr) (net.Conn, error) {
	var c net.Conn
	err := inNetns("/run/netns/"+h.NS, func() error {
		var la net.Addr = &net.TCPAddr{IP: local.AsSlice()}
		if network == "udp" || network == "udp4" {
			la = &net.UDPAddr{IP: local.AsSlice()}
		}
		var err error
		c, err = (&net.Dialer{LocalAddr: la}).DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("host %s: dial %s %s from %s: %w", h.Name, network, address, local, err)
	}
	return c, nil
}

// Listen opens a TCP listener inside the host's namespace.
func (h *Host) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := inNetns("/run/netns/"+h.NS, func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("host %s: listen %s %s: %w", h.Name, network, address, err)
	}
	return ln, nil
}

// HTTPClient returns a client whose connections start in the host's
// namespace, one new connection per request (keep-alive off): that is what
// exercises per-connection balancing.
func (h *Host) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:       h.DialContext,
			DisableKeepAlives: true,
			Proxy:             nil,
		},
	}
}

// Ping sends count ICMP echo requests from the host to dst, one per
// interval, and returns the round-trip times of the replies received.
// ping(8) is not needed (it is not installed on every lab machine).
func (h *Host) Ping(ctx context.Context, dst netip.Addr, count int, interval time.Duration) ([]time.Duration, error) {
	if !h.Addr().Is4() || !dst.Is4() {
		return nil, fmt.Errorf("host %s: ping %s: ICMPv4 echo only (from %s)", h.Name, dst, h.Addr())
	}
	var pc net.PacketConn
	err := inNetns("/run/netns/"+h.NS, func() error {
		var err error
		pc, err = net.ListenPacket("ip4:icmp", h.Addr().String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("host %s: icmp socket: %w", h.Name, err)
	}
	defer pc.Close()
	id := uint16(os.Getpid()) ^ uint16(time.Now().UnixNano())
	var rtts []time.Duration
	buf := make([]byte, 1500)
	for seq := range count {
		if err := ctx.Err(); err != nil {
			return rtts, err
		}
		sent := time.Now()
		msg := EchoRequest(id, uint16(seq), []byte("flowweight-lab"))
		if _, err := pc.WriteTo(msg, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			return rtts, fmt.Errorf("host %s: ping %s: %w", h.Name, dst, err)
		}
		deadline := sent.Add(interval)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = pc.SetReadDeadline(deadline)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				break // timeout: this one is lost
			}
			e, err := ParseEcho(buf[:n])
			if err != nil || e.Type != ICMPEchoReply || e.ID != id || e.Seq != uint16(seq) {
				continue
			}
			if a, ok := from.(*net.IPAddr); !ok || !a.IP.Equal(dst.AsSlice()) {
				continue
			}
			rtts = append(rtts, time.Since(sent))
			time.Sleep(time.Until(deadline))
			break
		}
	}
	return rtts, nil
}

// ICMP types used by Ping.
const (
	ICMPEchoReply   = 0
	ICMPEchoRequest = 8
)

// Echo is an ICMPv4 echo request or reply (RFC 792).
type Echo struct {
	Type, Code uint8
	ID, Seq    uint16
	Data       []byte
}

// EchoRequest encodes an ICMPv4 echo request with its checksum.
func EchoRequest(id, seq uint16, data []byte) []byte {
	b := make([]byte, 8+len(data))
	b[0] = ICMPEchoRequest
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], data)
	binary.BigEndian.PutUint16(b[2:], inetChecksum(b))
	return b
}

// ParseEcho decodes an ICMPv4 message (no IP header) of type echo request or
// reply, verifying the checksum.
func ParseEcho(b []byte) (Echo, error) {
	if len(b) < 8 {
		return Echo{}, fmt.Errorf("icmp: %d bytes, want at least 8", len(b))
	}
	if inetChecksum(b) != 0 {
		return Echo{}, fmt.Errorf("icmp: bad checksum %#04x", binary.BigEndian.Uint16(b[2:]))
	}
	if b[0] != ICMPEchoReply && b[0] != ICMPEchoRequest {
		return Echo{}, fmt.Errorf("icmp: type %d is not an echo", b[0])
	}
	return Echo{Type: b[0], Code: b[1], ID: binary.BigEndian.Uint16(b[4:]), Seq: binary.BigEndian.Uint16(b[6:]), Data: b[8:]}, nil
}

// inetChecksum is the RFC 1071 one's-complement sum; over a message that
// carries a correct checksum it yields 0.
func inetChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// AddAddr gives the host's interface one more address in its prefix (removed with the
// namespace), so one namespace can act as many clients (DialFrom, HTTPClientFrom).
func (h *Host) AddAddr(a netip.Addr) error {
	if !a.Is4() || !h.IP.Contains(a) {
		return fmt.Errorf("host %s: address %v: want an IPv4 address in %v", h.Name, a, h.IP.Masked())
	}
	p := netip.PrefixFrom(a, h.IP.Bits())
	if _, err := h.bridge.ovs.lab.run(nil, "ip", "-n", h.NS, "addr", "add", p.String(), "dev", HostIface); err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	return nil
}

// HTTPClientFrom is HTTPClient with every connection from the local address local: one
// client address of several on the host.
func (h *Host) HTTPClientFrom(local netip.Addr, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
				return h.DialFrom(ctx, network, address, local)
			},
			DisableKeepAlives: true,
			Proxy:             nil,
		},
	}
}
