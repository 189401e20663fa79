package snmp

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gosnmp/gosnmp"
)

// cpuTicks is one reading of the ssCpuRaw* counters. Counters the agent
// does not have read as 0, which adds nothing to either side of a delta.
type cpuTicks struct {
	user, nice, system, idle, wait, interrupt, softIRQ, steal uint32
}

// zero reports whether the agent has not filled its counters yet: net-snmp
// answers 0 for all of them until its first 5 s refresh.
func (c cpuTicks) zero() bool {
	return c == cpuTicks{}
}

// cpuUtil returns the busy fraction of the ticks between two readings: every
// tick except idle and iowait counts as busy, as in gopsutil. The counters
// are Counter32, so each delta is taken modulo 2^32, which is right across
// one wrap. ok is false when no tick elapsed between the readings (the agent
// refreshes its counters only every 5 s).
func cpuUtil(prev, cur cpuTicks) (util float64, ok bool) {
	d := func(a, b uint32) uint64 { return uint64(b - a) }
	idle := d(prev.idle, cur.idle) + d(prev.wait, cur.wait)
	busy := d(prev.user, cur.user) + d(prev.nice, cur.nice) + d(prev.system, cur.system) +
		d(prev.interrupt, cur.interrupt) + d(prev.softIRQ, cur.softIRQ) + d(prev.steal, cur.steal)
	total := idle + busy
	if total == 0 {
		return 0, false
	}
	return float64(busy) / float64(total), true
}

// tickMargin and tickSlackCS bound checkTicks: Linux counts USER_HZ = 100
// ticks per second per CPU, i.e. one per centisecond of sysUpTime; the
// margin covers other platforms' clock rates, the slack the agent's 5 s
// counter cache (a delta may span up to 5 s more than the uptime delta).
const (
	tickMargin  = 4
	tickSlackCS = 1000
)

// checkTicks rejects a counter reading that cannot follow prev: a counter
// whose modular delta is 2^31 or more went backwards (a real forward step
// that large in one poll would need millions of CPUs), and, when the
// sysUpTime delta elapsedCS is known, more ticks in total than cpus
// processors can count in that time. Both are ErrCounters.
func checkTicks(prev, cur cpuTicks, elapsedCS uint32, elapsedOK bool, cpus int) error {
	fields := []struct {
		name     string
		old, new uint32
	}{
		{"ssCpuRawUser", prev.user, cur.user}, {"ssCpuRawNice", prev.nice, cur.nice},
		{"ssCpuRawSystem", prev.system, cur.system}, {"ssCpuRawIdle", prev.idle, cur.idle},
		{"ssCpuRawWait", prev.wait, cur.wait}, {"ssCpuRawInterrupt", prev.interrupt, cur.interrupt},
		{"ssCpuRawSoftIRQ", prev.softIRQ, cur.softIRQ}, {"ssCpuRawSteal", prev.steal, cur.steal},
	}
	var total uint64
	for _, f := range fields {
		d := f.new - f.old
		if d >= 1<<31 {
			return fmt.Errorf("%w: %s went backwards from %d to %d while sysUpTime did not", ErrCounters, f.name, f.old, f.new)
		}
		total += uint64(d)
	}
	if elapsedOK && cpus > 0 {
		if limit := (uint64(elapsedCS) + tickSlackCS) * uint64(cpus) * tickMargin; total > limit {
			return fmt.Errorf("%w: %d ticks in %d.%02d s of sysUpTime, more than %d processors can count (at most %d)",
				ErrCounters, total, elapsedCS/100, elapsedCS%100, cpus, limit)
		}
	}
	return nil
}

// scalars is what one GET of scalarOIDs says.
type scalars struct {
	uptime   uint32 // sysUpTime, centiseconds since the agent started
	uptimeOK bool

	cpu   cpuTicks
	cpuOK bool // ssCpuRawUser/Nice/System/Idle all present

	memTotalKB, memAvailKB, memBufferKB, memCachedKB uint64

	tcpCurrEstab   uint32
	tcpCurrEstabOK bool
}

// absent reports whether a varbind says "this agent has no such value".
func absent(p gosnmp.SnmpPDU) bool {
	switch p.Type {
	case gosnmp.NoSuchObject, gosnmp.NoSuchInstance, gosnmp.EndOfMibView:
		return true
	}
	return false
}

// unsigned returns a PDU's value as a non-negative integer no larger than
// max, accepting only the listed ASN.1 types. gosnmp stores INTEGER as int,
// Counter32/Gauge32 as uint and TimeTicks as uint32; any Go integer type is
// accepted so that fakes need not mimic that exactly.
func unsigned(p gosnmp.SnmpPDU, name string, max uint64, types ...gosnmp.Asn1BER) (uint64, error) {
	typeOK := false
	for _, t := range types {
		if p.Type == t {
			typeOK = true
			break
		}
	}
	if !typeOK {
		want := make([]string, len(types))
		for i, t := range types {
			want[i] = t.String()
		}
		return 0, fmt.Errorf("%s (%s): want type %s, got %s", name, p.Name, strings.Join(want, " or "), p.Type)
	}
	var v uint64
	switch x := p.Value.(type) {
	case int:
		if x < 0 {
			return 0, fmt.Errorf("%s (%s): negative value %d", name, p.Name, x)
		}
		v = uint64(x)
	case int32:
		if x < 0 {
			return 0, fmt.Errorf("%s (%s): negative value %d", name, p.Name, x)
		}
		v = uint64(x)
	case int64:
		if x < 0 {
			return 0, fmt.Errorf("%s (%s): negative value %d", name, p.Name, x)
		}
		v = uint64(x)
	case uint:
		v = uint64(x)
	case uint32:
		v = uint64(x)
	case uint64:
		v = x
	default:
		return 0, fmt.Errorf("%s (%s): %s value has Go type %T, want an integer", name, p.Name, p.Type, p.Value)
	}
	if v > max {
		return 0, fmt.Errorf("%s (%s): value %d exceeds %d", name, p.Name, v, max)
	}
	return v, nil
}

// parseScalars reads the answer to the scalarOIDs GET. Missing memory values
// and malformed values are errors; missing CPU counters, sysUpTime and
// tcpCurrEstab are reported through the *OK fields because the Poller has
// fallbacks for them.
func parseScalars(pdus []gosnmp.SnmpPDU) (scalars, error) {
	var s scalars
	answered := make(map[string]bool, len(scalarOIDs))
	seen := make(map[string]bool, len(scalarOIDs)) // answered with a value
	for _, p := range pdus {
		name, known := oidNames[p.Name]
		if !known {
			return scalars{}, fmt.Errorf("unexpected OID %s in answer to the scalar GET", p.Name)
		}
		if answered[p.Name] {
			return scalars{}, fmt.Errorf("%s (%s) appears twice in one answer", name, p.Name)
		}
		answered[p.Name] = true
		if absent(p) {
			continue
		}
		seen[p.Name] = true
		var err error
		var v uint64
		switch p.Name {
		case oidSysUpTime:
			v, err = unsigned(p, name, math.MaxUint32, gosnmp.TimeTicks)
			s.uptime = uint32(v)
		case oidSsCpuRawUser, oidSsCpuRawNice, oidSsCpuRawSystem, oidSsCpuRawIdle,
			oidSsCpuRawWait, oidSsCpuRawInterrupt, oidSsCpuRawSoftIRQ, oidSsCpuRawSteal:
			v, err = unsigned(p, name, math.MaxUint32, gosnmp.Counter32)
			*s.cpu.field(p.Name) = uint32(v)
		case oidMemTotalReal:
			s.memTotalKB, err = unsigned(p, name, math.MaxInt32, gosnmp.Integer)
		case oidMemAvailReal:
			s.memAvailKB, err = unsigned(p, name, math.MaxInt32, gosnmp.Integer)
		case oidMemBuffer:
			s.memBufferKB, err = unsigned(p, name, math.MaxInt32, gosnmp.Integer)
		case oidMemCached:
			s.memCachedKB, err = unsigned(p, name, math.MaxInt32, gosnmp.Integer)
		case oidTCPCurrEstab:
			v, err = unsigned(p, name, math.MaxUint32, gosnmp.Gauge32)
			s.tcpCurrEstab = uint32(v)
		}
		if err != nil {
			return scalars{}, err
		}
	}
	s.uptimeOK = seen[oidSysUpTime]
	s.tcpCurrEstabOK = seen[oidTCPCurrEstab]

	required := []string{oidSsCpuRawUser, oidSsCpuRawNice, oidSsCpuRawSystem, oidSsCpuRawIdle}
	n := 0
	for _, o := range required {
		if seen[o] {
			n++
		}
	}
	switch n {
	case len(required):
		s.cpuOK = true
	case 0:
		s.cpu = cpuTicks{}
	default:
		for _, o := range required {
			if !seen[o] {
				return scalars{}, fmt.Errorf("%s (%s) missing while other ssCpuRaw counters are present", oidNames[o], o)
			}
		}
	}

	for _, o := range []string{oidMemTotalReal, oidMemAvailReal} {
		if !seen[o] {
			return scalars{}, fmt.Errorf("%s (%s) missing from the agent's answer", oidNames[o], o)
		}
	}
	if s.memTotalKB == 0 {
		return scalars{}, fmt.Errorf("memTotalReal (%s) is 0", oidMemTotalReal)
	}
	if s.memAvailKB > s.memTotalKB {
		return scalars{}, fmt.Errorf("memAvailReal (%s) %d kB exceeds memTotalReal %d kB", oidMemAvailReal, s.memAvailKB, s.memTotalKB)
	}
	return s, nil
}

// field maps a ssCpuRaw OID to its slot; only called with those OIDs.
func (c *cpuTicks) field(oid string) *uint32 {
	switch oid {
	case oidSsCpuRawUser:
		return &c.user
	case oidSsCpuRawNice:
		return &c.nice
	case oidSsCpuRawSystem:
		return &c.system
	case oidSsCpuRawIdle:
		return &c.idle
	case oidSsCpuRawWait:
		return &c.wait
	case oidSsCpuRawInterrupt:
		return &c.interrupt
	case oidSsCpuRawSoftIRQ:
		return &c.softIRQ
	case oidSsCpuRawSteal:
		return &c.steal
	}
	panic("snmp: cpuTicks.field called with " + oid)
}

// memory turns the scalars into bytes and a utilisation in [0,1]. Available
// memory is memAvailReal + memBuffer + memCached (see oids.go for why),
// capped at the total because memCached also counts shared memory.
func (s scalars) memory() (totalBytes uint64, util float64) {
	avail := s.memAvailKB + s.memBufferKB + s.memCachedKB
	if avail > s.memTotalKB {
		avail = s.memTotalKB
	}
	return s.memTotalKB * 1024, 1 - float64(avail)/float64(s.memTotalKB)
}

// processors is what a walk of hrProcessorEntry says.
type processors struct {
	count    int
	meanLoad float64 // fraction in [0,1]; valid only when loadOK
	loadOK   bool    // every processor row has an hrProcessorLoad
}

// tableIndex splits a walked OID below root into column and the rest of the
// index, both as text; ok is false when name is not below root.
func tableIndex(name, root string) (column, index string, ok bool) {
	rest, found := strings.CutPrefix(name, root+".")
	if !found {
		return "", "", false
	}
	column, index, _ = strings.Cut(rest, ".")
	return column, index, column != "" && index != ""
}

// parseProcessors counts hrProcessorTable rows (column hrProcessorFrwID) and
// averages hrProcessorLoad. Columns other than 1 and 2 are ignored.
func parseProcessors(pdus []gosnmp.SnmpPDU) (processors, error) {
	if len(pdus) > processorColumns*MaxProcessors {
		return processors{}, fmt.Errorf("hrProcessorTable (%s): %w: %d varbinds, at most %d (%d processors)", oidHrProcessorEntry, ErrTooManyRows, len(pdus), processorColumns*MaxProcessors, MaxProcessors)
	}
	rows := make(map[string]bool)
	loads := make(map[string]uint64)
	for _, p := range pdus {
		column, index, ok := tableIndex(p.Name, oidHrProcessorEntry)
		if !ok {
			return processors{}, fmt.Errorf("hrProcessorTable walk returned OID %s outside %s", p.Name, oidHrProcessorEntry)
		}
		if absent(p) {
			continue
		}
		if _, err := strconv.ParseUint(index, 10, 31); err != nil {
			return processors{}, fmt.Errorf("hrProcessorTable (%s): index %q is not one integer", p.Name, index)
		}
		switch column {
		case "1":
			if p.Type != gosnmp.ObjectIdentifier {
				return processors{}, fmt.Errorf("hrProcessorFrwID (%s): want type ObjectIdentifier, got %s", p.Name, p.Type)
			}
			if rows[index] {
				return processors{}, fmt.Errorf("hrProcessorFrwID (%s) appears twice", p.Name)
			}
			rows[index] = true
		case "2":
			v, err := unsigned(p, "hrProcessorLoad", 100, gosnmp.Integer)
			if err != nil {
				return processors{}, err
			}
			if _, dup := loads[index]; dup {
				return processors{}, fmt.Errorf("hrProcessorLoad (%s) appears twice", p.Name)
			}
			loads[index] = v
		}
	}
	if len(rows) == 0 {
		return processors{}, fmt.Errorf("hrProcessorTable (%s) has no rows", oidHrProcessorEntry)
	}
	if len(rows) > MaxProcessors {
		return processors{}, fmt.Errorf("hrProcessorTable (%s): %w: %d processors, at most %d", oidHrProcessorEntry, ErrTooManyRows, len(rows), MaxProcessors)
	}
	out := processors{count: len(rows)}
	if len(loads) == len(rows) {
		var sum uint64
		for index, v := range loads {
			if !rows[index] {
				return out, nil // loads for other rows than the processors: do not trust them
			}
			sum += v
		}
		out.meanLoad = float64(sum) / float64(len(loads)) / 100
		out.loadOK = true
	}
	return out, nil
}
