package snmp

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/gosnmp/gosnmp"
)

// ErrTooLarge means an answer held more bytes than its bound: one varbind over
// MaxVarbindBytes, or a request's varbinds together over their Budget. Rows alone bound no
// memory: an agent can send one OctetString of nearly 64 KiB per varbind.
var ErrTooLarge = errors.New("answer too large")

// Byte bounds. Sizes count the text of a varbind's OID and its value (VarbindBytes), which is
// what the poller holds of it.
const (
	// MaxVarbindBytes bounds one varbind. The longest this package reads is a
	// tcpConnectionState row of two ipv6z addresses, about 210 bytes; every value it reads is
	// an INTEGER, a counter or a short OID.
	MaxVarbindBytes = 256
	// MaxProcessorWalkBytes bounds a hrProcessorTable walk: 2·MaxProcessors varbinds of 64
	// bytes (net-snmp's rows are about 35).
	MaxProcessorWalkBytes = 1 << 20
	// DefaultMaxWalkBytes is Target.MaxWalkBytes when 0: each TCP connection table walk.
	// 100,000 rows of IPv4-mapped addresses (about 110 bytes each) take 11 MB.
	DefaultMaxWalkBytes = 16 << 20
)

// Budget bounds what one request or walk may return.
type Budget struct {
	Varbinds int // at most this many varbinds (more: ErrTooManyRows)
	Bytes    int // at most this many bytes in all, counted by VarbindBytes (more: ErrTooLarge)
}

// VarbindBytes is what a varbind costs against a Budget: the length of its OID and of its
// value (bytes of an OctetString, text of an OID or IP address, 8 for a number).
func VarbindBytes(p gosnmp.SnmpPDU) int {
	n := len(p.Name)
	switch v := p.Value.(type) {
	case []byte:
		n += len(v)
	case string:
		n += len(v)
	default:
		n += 8
	}
	return n
}

// tally counts one request's varbinds against its Budget. add fails, and the caller stops
// the request, at the first varbind past the budget, so nothing past the budget is kept.
type tally struct {
	budget   Budget
	varbinds int
	bytes    int
}

func (t *tally) add(p gosnmp.SnmpPDU) error {
	size := VarbindBytes(p)
	if size > MaxVarbindBytes {
		return fmt.Errorf("%w: varbind %s is %d bytes, more than %d", ErrTooLarge, shortOID(p.Name), size, MaxVarbindBytes)
	}
	if t.varbinds >= t.budget.Varbinds {
		return fmt.Errorf("%w: more than %d varbinds", ErrTooManyRows, t.budget.Varbinds)
	}
	if t.bytes+size > t.budget.Bytes {
		return fmt.Errorf("%w: more than %d bytes after %d varbinds", ErrTooLarge, t.budget.Bytes, t.varbinds)
	}
	t.varbinds++
	t.bytes += size
	return nil
}

// check runs a whole answer through a tally: for answers already in memory (a GET, or an
// Agent that ignored its budget), so that nothing past the budget reaches the parsers.
func (b Budget) check(pdus []gosnmp.SnmpPDU) error {
	t := tally{budget: b}
	for _, p := range pdus {
		if err := t.add(p); err != nil {
			return err
		}
	}
	return nil
}

// shortOID quotes an agent-chosen OID for an error message, cut to 64 bytes.
func shortOID(name string) string {
	if len(name) > 64 {
		return strconv.Quote(name[:64]) + "..."
	}
	return strconv.Quote(name)
}
