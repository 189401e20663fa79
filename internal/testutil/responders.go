package testutil

import (
	"net"
	"testing"
)

// TCPServer listens on 127.0.0.1 and Serves every connection: a service for health checks
// to reach. It stops when the test ends.
func TCPServer(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, ln, serve)
	return ln.Addr().String()
}

// Serve accepts connections on ln until the test ends (it closes ln then) and runs serve on
// each in its own goroutine, closing the connection when serve returns (nil serve: closed at
// once).
func Serve(t testing.TB, ln net.Listener, serve func(net.Conn)) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if serve != nil {
					serve(c)
				}
			}()
		}
	}()
}

// UDPResponder answers every datagram with reply(request) from 127.0.0.1; reply returning
// nil answers nothing (a service that has hung). It stops when the test ends.
func UDPResponder(t testing.TB, reply func([]byte) []byte) string {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := reply(buf[:n]); out != nil {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}
