package configs

import (
	"net"
	"strconv"
	"time"
)

// The checks both configurations (the probe's and the controller's) make of addresses and
// durations, in one place so that the same mistake reads the same in either file.

// Addr says what an address key accepts: Host, a host is required (a destination such as the
// collector) rather than optional (a listen address, where ":9000" means every address);
// Port0, port 0 is accepted (listen on any free port, as tests do).
type Addr struct{ Host, Port0 bool }

// Addr records a problem with key unless s is host:port as rule accepts it.
func (p *Problems) Addr(key, s string, rule Addr) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		p.Addf(key, "%q is not host:port: %v", s, err)
		return
	}
	if rule.Host && host == "" {
		p.Addf(key, "%q has no host", s)
	}
	lo := 1
	if rule.Port0 {
		lo = 0
	}
	n, err := strconv.Atoi(port)
	switch {
	case err != nil:
		p.Addf(key, "%q: port %q is not a number", s, port)
	case n < lo || n > 65535:
		p.Addf(key, "%q: port %d is outside %d-65535", s, n, lo)
	}
}

// Duration records a problem with key unless lo ≤ d ≤ hi. A bare TOML integer decodes as
// nanoseconds, which is why the message below the minimum says how to write one.
func (p *Problems) Duration(key string, d, lo, hi time.Duration) {
	switch {
	case d < lo:
		p.Addf(key, "%v is below the minimum %v (write durations as strings, e.g. \"5s\")", d, lo)
	case d > hi:
		p.Addf(key, "%v is above the maximum %v", d, hi)
	}
}

// Positive records a problem with key unless d > 0: a period or timeout with no natural bound.
func (p *Problems) Positive(key string, d time.Duration) {
	if d <= 0 {
		p.Addf(key, "%v must be a positive duration (write durations as strings, e.g. \"5s\")", d)
	}
}
