package sample

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/mem"

	"flowweight/internal/fraction"
)

// CPUTicks is a reading of the host's cumulative CPU time, in seconds.
type CPUTicks struct{ Busy, Total float64 }

// TicksFromTimes sums gopsutil's aggregate CPU times. Guest time is left out of the total
// because Linux already counts it in user and nice; idle and iowait are the not-busy part.
//
// Busy is summed from its parts rather than taken as total minus idle: the subtraction
// rounds differently from one reading to the next, and on an idle machine it made busy go
// down by 1e-12 s, which read as a counter reset.
func TicksFromTimes(t cpu.TimesStat) CPUTicks {
	busy := t.User + t.Nice + t.System + t.Irq + t.Softirq + t.Steal
	return CPUTicks{Busy: busy, Total: busy + t.Idle + t.Iowait}
}

// CPUUtil is the busy fraction between two readings. ok is false when no time passed or the
// counters went backwards (a reset), in which case there is no meaningful rate.
func CPUUtil(prev, cur CPUTicks) (util float64, ok bool) {
	dt := cur.Total - prev.Total
	db := cur.Busy - prev.Busy
	if dt <= 0 || db < 0 {
		return 0, false
	}
	return fraction.Clamp(db / dt), true
}

// HostCPU samples the whole machine's CPU utilisation (a delta between consecutive calls) and
// logical CPU count, through gopsutil.
type HostCPU struct {
	// Times and Count default to gopsutil; tests replace them.
	Times func(ctx context.Context) (cpu.TimesStat, error)
	Count func(ctx context.Context) (int, error)

	prev    CPUTicks
	hasPrev bool
}

// NewHostCPU returns a HostCPU that reads /proc/stat (the aggregate line, as gopsutil's
// cpu.Times does) and the online cpulist through descriptors kept open between samples
// (Reread), and parses them itself (ParseProcStatCPU, ParseCPUList); gopsutil counts the CPUs
// only when the cpulist cannot be read.
func NewHostCPU() *HostCPU {
	stat := &Reread{Path: procPath("stat")}
	online := &Reread{Path: onlineCPUsFile}
	return &HostCPU{
		Times: func(context.Context) (cpu.TimesStat, error) {
			b, err := stat.Read()
			if err != nil {
				return cpu.TimesStat{}, err
			}
			return ParseProcStatCPU(b)
		},
		Count: func(ctx context.Context) (int, error) {
			b, err := online.Read()
			return cpuCount(ctx, b, err)
		},
	}
}

// procPath names a file of /proc as gopsutil does: under $HOST_PROC when it is set (a probe
// in a container reading the host's /proc mounted elsewhere).
func procPath(name string) string {
	return filepath.Join(cmp.Or(os.Getenv("HOST_PROC"), "/proc"), name)
}

// ParseProcStatCPU parses the first line of /proc/stat, the aggregate "cpu" line, into what
// gopsutil's cpu.Times(false) returns for it: each counter (user, nice, system, idle, iowait,
// irq, softirq, steal, guest, guest_nice; the first seven required, later columns ignored) in
// clock ticks divided by cpu.ClocksPerSec. It allocates nothing.
func ParseProcStatCPU(data []byte) (cpu.TimesStat, error) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	name, rest := field(line)
	if !bytes.HasPrefix(name, []byte("cpu")) {
		return cpu.TimesStat{}, fmt.Errorf("/proc/stat: first line %q is not a cpu line", truncate(string(line)))
	}
	t := cpu.TimesStat{CPU: "cpu-total"}
	if string(name) != "cpu" {
		t.CPU = string(name)
	}
	counters := [...]*float64{&t.User, &t.Nice, &t.System, &t.Idle, &t.Iowait, &t.Irq, &t.Softirq, &t.Steal, &t.Guest, &t.GuestNice}
	n := 0
	for ; n < len(counters); n++ {
		var f []byte
		if f, rest = field(rest); len(f) == 0 {
			break
		}
		v, err := strconv.ParseUint(string(f), 10, 64) // the conversion does not allocate
		if err != nil {
			return cpu.TimesStat{}, fmt.Errorf("/proc/stat: cpu time field %d %q is not a number", n+1, truncate(string(f)))
		}
		*counters[n] = float64(v) / cpu.ClocksPerSec
	}
	if n < 7 {
		return cpu.TimesStat{}, fmt.Errorf("/proc/stat: cpu line has %d counters, want at least 7", n)
	}
	return t, nil
}

// onlineCPUsFile lists the CPUs the kernel runs on, as a cpulist ("0-3,6").
const onlineCPUsFile = "/sys/devices/system/cpu/online"

// HostCPUCount is the number of online logical CPUs. It reads the kernel's cpulist instead
// of gopsutil's logical count, which parses all of /proc/cpuinfo: reading that file makes the
// kernel report every CPU's frequency. At a 100 ms interval perf put a fifth of the probe's
// samples there, and the probe's task-clock fell by 7% without it (docs/benchmarks.md).
// gopsutil remains the fallback.
func HostCPUCount(ctx context.Context) (int, error) {
	b, err := os.ReadFile(onlineCPUsFile)
	return cpuCount(ctx, b, err)
}

// cpuCount counts the cpulist read (b, err), or asks gopsutil when it could not be read or
// parsed.
func cpuCount(ctx context.Context, b []byte, err error) (int, error) {
	if err == nil {
		if n, err := ParseCPUList(string(b)); err == nil && n > 0 {
			return n, nil
		}
	}
	return cpu.CountsWithContext(ctx, true)
}

// maxCPUID bounds a cpulist's CPU numbers: Linux's NR_CPUS is at most 8192 on any
// architecture, so a larger number is a corrupt file, not a machine.
const maxCPUID = 1 << 16

// ParseCPUList counts the CPUs in a Linux cpulist such as "0-3,6,8-9\n" (see cpuset(7),
// "List format"). Ranges may not overlap or run backwards; an empty list is an error.
func ParseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("cpulist: empty")
	}
	n, last := 0, -1
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a > maxCPUID {
			return 0, fmt.Errorf("cpulist %q: bad CPU number %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b > maxCPUID {
				return 0, fmt.Errorf("cpulist %q: bad range %q", s, part)
			}
		}
		if a <= last {
			return 0, fmt.Errorf("cpulist %q: %q overlaps or is out of order", s, part)
		}
		n, last = n+b-a+1, b
	}
	return n, nil
}

// Provides implements Provider.
func (h *HostCPU) Provides() Field { return FieldCPUUtil | FieldCPUCount }

// Sample implements Sampler.
func (h *HostCPU) Sample(ctx context.Context) (Values, error) {
	var v Values
	var errs []error
	if n, err := h.Count(ctx); err != nil || n <= 0 {
		errs = append(errs, fmt.Errorf("host cpu count: %d, %v", n, err))
	} else {
		v.CPUCount, v.Known = float64(n), v.Known|FieldCPUCount
	}
	t, err := h.Times(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("host cpu times: %w", err))
		return v, errors.Join(errs...)
	}
	cur := TicksFromTimes(t)
	prev, had := h.prev, h.hasPrev
	h.prev, h.hasPrev = cur, true
	switch u, ok := CPUUtil(prev, cur); {
	case !had:
		errs = append(errs, fmt.Errorf("host cpu util: %w", ErrFirstSample))
	case !ok:
		errs = append(errs, fmt.Errorf("host cpu util: counters did not advance (busy %.2f→%.2f s, total %.2f→%.2f s)",
			prev.Busy, cur.Busy, prev.Total, cur.Total))
	default:
		v.CPUUtil, v.Known = u, v.Known|FieldCPUUtil
	}
	return v, errors.Join(errs...)
}

// HostMem samples the machine's memory: utilisation counts Available (page cache the kernel
// can reclaim is not load), not Free.
type HostMem struct {
	// Memory defaults to gopsutil; tests replace it.
	Memory func(ctx context.Context) (*mem.VirtualMemoryStat, error)
}

// NewHostMem returns a HostMem that reads /proc/meminfo through a descriptor kept open
// between samples (Reread) and takes MemTotal and MemAvailable from it (ParseMemInfo). A
// kernel without MemAvailable (before 3.14) is left to gopsutil, which estimates it.
func NewHostMem() *HostMem {
	meminfo := &Reread{Path: procPath("meminfo")}
	return &HostMem{Memory: func(ctx context.Context) (*mem.VirtualMemoryStat, error) {
		b, err := meminfo.Read()
		if err != nil {
			return nil, err
		}
		total, avail, hasAvail, err := ParseMemInfo(b)
		switch {
		case err != nil:
			return nil, err
		case !hasAvail:
			return mem.VirtualMemoryWithContext(ctx)
		}
		return &mem.VirtualMemoryStat{Total: total, Available: avail}, nil
	}}
}

// ParseMemInfo returns MemTotal and MemAvailable from /proc/meminfo, in bytes, as gopsutil's
// mem.VirtualMemory reads them ("KEY: N kB" lines, a later line overriding an earlier one;
// lines with no or a second colon skipped). hasAvail is false when there is no MemAvailable
// line; a missing MemTotal is 0. A value that is not a number is an error.
func ParseMemInfo(data []byte) (total, avail uint64, hasAvail bool, err error) {
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || bytes.IndexByte(v, ':') >= 0 {
			continue
		}
		var dst *uint64
		switch string(bytes.TrimSpace(k)) { // the comparison does not allocate
		case "MemTotal":
			dst = &total
		case "MemAvailable":
			dst, hasAvail = &avail, true
		default:
			continue
		}
		v = bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))
		n, perr := strconv.ParseUint(string(v), 10, 64)
		if perr != nil {
			return 0, 0, false, fmt.Errorf("/proc/meminfo: %s %q is not a number of kB", bytes.TrimSpace(k), truncate(string(v)))
		}
		*dst = n * 1024
	}
	return total, avail, hasAvail, nil
}

// Provides implements Provider.
func (h *HostMem) Provides() Field { return FieldMemUtil | FieldMemBytes }

// Sample implements Sampler.
func (h *HostMem) Sample(ctx context.Context) (Values, error) {
	m, err := h.Memory(ctx)
	if err != nil {
		return Values{}, fmt.Errorf("host memory: %w", err)
	}
	if m.Total == 0 {
		return Values{}, errors.New("host memory: total is 0")
	}
	used := float64(m.Total) - float64(m.Available)
	return Values{
		Known:    FieldMemUtil | FieldMemBytes,
		MemUtil:  fraction.Clamp(used / float64(m.Total)),
		MemBytes: m.Total,
		MemBound: MemBoundHost,
	}, nil
}
