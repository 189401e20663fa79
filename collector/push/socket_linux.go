package push

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"flowweight/collector/report"
)

// defaultReadBatch: one datagram per read.
const defaultReadBatch = 1

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

type batch struct{ buf []byte }

// read reads and handles one datagram.
func (r *reader) read() error {
	if r.batch.buf == nil {
		// One byte more than the protocol allows, so an oversized datagram is
		// seen as such instead of silently truncated to a valid-looking size.
		r.batch.buf = make([]byte, report.MaxDatagram+1)
	}
	n, from, err := r.conn.ReadFromUDPAddrPort(r.batch.buf)
	if err != nil {
		return err
	}
	r.handle(r.batch.buf[:n], netip.AddrPortFrom(from.Addr().Unmap(), from.Port()))
	return nil
}
