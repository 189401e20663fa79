package main

import (
	"context"
	"errors"
	"net"
)

// maxDatagram bounds one request; a longer one is cut (a test sends a few bytes).
const maxDatagram = 512

// ServeUDP answers every datagram on pc with "NAME PAYLOAD" (the name, a space, the
// request's bytes) to its sender, until ctx ends: a UDP request-response service, so a
// client can tell which backend answered each datagram of one flow.
func (s *Server) ServeUDP(ctx context.Context, pc net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.requests.Add(1)
		reply := append([]byte(s.Name+" "), buf[:n]...)
		if _, err := pc.WriteTo(reply, from); err != nil && ctx.Err() == nil {
			return err
		}
	}
}
