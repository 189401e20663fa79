package agentcheck

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults for Server's limits.
const (
	// DefaultMaxConns bounds connections served at once. HAProxy opens one per check and
	// server line; more than a handful at once means something other than HAProxy is
	// connecting, and those get closed without a reply.
	DefaultMaxConns = 16
	// DefaultTimeout bounds one connection: writing the reply and reading what HAProxy sent
	// with agent-send. HAProxy's own check timeout is agent-inter (default 2s).
	DefaultTimeout = 2 * time.Second
	// maxDiscard bounds how much input is read and thrown away per connection (HAProxy sends
	// only its agent-send string).
	maxDiscard = 64 << 10
)

// Stats counts what the server did; safe to read from another goroutine (for metrics).
type Stats struct {
	Served   atomic.Uint64 // connections that got a reply
	NoState  atomic.Uint64 // connections closed without reply: no report built yet
	Rejected atomic.Uint64 // connections closed at once: MaxConns were being served
	Errors   atomic.Uint64 // replies that could not be written
}

// Server answers each TCP connection with the latest Reply and closes it. Set fills the
// reply; Serve runs the listener. The zero value is ready to use.
type Server struct {
	MaxConns int           // connections served at once; default DefaultMaxConns
	Timeout  time.Duration // per connection; default DefaultTimeout
	Log      *slog.Logger  // default: discard

	Stats Stats

	reply atomic.Pointer[[]byte]
	state atomic.Pointer[Status]
}

// Set makes s the answer to every following connection. It never blocks, so the sampling
// loop can call it on every report.
func (srv *Server) Set(s Status) {
	b := []byte(Reply(s))
	srv.state.Store(&s)
	srv.reply.Store(&b)
}

// Status returns the status last Set, and false before the first Set.
func (srv *Server) Status() (Status, bool) {
	s := srv.state.Load()
	if s == nil {
		return Status{}, false
	}
	return *s, true
}

// Serve accepts connections on ln until ctx ends, then closes ln, waits for the connections
// being served (each bounded by Timeout) and returns nil. It returns an error when accepting
// fails for another reason than a passing lack of resources.
func (srv *Server) Serve(ctx context.Context, ln net.Listener) error {
	maxConns := srv.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	log := srv.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	slots := make(chan struct{}, maxConns)
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of file descriptors: wait a little instead of spinning.
				log.Warn("agent check accept failed, retrying", "err", err, "wait", backoff)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return nil
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			return err
		}
		backoff = 5 * time.Millisecond
		select {
		case slots <- struct{}{}:
		default:
			srv.Stats.Rejected.Add(1)
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			srv.serveConn(c, log)
		}()
	}
}

// serveConn writes the reply at once (HAProxy reads up to the first line end and needs send
// nothing), then half-closes and reads what the peer sent until it closes. Reading before
// the final close matters: closing a socket with unread input makes the kernel send a reset,
// which can destroy the reply before HAProxy has read it.
func (srv *Server) serveConn(c net.Conn, log *slog.Logger) {
	defer c.Close()
	timeout := srv.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c.SetDeadline(time.Now().Add(timeout))
	reply := srv.reply.Load()
	if reply == nil {
		srv.Stats.NoState.Add(1)
	} else if _, err := c.Write(*reply); err != nil {
		srv.Stats.Errors.Add(1)
		log.Debug("agent check reply not written", "remote", c.RemoteAddr().String(), "err", err)
		return
	} else {
		srv.Stats.Served.Add(1)
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, maxDiscard))
}
