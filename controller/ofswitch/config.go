package ofswitch

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"flowweight/controller/ofwire"
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
	DefaultProbeTimeout     = 2 * time.Second
	// DefaultMaxPacketInBytes bounds a PACKET_IN body: a full 1500-byte Ethernet frame
	// with its OXM match fits; the controller only needs ARP.
	DefaultMaxPacketInBytes   = 2048
	DefaultMaxMultipartBytes  = 4 << 20
	DefaultMaxMultipartParts  = 1024
	DefaultWriteQueueMessages = 1024
	DefaultWriteQueueBytes    = 4 << 20
	DefaultMaxHandshakes      = 64
	DefaultMaxSwitches        = 256
	// DefaultMaxBindingsPerCertificate is how many datapath ids one certificate may stay
	// bound to: the bridges of one host (Open vSwitch presents one certificate for all).
	DefaultMaxBindingsPerCertificate = 8
	// DefaultBindingIdleTimeout is how long a bound datapath must have been away before its
	// binding may lapse to make room in a full table.
	DefaultBindingIdleTimeout = time.Hour
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
	// ProbeTimeout bounds the liveness probe (an ECHO_REQUEST) of an established session
	// when another connection claims its datapath id. Default 2s.
	ProbeTimeout time.Duration
	// MaxPacketInBytes is the largest PACKET_IN body kept; larger ones are discarded
	// unread and counted. Default 2048.
	MaxPacketInBytes int
	// MaxMultipartBytes and MaxMultipartParts bound one multipart reply unless the call
	// gives its own Limit. Defaults 4 MiB and 1024 parts.
	MaxMultipartBytes int
	MaxMultipartParts int
	// WriteQueueMessages and WriteQueueBytes bound what waits to be written to one switch.
	// Our own requests wait for room; replies the switch provokes (ECHO_REPLY) get a quarter
	// of each on top, and a switch that makes us owe more than that without reading is
	// closed with ErrPeerNotReading. Defaults 1024 messages and 4 MiB.
	WriteQueueMessages int
	WriteQueueBytes    int
	// MaxHandshakes bounds connections in HELLO/FEATURES at once; more are closed at
	// accept. Default 64.
	MaxHandshakes int
	// MaxHandshakesPerSource is one source's share of MaxHandshakes (a source is an IPv4
	// address, or an IPv6 /64). It binds only when the table is full: then a connection from
	// a source under its share closes the oldest handshake of the source holding the most, if
	// that one is over its share, so one host's idle connections cannot keep other hosts'
	// switches out, while one host's many bridges still connect at once. When no source is
	// over its share, a newcomer takes the slot of the oldest handshake once it has idled
	// past staleHandshake (250 ms). Unix-socket peers have only MaxHandshakes. Default
	// MaxHandshakes/8, at least 1 (8 of the default 64); at most MaxHandshakes.
	MaxHandshakesPerSource int
	// MaxSwitches bounds connected datapaths; further datapath ids are refused. Default 256.
	// It also sizes the table of first-claim certificate bindings: 4×MaxSwitches.
	MaxSwitches int
	// MaxBindingsPerCertificate bounds the datapath ids one certificate identity stays bound
	// to (first-claim binding, without CertNamesDatapath): its next new id replaces its own
	// binding seen longest ago that is not connected, so one certificate cannot fill the
	// table. Default 8, and never more than MaxSwitches.
	MaxBindingsPerCertificate int
	// BindingIdleTimeout: when the binding table is full, a binding whose datapath has not
	// been connected for this long lapses to make room for a new one, the least recently
	// seen first; a connected switch's binding never lapses. Default 1h.
	BindingIdleTimeout time.Duration
	// CertNamesDatapath, with TLS client certificates, requires each switch's certificate to
	// name the datapath id it claims: its subject CN, or one of its DNS SANs, is the id as
	// 16 hex digits (e.g. "0000feedface0001", or "dpid:0000feedface0001" as the CN).
	// One Open vSwitch certificate serves all bridges of a host: list each bridge's id as a
	// DNS SAN. No binding is kept then: the certificate is the binding. Without this option,
	// a datapath id is bound to the first certificate identity that claims it, within the
	// bounds of MaxBindingsPerCertificate and BindingIdleTimeout.
	CertNamesDatapath bool
	// Logger receives session events and rate-limited fault lines. Default slog.Default().
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
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	setInt := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	setInt(&c.MaxPacketInBytes, DefaultMaxPacketInBytes)
	setInt(&c.MaxMultipartBytes, DefaultMaxMultipartBytes)
	setInt(&c.MaxMultipartParts, DefaultMaxMultipartParts)
	setInt(&c.WriteQueueMessages, DefaultWriteQueueMessages)
	setInt(&c.WriteQueueBytes, DefaultWriteQueueBytes)
	setInt(&c.MaxHandshakes, DefaultMaxHandshakes)
	setInt(&c.MaxSwitches, DefaultMaxSwitches)
	setInt(&c.MaxBindingsPerCertificate, DefaultMaxBindingsPerCertificate)
	if c.BindingIdleTimeout == 0 {
		c.BindingIdleTimeout = DefaultBindingIdleTimeout
	}
	if c.MaxHandshakesPerSource == 0 {
		c.MaxHandshakesPerSource = max(1, c.MaxHandshakes/8)
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
	pos("ProbeTimeout", c.ProbeTimeout)
	atLeast := func(name string, v, lo int, why string) {
		if v < lo {
			errs = append(errs, fmt.Errorf("ofswitch config: %s must be >= %d (%s), got %d", name, lo, why, v))
		}
	}
	atLeast("MaxPacketInBytes", c.MaxPacketInBytes, 20, "the fixed PACKET_IN fields and an empty match")
	atLeast("MaxMultipartBytes", c.MaxMultipartBytes, 1, "one byte")
	atLeast("MaxMultipartParts", c.MaxMultipartParts, 1, "one reply part")
	atLeast("WriteQueueMessages", c.WriteQueueMessages, 4, "a quarter of it is the reply budget")
	atLeast("WriteQueueBytes", c.WriteQueueBytes, 4*ofwire.MaxMessageLen, "the reply budget, a quarter, must hold one largest message")
	atLeast("MaxHandshakes", c.MaxHandshakes, 1, "one connection")
	atLeast("MaxHandshakesPerSource", c.MaxHandshakesPerSource, 1, "one connection")
	if c.MaxHandshakesPerSource > c.MaxHandshakes {
		errs = append(errs, fmt.Errorf("ofswitch config: MaxHandshakesPerSource (%d) must be <= MaxHandshakes (%d)", c.MaxHandshakesPerSource, c.MaxHandshakes))
	}
	atLeast("MaxSwitches", c.MaxSwitches, 1, "one switch")
	atLeast("MaxBindingsPerCertificate", c.MaxBindingsPerCertificate, 1, "one datapath id")
	pos("BindingIdleTimeout", c.BindingIdleTimeout)
	if c.CertNamesDatapath && c.TLS == nil {
		// Without TLS no switch could ever present a certificate, so none could connect.
		errs = append(errs, errors.New("ofswitch config: CertNamesDatapath needs TLS with verified client certificates (ClientCAs and RequireAndVerifyClientCert)"))
	}
	if c.PacketInQueue < 0 {
		errs = append(errs, fmt.Errorf("ofswitch config: PacketInQueue must be >= 0, got %d", c.PacketInQueue))
	}
	return errors.Join(errs...)
}
