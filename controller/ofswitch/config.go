package ofswitch

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults for Config. 6653 is the IANA port that Open vSwitch and Mininet use; older
// controllers used 6633 and we deliberately do not.
const (
	DefaultListen           = ":6653"
	DefaultEchoInterval     = 5 * time.Second
	DefaultEchoTimeout      = 15 * time.Second
	DefaultBarrierTimeout   = 5 * time.Second
	DefaultWriteTimeout     = 5 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultPacketInQueue    = 256
)

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	// Listen is the TCP address to accept switches on, or "unix:PATH" for a Unix socket
	// (ovs-vsctl set-controller BR unix:PATH). Default ":6653".
	Listen string
	// TLS, when set, makes the listener speak TLS (ovs-vsctl set-controller BR ssl:...).
	TLS *tls.Config
	// EchoInterval is how often we send our own ECHO_REQUEST. Default 5s.
	EchoInterval time.Duration
	// EchoTimeout closes a session that sent nothing at all for this long. Default 15s.
	EchoTimeout time.Duration
	// BarrierTimeout bounds the wait for a BARRIER_REPLY in Apply, and for each reply
	// part of a Multipart request. Default 5s.
	BarrierTimeout time.Duration
	// WriteTimeout bounds every write to a switch socket. Default 5s.
	WriteTimeout time.Duration
	// HandshakeTimeout bounds HELLO plus FEATURES after accept. Default 10s.
	HandshakeTimeout time.Duration
	// PacketInQueue is the number of packet-ins buffered per switch between the reader
	// and the Handler; when it is full, packet-ins are dropped and counted. Default 256.
	PacketInQueue int
	// Logger receives session events and every OFPT_ERROR. Default slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.EchoInterval == 0 {
		c.EchoInterval = DefaultEchoInterval
	}
	if c.EchoTimeout == 0 {
		c.EchoTimeout = DefaultEchoTimeout
	}
	if c.BarrierTimeout == 0 {
		c.BarrierTimeout = DefaultBarrierTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.PacketInQueue == 0 {
		c.PacketInQueue = DefaultPacketInQueue
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every field that is out of range, joined. It is called by NewServer
// after defaults are applied, so a zero Config is valid.
func (c Config) Validate() error {
	var errs []error
	pos := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("ofswitch config: %s must be > 0, got %v", name, d))
		}
	}
	pos("EchoInterval", c.EchoInterval)
	pos("EchoTimeout", c.EchoTimeout)
	pos("BarrierTimeout", c.BarrierTimeout)
	pos("WriteTimeout", c.WriteTimeout)
	pos("HandshakeTimeout", c.HandshakeTimeout)
	if c.EchoInterval > 0 && c.EchoTimeout > 0 && c.EchoTimeout <= c.EchoInterval {
		errs = append(errs, fmt.Errorf("ofswitch config: EchoTimeout (%v) must exceed EchoInterval (%v), or a healthy switch is closed between two echoes", c.EchoTimeout, c.EchoInterval))
	}
	if c.PacketInQueue < 0 {
		errs = append(errs, fmt.Errorf("ofswitch config: PacketInQueue must be >= 0, got %d", c.PacketInQueue))
	}
	return errors.Join(errs...)
}
