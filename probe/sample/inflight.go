package sample

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// InFlight counts the service's connections for the in-flight reports, tens of times a
// second, at a cost the fast loop can afford.
//
// An exact count (Conns: sock_diag, or /proc) walks every bucket of the kernel's TCP hash
// however few sockets match: 1.7–2.2 ms of CPU on a machine with a 262,144-bucket hash
// (docs/results/fast-loop.md), so three probes at 20 Hz used a fifth of a core in the lab at
// 80 % load. The kernel keeps a running count of the established TCP connections of each
// network namespace, "CurrEstab" in /proc/net/snmp, which costs a read of a 2 KiB file. It
// counts every connection in the namespace, not only the service ports', so InFlight counts
// exactly once every Calibrate and takes the difference between the two as an offset (the
// namespace's other connections: a database pool, the probe's own sockets, listeners do not
// count); between calibrations it reports CurrEstab minus the offset. Since Linux 6.10
// CurrEstab counts CLOSE_WAIT sockets too (RFC 1213's tcpCurrEstab), and so does the exact
// count it is calibrated by (NewInFlightConns): a busy backend throttled by its CPU quota
// holds several connections its clients have closed, and counting them on one side only made
// the lab's busiest probe fall back to exact counts within seconds. On an older kernel the
// difference shows as drift under churn, and the probe falls back to exact counts.
//
// That is exact where the service owns the namespace (a container, a pod, the lab's backends)
// and close where its other connections change slowly. Where they churn (a host whose outgoing
// connections come and go), the next calibration finds the running count off by more than
// driftLimit; after driftStrikes such calibrations in a row InFlight keeps to exact counts for
// good, and says so in Values.ConnsVia. A running count below the offset (connections closed
// since the calibration) reads 0, never negative, and recalibrates at the next sample.
//
// Not safe for concurrent use.
type InFlight struct {
	// Exact counts the service ports' connections (NewConns); required.
	Exact Sampler
	// Calibrate is how often the count is taken exactly; default 1 s.
	Calibrate time.Duration
	// Snmp reads /proc/net/snmp; nil opens it (Reread). Tests inject a file.
	Snmp func() ([]byte, error)
	// Now defaults to time.Now.
	Now func() time.Time

	reread   *Reread
	offset   int64     // CurrEstab minus the exact count, at the last calibration
	calAt    time.Time // zero: calibrate at the next sample
	strikes  int       // calibrations in a row that found the running count off
	exactFor string    // non-empty: the running count is not used, and why
}

// ConnsViaNetns is Values.ConnsVia of a count from the namespace's running count.
const ConnsViaNetns = "netns CurrEstab, calibrated"

// driftLimit is how far the running count may be off at a calibration (in connections, or a
// quarter of the count when that is more) before the calibration counts as a strike;
// driftStrikes strikes in a row end the use of the running count. A burst that arrives
// between the two reads of a calibration is one strike, not three.
const (
	driftLimit   = 4
	driftStrikes = 3
)

// Provides implements Provider.
func (f *InFlight) Provides() Field { return FieldConns }

// Sample implements Sampler.
func (f *InFlight) Sample(ctx context.Context) (Values, error) {
	if f.Exact == nil {
		return Values{}, errors.New("in-flight count: no exact counter")
	}
	if f.exactFor != "" {
		v, err := f.Exact.Sample(ctx)
		if err == nil {
			v.ConnsVia += " (" + f.exactFor + ")"
		}
		return v, err
	}
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	t := now()
	every := f.Calibrate
	if every <= 0 {
		every = time.Second
	}
	if f.calAt.IsZero() || t.Sub(f.calAt) >= every || t.Before(f.calAt) {
		return f.calibrate(ctx, t)
	}
	e, err := f.currEstab()
	if err != nil {
		return f.fallBack(ctx, err)
	}
	n := e - f.offset
	if n < 0 {
		n, f.calAt = 0, time.Time{} // the namespace's other connections closed: recount next time
	}
	return Values{Known: FieldConns, Conns: uint32(min(n, int64(^uint32(0)))), ConnsVia: ConnsViaNetns}, nil
}

// calibrate reads the running count, counts exactly, reads the running count again, and keeps
// the difference between the exact count and the two reads' mean. How far the two reads
// differ is what the service's own connections moved during the count (a busy backend opens
// and closes hundreds a second, and a count under load takes milliseconds): a miss within
// that is timing, not other connections, and is no strike.
func (f *InFlight) calibrate(ctx context.Context, t time.Time) (Values, error) {
	e1, err := f.currEstab()
	if err != nil {
		return f.fallBack(ctx, err)
	}
	v, err := f.Exact.Sample(ctx)
	if err != nil || !v.Has(FieldConns) {
		f.calAt = time.Time{}
		return v, err
	}
	e2, err := f.currEstab()
	if err != nil {
		return f.fallBack(ctx, err)
	}
	churn := max(e1, e2) - min(e1, e2)
	mid := (e1 + e2 + 1) / 2
	if !f.calAt.IsZero() {
		miss := mid - f.offset - int64(v.Conns)
		if miss < 0 {
			miss = -miss
		}
		if miss > max(driftLimit, int64(v.Conns)/4)+churn {
			f.strikes++
		} else {
			f.strikes = 0
		}
		if f.strikes >= driftStrikes {
			f.exactFor = fmt.Sprintf("the namespace's running count was off by %d at %d calibrations in a row: other connections churn", miss, driftStrikes)
			v.ConnsVia += " (" + f.exactFor + ")"
			return v, nil
		}
	}
	f.offset, f.calAt = mid-int64(v.Conns), t
	// The calibration is part of counting by the running count, not a change of way: said as
	// the exact counter's way, the probe logged a change twice a second.
	v.ConnsVia = ConnsViaNetns
	return v, nil
}

// fallBack keeps to exact counts after the running count could not be read.
func (f *InFlight) fallBack(ctx context.Context, cause error) (Values, error) {
	f.exactFor = "/proc/net/snmp: " + cause.Error()
	v, err := f.Exact.Sample(ctx)
	if err == nil {
		v.ConnsVia += " (" + f.exactFor + ")"
	}
	return v, err
}

func (f *InFlight) currEstab() (int64, error) {
	read := f.Snmp
	if read == nil {
		if f.reread == nil {
			f.reread = &Reread{Path: "/proc/net/snmp"}
		}
		read = f.reread.Read
	}
	b, err := read()
	if err != nil {
		return 0, err
	}
	return ParseCurrEstab(b)
}

// Close releases the kept descriptor of /proc/net/snmp.
func (f *InFlight) Close() error {
	if f.reread == nil {
		return nil
	}
	return f.reread.Close()
}

// ParseCurrEstab returns the Tcp CurrEstab counter of a /proc/net/snmp: the first "Tcp:"
// line names the fields, the second holds the values in the same order.
func ParseCurrEstab(b []byte) (int64, error) {
	var names []byte
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		rest, ok := bytes.CutPrefix(line, []byte("Tcp:"))
		if !ok {
			continue
		}
		if names == nil {
			names = rest
			continue
		}
		nf, vf := bytes.Fields(names), bytes.Fields(rest)
		if len(nf) != len(vf) {
			return 0, fmt.Errorf("/proc/net/snmp: %d Tcp field names but %d values", len(nf), len(vf))
		}
		for i, n := range nf {
			if string(n) != "CurrEstab" {
				continue
			}
			v, err := strconv.ParseInt(string(vf[i]), 10, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("/proc/net/snmp: Tcp CurrEstab %q is not a count", truncate(string(vf[i])))
			}
			return v, nil
		}
		return 0, errors.New("/proc/net/snmp: no Tcp CurrEstab field")
	}
	return 0, errors.New("/proc/net/snmp: no Tcp lines")
}
