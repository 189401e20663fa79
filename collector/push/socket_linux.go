package push

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"flowweight/internal/report"
)

// defaultReadBatch is how many datagrams a reader takes from the kernel in
// one recvmmsg call. The call's fixed cost (entering the kernel, the Go
// poller, the socket lock) is then paid once per batch instead of once per
// datagram; 64 datagrams of at most MaxDatagram+1 bytes are 33 KiB per reader.
const defaultReadBatch = 64

// listen binds n sockets to addr, with SO_REUSEPORT when n > 1 so that the
// kernel spreads datagrams over them by source address and port. One socket
// is bound without it, as net.ListenUDP would.
//
// SO_REUSEPORT lets any socket of the same user that sets it too bind the
// port and take a share of the datagrams (Linux refuses other users). So
// that a second controller started on the port by mistake fails at once,
// as it did with one socket, the port is first bound without the option
// (which fails if anyone holds it, and picks the port when addr has port
// 0), then released and bound again by the group.
func listen(addr string, n int) ([]*net.UDPConn, error) {
	if err := resolve(addr); err != nil {
		return nil, err
	}
	first, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, listenError(addr, err)
	}
	if n == 1 {
		return []*net.UDPConn{first.(*net.UDPConn)}, nil
	}
	host, _, _ := net.SplitHostPort(addr) // resolve checked it
	at := net.JoinHostPort(host, strconv.Itoa(first.LocalAddr().(*net.UDPAddr).Port))
	first.Close()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return os.NewSyscallError("setsockopt SO_REUSEPORT", serr)
	}}
	var conns []*net.UDPConn
	for len(conns) < n {
		c, err := lc.ListenPacket(context.Background(), "udp", at)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, listenError(addr, err)
		}
		conns = append(conns, c.(*net.UDPConn))
	}
	return conns, nil
}

// batch is a reader's recvmmsg state: one buffer, iovec, address and
// header per datagram, and the function handed to RawConn.Read, made once
// so that reading allocates nothing.
type batch struct {
	rc    syscall.RawConn
	size  int // bytes per buffer
	bufs  []byte
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for either family
	hdrs  []unix.Mmsghdr
	recv  func(fd uintptr) bool
	n     int   // datagrams the last call returned
	err   error // its error
	zones map[uint32]string
}

func (b *batch) init(conn *net.UDPConn, n int) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	// One byte more than the protocol allows, so an oversized datagram is
	// seen as such instead of silently truncated to a valid-looking size.
	b.rc, b.size = rc, report.MaxDatagram+1
	b.bufs = make([]byte, n*b.size)
	b.iovs = make([]unix.Iovec, n)
	b.names = make([]unix.RawSockaddrInet6, n)
	b.hdrs = make([]unix.Mmsghdr, n)
	for i := range b.hdrs {
		b.iovs[i].Base = &b.bufs[i*b.size]
		b.iovs[i].SetLen(b.size)
		h := &b.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Namelen = unix.SizeofSockaddrInet6
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
	}
	b.recv = b.recvmmsg
	return nil
}

// recvmmsg is the RawConn.Read callback: false (wait until readable, then
// call again) only when the socket is empty.
func (b *batch) recvmmsg(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(len(b.hdrs)),
			unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			b.n, b.err = int(n), nil
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			b.n, b.err = 0, os.NewSyscallError("recvmmsg", e)
			return true
		}
	}
}

// read takes the datagrams waiting on the reader's socket, up to one
// batch, waiting for one if there is none, and handles them in order.
func (r *reader) read() error {
	b := &r.batch
	if b.hdrs == nil {
		if err := b.init(r.conn, r.s.readBatch); err != nil {
			return err
		}
	}
	if err := b.rc.Read(b.recv); err != nil {
		return err
	}
	if b.err != nil {
		return b.err
	}
	now := r.s.cfg.Now()
	for i := range b.n {
		h := &b.hdrs[i]
		from, ok := b.from(i)
		if ok {
			r.handle(b.bufs[i*b.size:i*b.size+int(h.Len)], from, now)
		} else {
			r.s.readErrors.Add(1) // not an IP source: cannot happen on a UDP socket
		}
		h.Hdr.Namelen = unix.SizeofSockaddrInet6 // the kernel wrote the length it used
	}
	return nil
}

// from is the source of datagram i, IPv4-mapped sources as IPv4.
func (b *batch) from(i int) (netip.AddrPort, bool) {
	sa := &b.names[i]
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), netPort(&sa4.Port)), true
	case unix.AF_INET6:
		a := netip.AddrFrom16(sa.Addr)
		if sa.Scope_id != 0 && !a.Is4In6() {
			a = a.WithZone(b.zone(sa.Scope_id))
		}
		return netip.AddrPortFrom(a.Unmap(), netPort(&sa.Port)), true
	}
	return netip.AddrPort{}, false
}

// netPort reads a port in network byte order.
func netPort(p *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// zone names an interface index as net does for a link-local source: its
// name, or the number when it has none. Cached, as only the few interfaces
// probes send from on a link-local address come here.
func (b *batch) zone(index uint32) string {
	if z, ok := b.zones[index]; ok {
		return z
	}
	z := strconv.FormatUint(uint64(index), 10)
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		z = ifi.Name
	}
	if b.zones == nil || len(b.zones) >= 64 {
		b.zones = map[uint32]string{}
	}
	b.zones[index] = z
	return z
}
