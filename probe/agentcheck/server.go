package agentcheck

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
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
	// DefaultIdleTimeout bounds each wait for the peer after the reply: HAProxy sends its
	// agent-send string at once and closes as soon as it has read the reply line, so a peer
	// silent this long is holding a slot, not checking.
	DefaultIdleTimeout = 500 * time.Millisecond
	// maxDiscard bounds how much input is read and thrown away per connection (HAProxy sends
	// only its agent-send string).
	maxDiscard = 64 << 10
)

// Stats counts what the server did; safe to read from another goroutine (for metrics).
type Stats struct {
	Served   atomic.Uint64 // connections that got a reply
	NoState  atomic.Uint64 // connections closed without reply: no report built yet
	Rejected atomic.Uint64 // connections closed at once: no slot for them (the three below, and MaxConns reached)
	// SourceLimited counts connections closed at once because their source held
	// MaxPerSource connections already; ReservedFull those closed because only the slots
	// reserved for Checkers were free. Both are part of Rejected.
	SourceLimited atomic.Uint64
	ReservedFull  atomic.Uint64
	Errors        atomic.Uint64 // replies that could not be written
}

// Server answers each TCP connection with the latest Reply and closes it. Set fills the
// reply; Serve runs the listener. The zero value is ready to use.
type Server struct {
	MaxConns int           // connections served at once; default DefaultMaxConns
	Timeout  time.Duration // per connection; default DefaultTimeout
	// IdleTimeout bounds each wait for the peer after the reply (at most Timeout); default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxPerSource bounds the connections of one source (an IPv4 address or an IPv6 /64)
	// that is not a checker; default DefaultMaxPerSource (at most MaxConns).
	MaxPerSource int
	// Checkers are the addresses HAProxy checks from (ParseCheckers). When set, Reserved of
	// the MaxConns slots are kept for them, and they are held to no per-source budget.
	Checkers []netip.Prefix
	// Reserved is how many slots only Checkers may use; default DefaultReserved when
	// Checkers are set (at most MaxConns-1), none otherwise.
	Reserved int
	Log      *slog.Logger // default: discard

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
	adm := srv.admission(maxConns)
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
		key, why := adm.admit(remoteAddr(c))
		if why != admitted {
			srv.Stats.Rejected.Add(1)
			switch why {
			case sourceBudget:
				srv.Stats.SourceLimited.Add(1)
			case reservedSlots:
				srv.Stats.ReservedFull.Add(1)
			}
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer adm.release(key)
			srv.serveConn(c, log)
		}()
	}
}

// admission builds the connection budget from the Server's fields and their defaults.
func (srv *Server) admission(maxConns int) *admission {
	a := &admission{maxConns: maxConns, maxPerSource: srv.MaxPerSource, checkers: srv.Checkers,
		perSource: map[netip.Addr]int{}}
	if a.maxPerSource <= 0 {
		a.maxPerSource = DefaultMaxPerSource
	}
	a.maxPerSource = min(a.maxPerSource, maxConns)
	if len(srv.Checkers) > 0 {
		a.reserved = srv.Reserved
		if a.reserved <= 0 {
			a.reserved = DefaultReserved
		}
		a.reserved = min(a.reserved, maxConns-1)
	}
	return a
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
	end := time.Now().Add(timeout)
	c.SetDeadline(end)
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
	idle := srv.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	// Each read waits at most idle: a peer that neither sends nor closes gives its slot back
	// soon, one that trickles bytes at most at end.
	buf := make([]byte, 4096)
	for left := maxDiscard; left > 0; {
		d := time.Now().Add(idle)
		if d.After(end) {
			d = end
		}
		c.SetReadDeadline(d)
		n, err := c.Read(buf[:min(len(buf), left)])
		left -= n
		if err != nil {
			return
		}
	}
}
