package sample

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"flowweight/internal/fraction"
)

// HostPressureFile is the kernel's CPU pressure (PSI) for the whole machine.
const HostPressureFile = "/proc/pressure/cpu"

// PSI is one reading of a pressure file (/proc/pressure/cpu, a v2 cgroup's cpu.pressure): the
// cumulative time, in microseconds, in which at least one task (Some) or every task (Full)
// was stalled waiting for the resource.
type PSI struct {
	Some, Full uint64 // microseconds
	HasFull    bool   // the "full" line was present (CPU has one since Linux 5.13)
}

// ParsePSI parses a pressure file ("some avg10=0.12 avg60=0.05 avg300=0.01 total=12345", the
// same for "full"); see the kernel's Documentation/accounting/psi.rst. Only the total counters
// are kept: the averages are the kernel's own decaying windows (10 s, 60 s, 300 s), which lag
// behind and do not match the probe's interval, whereas the difference of two totals is the
// stall time over exactly that interval. Lines of other kinds are skipped, so a later kernel may
// add some; a "some" or "full" line without a numeric total, or repeated, is an error.
func ParsePSI(data []byte) (PSI, error) {
	var p PSI
	var hasSome bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		kind, rest, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if kind != "some" && kind != "full" {
			continue
		}
		var total uint64
		var found bool
		for f := range strings.FieldsSeq(rest) {
			k, v, ok := strings.Cut(f, "=")
			if !ok || k != "total" {
				continue
			}
			t, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return PSI{}, fmt.Errorf("psi line %d: total %q is not a number", n, truncate(v))
			}
			total, found = t, true
		}
		if !found {
			return PSI{}, fmt.Errorf("psi line %d: %q has no total=", n, truncate(sc.Text()))
		}
		switch {
		case kind == "some" && hasSome, kind == "full" && p.HasFull:
			return PSI{}, fmt.Errorf("psi line %d: second %q line", n, kind)
		case kind == "some":
			p.Some, hasSome = total, true
		default:
			p.Full, p.HasFull = total, true
		}
	}
	if err := sc.Err(); err != nil {
		return PSI{}, fmt.Errorf("psi: %w", err)
	}
	if !hasSome {
		return PSI{}, errors.New(`psi: no "some" line`)
	}
	return p, nil
}

// StallFraction is the stalled time over the elapsed time, clamped to [0,1]. ok is false for a
// counter that went backwards or no elapsed time.
func StallFraction(prev, cur uint64, elapsed time.Duration) (float64, bool) {
	if cur < prev || elapsed <= 0 {
		return 0, false
	}
	return fraction.Clamp(float64(cur-prev) * float64(time.Microsecond) / float64(elapsed)), true
}

// Pressure samples CPU pressure from a PSI file: the fraction of each interval in which some
// runnable task waited for a CPU. Unlike utilisation it grows when a quota or a neighbour holds
// the backend's tasks back, and it does not saturate at 1 core's worth of busy time.
type Pressure struct {
	File  string // HostPressureFile, or a v2 cgroup's cpu.pressure
	Scope string // ScopeHost or ScopeCgroup, copied into Values.PressureScope
	// Read reads File; default: the host's file through a descriptor kept open between
	// samples (Reread), a cgroup's by opening it each time, since a kept descriptor would pin
	// the cgroup's mount and directory (umount fails with EBUSY) for as long as the probe runs.
	Read ReadFileFunc
	Now  Clock

	file     Reread
	prev     uint64
	prevTime time.Time
	hasPrev  bool
}

// Provides implements Provider.
func (p *Pressure) Provides() Field { return FieldCPUPressure }

// Sample implements Sampler.
func (p *Pressure) Sample(ctx context.Context) (Values, error) {
	read, now := orRead(p.Read), orClock(p.Now)
	data, err := p.readFile()
	if err != nil {
		p.hasPrev = false
		if p.Scope == ScopeCgroup && errors.Is(err, os.ErrNotExist) {
			// A v2 cgroup without cpu.pressure has PSI switched off (cgroup.pressure 0, or
			// psi=0); one without cgroup.procs does not exist, which is a failure.
			if _, perr := read(path.Join(path.Dir(p.File), "cgroup.procs")); perr != nil {
				return Values{}, fmt.Errorf("cpu pressure: %w", err)
			}
		}
		if unavailable(err) {
			// No PSI in this kernel (CONFIG_PSI off, or booted with psi=0, which makes reads
			// fail with EOPNOTSUPP), or the cgroup's cpu.pressure is hidden.
			return Values{Unavailable: FieldCPUPressure}, fmt.Errorf("cpu pressure: %w: %w", ErrUnavailable, err)
		}
		return Values{}, fmt.Errorf("cpu pressure: %w", err)
	}
	psi, err := ParsePSI(data)
	if err != nil {
		return Values{}, fmt.Errorf("%s: %w", p.File, err)
	}
	t := now()
	prev, prevTime, had := p.prev, p.prevTime, p.hasPrev
	p.prev, p.prevTime, p.hasPrev = psi.Some, t, true
	if !had {
		return Values{}, fmt.Errorf("cpu pressure: %w", ErrFirstSample)
	}
	f, ok := StallFraction(prev, psi.Some, t.Sub(prevTime))
	if !ok {
		return Values{}, fmt.Errorf("cpu pressure %s: total %d→%d µs over %v is not a rate", p.File, prev, psi.Some, t.Sub(prevTime))
	}
	return Values{Known: FieldCPUPressure, CPUPressure: f, PressureScope: p.Scope}, nil
}

func (p *Pressure) readFile() ([]byte, error) {
	if p.Read != nil || p.Scope == ScopeCgroup {
		return orRead(p.Read)(p.File)
	}
	if p.file.Path != p.File {
		p.file.Close()
		p.file.Path = p.File
	}
	return p.file.Read()
}

// unavailable reports whether a read error means the file does not exist here, as opposed to a
// failure worth counting.
func unavailable(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP)
}

// Throttle is one reading of a cgroup's CFS bandwidth counters from cpu.stat.
type Throttle struct {
	Periods   uint64        // nr_periods: enforcement periods in which the cgroup ran
	Throttled uint64        // nr_throttled: periods in which it used up its quota
	Time      time.Duration // throttled_time (v1, ns) or throttled_usec (v2): time held back
}

// ParseThrottle reads the CFS bandwidth counters from cpu.stat: nr_periods, nr_throttled and
// throttled_time (v1, nanoseconds) or throttled_usec (v2, microseconds). found is false when
// the counters are absent, as in a v2 cgroup whose cpu controller is not enabled (its cpu.stat
// has only usage_usec, user_usec and system_usec). Having only some of them is an error.
func ParseThrottle(data []byte) (t Throttle, found bool, err error) {
	const (
		hasPeriods = 1 << iota
		hasThrottled
		hasTime
	)
	var have int
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		var bit int
		switch k {
		case "nr_periods":
			bit = hasPeriods
		case "nr_throttled":
			bit = hasThrottled
		case "throttled_time", "throttled_usec":
			bit = hasTime
		default:
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return Throttle{}, true, fmt.Errorf("cpu.stat %s: %q is not an unsigned number", k, truncate(v))
		}
		if have&bit != 0 {
			return Throttle{}, true, fmt.Errorf("cpu.stat: %s given twice", k)
		}
		have |= bit
		switch k {
		case "nr_periods":
			t.Periods = n
		case "nr_throttled":
			t.Throttled = n
		case "throttled_time":
			t.Time = time.Duration(min(n, uint64(1<<63-1)))
		case "throttled_usec":
			t.Time = time.Duration(min(n, uint64(1<<63-1)/1000)) * time.Microsecond
		}
	}
	switch have {
	case 0:
		return Throttle{}, false, nil
	case hasPeriods | hasThrottled | hasTime:
		return t, true, nil
	}
	return Throttle{}, true, errors.New("cpu.stat: nr_periods, nr_throttled and throttled time must come together")
}

// ThrottledFraction is the share of the enforcement periods between two readings in which the
// cgroup was throttled, and the time throttled. No period at all (no quota, or an idle cgroup)
// is 0: nothing was held back. ok is false when a counter went backwards (a reset).
func ThrottledFraction(prev, cur Throttle) (frac float64, held time.Duration, ok bool) {
	if cur.Periods < prev.Periods || cur.Throttled < prev.Throttled || cur.Time < prev.Time {
		return 0, 0, false
	}
	dp := cur.Periods - prev.Periods
	if dp == 0 {
		return 0, cur.Time - prev.Time, true
	}
	return fraction.Clamp(float64(cur.Throttled-prev.Throttled) / float64(dp)), cur.Time - prev.Time, true
}

// CgroupThrottle samples how often a cgroup hit its CPU quota: utilisation at the quota says
// the backend is busy; the throttled fraction says it wanted more than it got.
type CgroupThrottle struct {
	Cgroup Cgroup
	Read   ReadFileFunc

	prev    Throttle
	hasPrev bool
}

// Provides implements Provider.
func (c *CgroupThrottle) Provides() Field { return FieldThrottled }

// Sample implements Sampler.
func (c *CgroupThrottle) Sample(ctx context.Context) (Values, error) {
	dir := c.Cgroup.CPU
	if c.Cgroup.Version == 2 {
		dir = c.Cgroup.Dir
	}
	file := path.Join(dir, "cpu.stat")
	data, err := orRead(c.Read)(file)
	if err != nil {
		// Every v1 cpu cgroup and every v2 cgroup has cpu.stat: without it the cgroup is gone
		// (or was never there), a failure rather than a missing signal.
		c.hasPrev = false
		return Values{}, fmt.Errorf("cpu throttling: %w", err)
	}
	t, found, err := ParseThrottle(data)
	switch {
	case err != nil:
		return Values{}, fmt.Errorf("%s: %w", file, err)
	case !found:
		c.hasPrev = false
		return Values{Unavailable: FieldThrottled}, fmt.Errorf("cpu throttling: %w: %s has no nr_periods (the cpu controller is not enabled for this cgroup)", ErrUnavailable, file)
	}
	prev, had := c.prev, c.hasPrev
	c.prev, c.hasPrev = t, true
	if !had {
		return Values{}, fmt.Errorf("cpu throttling: %w", ErrFirstSample)
	}
	frac, held, ok := ThrottledFraction(prev, t)
	if !ok {
		return Values{}, fmt.Errorf("cpu throttling %s: counters went backwards (%+v → %+v)", file, prev, t)
	}
	return Values{Known: FieldThrottled, Throttled: frac, ThrottledTime: held}, nil
}
