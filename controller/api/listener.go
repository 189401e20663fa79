package api

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// limitListener caps open connections. One over the cap gets a short 503 and is closed at
// once: queueing would let a client that opens connections and sends nothing hold the
// queue too, and closing is what a client can retry.
type limitListener struct {
	net.Listener
	slots   chan struct{}
	refused func()
}

func newLimitListener(ln net.Listener, max int, refused func()) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), refused: refused}
}

const tooManyBody = "too many open connections to the controller API (api.max_connections)\n"

var tooMany = []byte(fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"+
	"Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(tooManyBody), tooManyBody))

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
		}
		// A fresh socket's send buffer is empty: the write does not wait for the client;
		// the deadline only bounds the impossible case.
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write(tooMany)
		_ = c.Close()
		if l.refused != nil {
			l.refused()
		}
	}
}

// open reports how many connections hold a slot.
func (l *limitListener) open() int { return len(l.slots) }

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite lets net/http half-close after an error answer so the client reads it
// before the connection goes (the wrapper would hide *net.TCPConn's).
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
