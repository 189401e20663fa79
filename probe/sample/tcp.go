package sample

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// PortSet is a set of TCP ports, a bitmap so that a lookup per socket line costs nothing.
type PortSet struct{ bits [65536 / 64]uint64 }

// NewPortSet returns the set of ports.
func NewPortSet(ports ...uint16) *PortSet {
	s := &PortSet{}
	for _, p := range ports {
		s.bits[p/64] |= 1 << (p % 64)
	}
	return s
}

// Has reports whether p is in the set.
func (s *PortSet) Has(p uint16) bool { return s.bits[p/64]&(1<<(p%64)) != 0 }

// tcpEstablished and tcpCloseWait are the kernel's TCP_ESTABLISHED and TCP_CLOSE_WAIT states,
// as printed in /proc/net/tcp and reported by sock_diag.
const (
	tcpEstablished = 0x01
	tcpCloseWait   = 0x08
)

// StatesInFlight are the states the in-flight count counts: ESTABLISHED and CLOSE_WAIT (the
// client has closed, the service has not yet: it still holds the connection). They are what
// the kernel's running count, /proc/net/snmp CurrEstab, counts on Linux 6.10 and later
// (RFC 1213's tcpCurrEstab), so the two can be compared (InFlight).
const StatesInFlight = 1<<tcpEstablished | 1<<tcpCloseWait

// CountEstablished counts the sockets in ESTABLISHED state whose local port is in ports, in
// the text of /proc/net/tcp or /proc/net/tcp6 (the formats differ only in address width).
// The header line is skipped; any other line that is not a socket line is an error naming its
// number. It works on bytes without allocating, because a busy server's table is large and is
// read every interval.
func CountEstablished(data []byte, ports *PortSet) (uint32, error) {
	return CountStates(data, ports, 1<<tcpEstablished)
}

// CountStates is CountEstablished for the sockets in any of states (bits 1<<state).
func CountStates(data []byte, ports *PortSet, states uint32) (uint32, error) {
	var n uint32
	for lineNo := 1; len(data) > 0; lineNo++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		sl, rest := field(line)
		if len(sl) == 0 || bytes.Equal(sl, []byte("sl")) {
			continue // blank line or header
		}
		local, rest := field(rest)
		_, rest = field(rest) // remote address
		st, _ := field(rest)
		if sl[len(sl)-1] != ':' || len(st) != 2 {
			return n, fmt.Errorf("line %d: not a socket line", lineNo)
		}
		c := bytes.LastIndexByte(local, ':')
		if c < 0 || len(local)-c-1 != 4 {
			return n, fmt.Errorf("line %d: local address %q has no 4-digit port", lineNo, truncate(string(local)))
		}
		port, ok1 := parseHex(local[c+1:])
		state, ok2 := parseHex(st)
		if !ok1 || !ok2 {
			return n, fmt.Errorf("line %d: bad hex in port or state", lineNo)
		}
		if state < 32 && states&(1<<state) != 0 && ports.Has(uint16(port)) {
			n++
		}
	}
	return n, nil
}

// field returns the first space-separated field of b and what follows it.
func field(b []byte) (f, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[i:j], b[j:]
}

func parseHex(b []byte) (uint32, bool) {
	if len(b) == 0 || len(b) > 8 {
		return 0, false
	}
	var v uint32
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint32(c-'0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint32(c-'A'+10)
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint32(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// Conns counts established TCP connections on the service ports, IPv4 and IPv6. It sees the
// network namespace the probe runs in.
//
// With Diag set (NewConns) it asks the kernel through sock_diag and reads the /proc tables
// only when that fails; after diagFailLimit failures in a row, or at once when the kernel or
// the probe's privileges rule netlink out, it stays with /proc. Values.ConnsVia says which
// was used and why.
type Conns struct {
	Ports *PortSet
	// States is the set of TCP states counted by the /proc way (bits 1<<state); 0 counts
	// ESTABLISHED only. Set Diag's States alike (NewInFlightConns does both).
	States uint32
	// Diag counts through netlink; nil reads only the /proc tables.
	Diag ConnCounter
	// Tables default to /proc/net/tcp (skipped when /proc/net/sockstat counts no "TCP"
	// socket) and /proc/net/tcp6 (skipped when /proc/net/sockstat6 counts no "TCP6" socket,
	// or is missing because IPv6 is disabled). Reading a table costs a walk of the kernel's
	// whole socket hash; reading a sockstat file costs nothing, so an IPv4-only host does not
	// pay for the IPv6 table.
	Tables []Table
	// Read defaults to reading into a buffer kept between samples.
	Read ReadFileFunc
	// MaxAge reuses a count younger than it instead of counting again; 0 counts at every
	// sample. Either way of counting walks every bucket of the kernel's TCP hash, however
	// few sockets it holds (262,144 buckets on a machine with a few GB), and that walk was
	// three quarters of the probe's CPU at a 1 s interval (docs/benchmarks.md); snmpd keeps
	// its tcpConnTable for about 5 s for the same reason. Only a successful count is reused.
	MaxAge time.Duration
	// Now defaults to time.Now; tests inject a clock.
	Now func() time.Time

	buf       []byte
	diagFails int
	diagErr   error     // why Diag is no longer used, once it is not
	last      Values    // the last successful count, reused while younger than MaxAge
	lastAt    time.Time // when last was counted; zero: no count yet
}

// ConnCounter counts established TCP sockets on ports (SockDiag).
type ConnCounter interface {
	Count(ports *PortSet) (uint32, error)
}

// NewConns counts the ports' connections through sock_diag, with /proc as the fallback.
func NewConns(ports *PortSet) *Conns { return &Conns{Ports: ports, Diag: &SockDiag{}} }

// NewInFlightConns is NewConns counting the states of StatesInFlight: the exact count the
// in-flight reports are calibrated by (InFlight).
func NewInFlightConns(ports *PortSet) *Conns {
	return &Conns{Ports: ports, States: StatesInFlight, Diag: &SockDiag{States: StatesInFlight}}
}

// diagFailLimit is how many sock_diag failures in a row make Conns keep to /proc.
const diagFailLimit = 3

// Ways of counting, in Values.ConnsVia.
const (
	ConnsViaNetlink = "sock_diag"
	ConnsViaProc    = "proc"
)

// Table is one socket table and the sockstat line that says whether it can hold any socket.
type Table struct {
	File string
	// Sockstat and Proto name the sockstat file and its protocol line ("TCP", "TCP6"); empty
	// Sockstat: always read File.
	Sockstat, Proto string
}

// DefaultTables are the kernel's IPv4 and IPv6 TCP tables.
var DefaultTables = []Table{
	{File: "/proc/net/tcp", Sockstat: "/proc/net/sockstat", Proto: "TCP"},
	{File: "/proc/net/tcp6", Sockstat: "/proc/net/sockstat6", Proto: "TCP6"},
}

// Provides implements Provider.
func (c *Conns) Provides() Field { return FieldConns }

// Sample implements Sampler.
func (c *Conns) Sample(ctx context.Context) (Values, error) {
	if c.MaxAge <= 0 {
		return c.count()
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	t := now()
	if !c.lastAt.IsZero() && t.Sub(c.lastAt) < c.MaxAge && !t.Before(c.lastAt) {
		return c.last, nil
	}
	v, err := c.count()
	if err != nil {
		c.lastAt = time.Time{} // a failure is never hidden behind an older count
		return v, err
	}
	c.last, c.lastAt = v, t
	return v, nil
}

// count counts the connections now.
func (c *Conns) count() (Values, error) {
	if c.Diag != nil && c.diagErr == nil {
		n, err := c.Diag.Count(c.Ports)
		if err == nil {
			c.diagFails = 0
			return Values{Known: FieldConns, Conns: n, ConnsVia: ConnsViaNetlink}, nil
		}
		c.diagFails++
		if c.diagFails >= diagFailLimit || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) ||
			errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EAFNOSUPPORT) {
			c.diagErr = err
		}
		v, perr := c.sampleProc()
		v.ConnsVia = fmt.Sprintf("%s (sock_diag failed: %v)", ConnsViaProc, err)
		return v, perr
	}
	v, err := c.sampleProc()
	if c.diagErr != nil {
		v.ConnsVia = fmt.Sprintf("%s (sock_diag given up: %v)", ConnsViaProc, c.diagErr)
	}
	return v, err
}

func (c *Conns) sampleProc() (Values, error) {
	tables := c.Tables
	if tables == nil {
		tables = DefaultTables
	}
	var total uint32
	read := c.Read
	if read == nil {
		read = c.readReuse
	}
	for _, t := range tables {
		f := t.File
		if t.Sockstat != "" {
			st, err := orRead(c.Read)(t.Sockstat)
			if errors.Is(err, os.ErrNotExist) {
				continue // no such protocol (IPv6 disabled)
			}
			if err != nil {
				return Values{}, fmt.Errorf("connections: %w", err)
			}
			inuse, found, err := ParseSockstatInUse(st, t.Proto)
			switch {
			case err != nil:
				return Values{}, fmt.Errorf("connections: %s: %w", t.Sockstat, err)
			case found && inuse == 0:
				continue
			}
		}
		data, err := read(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Values{}, fmt.Errorf("connections: %w", err)
		}
		states := c.States
		if states == 0 {
			states = 1 << tcpEstablished
		}
		n, err := CountStates(data, c.Ports, states)
		if err != nil {
			return Values{}, fmt.Errorf("connections: %s: %w", f, err)
		}
		total += n
	}
	return Values{Known: FieldConns, Conns: total, ConnsVia: ConnsViaProc}, nil
}

// ParseSockstatInUse finds "PROTO: inuse N ..." in /proc/net/sockstat or sockstat6 and
// returns N, the number of sockets of that protocol in this network namespace.
func ParseSockstatInUse(data []byte, proto string) (n uint64, found bool, err error) {
	for line := range strings.Lines(string(data)) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != proto {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 || f[0] != "inuse" {
			return 0, true, fmt.Errorf("%s line %q has no inuse count", proto, truncate(strings.TrimSpace(line)))
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, true, fmt.Errorf("%s inuse %q is not a number", proto, truncate(f[1]))
		}
		return n, true, nil
	}
	return 0, false, nil
}

// readReuse reads name into c.buf, kept between samples, in as few read calls as possible.
//
// This matters more than it looks. The kernel generates /proc/net/tcp on each read call and
// returns at most one page of lines per call; a call that has to find its place again, and in
// particular the final call that only returns end-of-file, walks the whole established-socket
// hash (262144 buckets on the 24 GB lab machine). Measured there: os.ReadFile, which starts
// with 512-byte reads, cost about 8 ms per file; one large read 0.45 ms; one large read plus
// the end-of-file read 1.15 ms. So a read that returns clearly less than a page (less than
// procShortRead bytes) is taken as the end of the file: a page fills up before the kernel
// stops early, whatever the page size. Longer tables are read on until end-of-file. The
// result is valid until the next call.
func (c *Conns) readReuse(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if len(c.buf) < minReadBuf {
		c.buf = make([]byte, minReadBuf)
	}
	n := 0
	for {
		if n == len(c.buf) {
			c.buf = append(c.buf, make([]byte, len(c.buf))...) // double
		}
		m, err := f.Read(c.buf[n:])
		n += m
		switch {
		case errors.Is(err, io.EOF) || (err == nil && m == 0):
			return c.buf[:n], nil
		case err != nil:
			return nil, err
		case n < procShortRead:
			return c.buf[:n], nil
		}
	}
}

const (
	// minReadBuf holds a few hundred sockets' lines in one read.
	minReadBuf = 64 << 10
	// procShortRead: a first read shorter than this is the whole file. The smallest page is
	// 4096 bytes and a socket line is under 200 bytes, so the kernel only ever returns less
	// when it ran out of lines.
	procShortRead = 4096 - 512
)
