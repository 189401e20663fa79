//go:build !linux

package push

import (
	"net"
	"net/netip"

	"flowweight/internal/report"
)

// defaultReadBatch: one datagram per read where recvmmsg is not available.
const defaultReadBatch = 1

// listen binds one socket, which the readers share: only Linux spreads a
// port's datagrams over SO_REUSEPORT sockets by source. Reads are then one
// at a time, but each reader verifies its datagrams on a core of its own.
func listen(addr string, _ int) ([]*net.UDPConn, error) {
	if err := resolve(addr); err != nil {
		return nil, err
	}
	a, _ := net.ResolveUDPAddr("udp", addr)
	c, err := net.ListenUDP("udp", a)
	if err != nil {
		return nil, listenError(addr, err)
	}
	return []*net.UDPConn{c}, nil
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
	r.handle(r.batch.buf[:n], netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), r.s.cfg.Now())
	return nil
}
