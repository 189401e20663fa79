package sample

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"flowweight/internal/fraction"
)

// UserHZ is the unit of the CPU times in /proc/PID/stat: clock ticks of sysconf(_SC_CLK_TCK).
// Linux fixes it at 100 in the user-space ABI of every architecture Go runs on (only alpha and
// ia64 differed), so it is a constant rather than a cgo call.
const UserHZ = 100

// MaxServiceProcs bounds the processes a pidfile's tree is followed to, so a fork bomb in the
// service cannot make the probe read /proc without end; the rest of such a tree is not counted.
const MaxServiceProcs = 4096

// ReadDirFunc lists the names in a directory; os.ReadDir's names in production, a map in tests.
type ReadDirFunc func(name string) ([]string, error)

// ModTimeFunc gives a file's modification time; os.Stat's in production.
type ModTimeFunc func(name string) (time.Time, error)

// ProcStat is what the service sampler needs from /proc/PID/stat.
type ProcStat struct {
	PPID int
	// CPU is utime + stime + cutime + cstime (fields 14 to 17), in UserHZ ticks: the
	// process's own CPU time and that of the children it has waited for, so the time of a
	// worker that exits and is reaped by the service moves into its parent's total instead of
	// leaving the sum.
	CPU uint64
	// StartTime is field 22, ticks after boot: with the PID it names one process, since a PID
	// can be reused only by a process started later.
	StartTime uint64
}

// ParseProcStat parses /proc/PID/stat (proc(5)). The command name, field 2, is in parentheses
// and may itself contain spaces and parentheses, so the fields are counted from the last ')'.
func ParseProcStat(data []byte) (ProcStat, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return ProcStat{}, errors.New("proc stat: no ')' after the command name")
	}
	// fields[0] is field 3 (state), so field n is fields[n-3].
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 22-2 {
		return ProcStat{}, fmt.Errorf("proc stat: %d fields after the command name, want at least %d", len(fields), 22-2)
	}
	num := func(n int) (uint64, error) {
		v, err := strconv.ParseUint(fields[n-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat field %d: %q is not an unsigned number", n, truncate(fields[n-3]))
		}
		return v, nil
	}
	var st ProcStat
	ppid, err := num(4)
	if err != nil {
		return ProcStat{}, err
	}
	st.PPID = int(min(ppid, 1<<31-1))
	for n := 14; n <= 17; n++ {
		// cutime and cstime are signed in the kernel's format but never negative.
		v, err := num(n)
		if err != nil {
			return ProcStat{}, err
		}
		st.CPU += v
	}
	if st.StartTime, err = num(22); err != nil {
		return ProcStat{}, err
	}
	return st, nil
}

// ParsePID parses a pidfile: one positive decimal PID (digits only, below 2^31), surrounding
// white space allowed.
func ParsePID(data []byte) (int, error) {
	s := strings.TrimSpace(string(data))
	pid, err := strconv.ParseUint(s, 10, 31)
	if err != nil || pid == 0 {
		return 0, fmt.Errorf("%q is not a PID", truncate(s))
	}
	return int(pid), nil
}

// ServiceCPU samples the CPU time used by the service's own processes, so the collector can
// tell the service's load from a neighbour's in the same cgroup or on the same host: a busy
// host with an idle service is a noisy neighbour, not a backend to unload. It reports cores'
// worth used over the interval (Values.ServiceCores); the agent divides by the CPU count it
// reports.
//
// The processes are those of one of PIDFile (the process it names and its descendants) or
// Cgroup (a cgroup's cpu.stat usage_usec on v2, cpuacct.usage on v1, which count every process
// that ran in it, exited ones included). When they cannot be found this interval (the pidfile
// is missing, names no process or a PID reused by another process; the cgroup does not exist;
// a file cannot be read) the signal is absent: the error wraps ErrUnavailable, and the next
// interval tries again.
type ServiceCPU struct {
	PIDFile string
	Cgroup  Cgroup // used when PIDFile is ""; Version 1 or 2

	Proc    string       // the proc file system, default "/proc"
	Read    ReadFileFunc // default os.ReadFile
	ReadDir ReadDirFunc  // default os.ReadDir
	ModTime ModTimeFunc  // default os.Stat
	Now     Clock        // default time.Now

	// The process the pidfile named when it was read, and the pidfile's time then.
	pid      int
	start    uint64
	fileTime time.Time
	// scan: this kernel has no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN off), so
	// descendants are found from every process's parent in /proc/*/stat.
	scan bool

	prev     time.Duration
	prevTime time.Time
	hasPrev  bool
}

// Provides implements Provider.
func (s *ServiceCPU) Provides() Field { return FieldServiceCPU }

// Sample implements Sampler.
func (s *ServiceCPU) Sample(ctx context.Context) (Values, error) {
	var used time.Duration
	var err error
	if s.PIDFile != "" {
		used, err = s.treeTime()
	} else {
		used, err = s.cgroupTime()
	}
	t := orClock(s.Now)()
	if err != nil {
		s.hasPrev = false
		return Values{Unavailable: FieldServiceCPU}, fmt.Errorf("service cpu: %w: %w", ErrUnavailable, err)
	}
	prev, prevTime, had := s.prev, s.prevTime, s.hasPrev
	s.prev, s.prevTime, s.hasPrev = used, t, true
	switch {
	case !had:
		return Values{}, fmt.Errorf("service cpu: %w", ErrFirstSample)
	case used < prev:
		// The cgroup was recreated (its unit restarted) or a process left the tree without
		// its time reaching a parent's: start over from this reading.
		return Values{}, fmt.Errorf("service cpu: %w (CPU time went back from %v to %v)", ErrFirstSample, prev, used)
	case !t.After(prevTime):
		return Values{}, fmt.Errorf("service cpu: no time elapsed since the last reading")
	}
	return Values{Known: FieldServiceCPU, ServiceCores: float64(used-prev) / float64(t.Sub(prevTime))}, nil
}

// ServiceCPUFraction is cores used as a fraction of cpuCount, clamped to [0,1]: the service
// can use slightly more than a quota within one window, and a service outside the measured
// cgroup more than all of it. ok is false when cpuCount is not positive or cores is negative
// or NaN, which no measurement gives, so that it is never mistaken for 0.
func ServiceCPUFraction(cores, cpuCount float64) (frac float64, ok bool) {
	if !(cpuCount > 0) || !(cores >= 0) {
		return 0, false
	}
	return fraction.Clamp(cores / cpuCount), true
}

func (s *ServiceCPU) cgroupTime() (time.Duration, error) {
	used, err := cgroupUsage(orRead(s.Read), s.Cgroup)
	if errors.Is(err, fs.ErrNotExist) {
		dir := s.Cgroup.Dir
		if s.Cgroup.Version == 1 {
			dir = s.Cgroup.CPUAcct
		}
		return 0, fmt.Errorf("cgroup %s does not exist (is the service running?): %w", dir, err)
	}
	return used, err
}

func (s *ServiceCPU) proc() string {
	if s.Proc == "" {
		return "/proc"
	}
	return s.Proc
}

func (s *ServiceCPU) readStat(pid int) (ProcStat, error) {
	file := path.Join(s.proc(), strconv.Itoa(pid), "stat")
	data, err := orRead(s.Read)(file)
	if err != nil {
		return ProcStat{}, err
	}
	st, err := ParseProcStat(data)
	if err != nil {
		return ProcStat{}, fmt.Errorf("%s: %w", file, err)
	}
	return st, nil
}

// treeTime re-reads the pidfile and sums the CPU time of the process it names and of that
// process's descendants.
func (s *ServiceCPU) treeTime() (time.Duration, error) {
	data, err := orRead(s.Read)(s.PIDFile)
	if err != nil {
		return 0, fmt.Errorf("pidfile: %w", err)
	}
	pid, err := ParsePID(data)
	if err != nil {
		return 0, fmt.Errorf("pidfile %s: %w", s.PIDFile, err)
	}
	mt, err := s.modTime(s.PIDFile)
	if err != nil {
		return 0, fmt.Errorf("pidfile: %w", err)
	}
	root, err := s.readStat(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("pidfile %s names PID %d, which is not running (stale pidfile)", s.PIDFile, pid)
	}
	if err != nil {
		return 0, fmt.Errorf("pidfile %s: %w", s.PIDFile, err)
	}
	switch {
	case pid != s.pid || !mt.Equal(s.fileTime):
		// A pidfile seen for the first time, or written again: it names the process
		// running now.
		s.pid, s.start, s.fileTime = pid, root.StartTime, mt
		s.hasPrev = false
	case root.StartTime != s.start:
		return 0, fmt.Errorf("pidfile %s names PID %d, which started at tick %d, not %d as when the pidfile was read: the PID was reused (stale pidfile)",
			s.PIDFile, pid, root.StartTime, s.start)
	}
	ticks := root.CPU
	var kids map[int][]int
	var stats map[int]ProcStat
	if s.scan {
		if kids, stats, err = s.parents(); err != nil {
			return 0, err
		}
	}
	queue, seen := []int{pid}, map[int]bool{pid: true}
	for len(queue) > 0 && len(seen) < MaxServiceProcs {
		p := queue[0]
		queue = queue[1:]
		var children []int
		if s.scan {
			children = kids[p]
		} else if children, err = s.children(p); err != nil {
			if p == pid && errors.Is(err, fs.ErrNotExist) {
				// The root is running (its stat was just read), so the file is missing
				// because the kernel has none: fall back to scanning /proc from now on.
				s.scan = true
				return s.treeTime()
			}
			return 0, err
		}
		for _, c := range children {
			if seen[c] || len(seen) >= MaxServiceProcs {
				continue
			}
			seen[c] = true
			queue = append(queue, c)
			st, ok := stats[c]
			if !s.scan {
				st, err = s.readStat(c)
				ok = err == nil
			}
			switch {
			case ok:
				ticks += st.CPU
			case errors.Is(err, fs.ErrNotExist):
				// Exited since it was listed: its time is in its parent's once reaped.
			case err != nil:
				return 0, err
			}
		}
	}
	return time.Duration(ticks) * (time.Second / UserHZ), nil
}

// children lists p's children from the children file of each of its threads (a child belongs
// to the thread that forked it).
func (s *ServiceCPU) children(p int) ([]int, error) {
	taskDir := path.Join(s.proc(), strconv.Itoa(p), "task")
	tids, err := s.readDir(taskDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil // p exited since it was listed
		}
		return nil, fmt.Errorf("service processes: %w", err)
	}
	var out []int
	for _, tid := range tids {
		data, err := orRead(s.Read)(path.Join(taskDir, tid, "children"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && strconv.Itoa(p) != tid {
				continue // the thread exited
			}
			return nil, err
		}
		for f := range strings.FieldsSeq(string(data)) {
			c, err := strconv.Atoi(f)
			if err != nil || c <= 0 {
				return nil, fmt.Errorf("%s: %q is not a PID", path.Join(taskDir, tid, "children"), truncate(f))
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// parents maps each running process to its children, and keeps its stat, from every
// /proc/PID/stat: the fallback for kernels without children files, costing one read per
// process on the machine.
func (s *ServiceCPU) parents() (map[int][]int, map[int]ProcStat, error) {
	names, err := s.readDir(s.proc())
	if err != nil {
		return nil, nil, fmt.Errorf("service processes: %w", err)
	}
	kids, stats := map[int][]int{}, map[int]ProcStat{}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		st, err := s.readStat(pid)
		if err != nil {
			continue // exited since the listing: its time is in its parent's once reaped
		}
		kids[st.PPID] = append(kids[st.PPID], pid)
		stats[pid] = st
	}
	return kids, stats, nil
}

func (s *ServiceCPU) readDir(name string) ([]string, error) {
	if s.ReadDir != nil {
		return s.ReadDir(name)
	}
	ents, err := os.ReadDir(name)
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, err
}

func (s *ServiceCPU) modTime(name string) (time.Time, error) {
	if s.ModTime != nil {
		return s.ModTime(name)
	}
	fi, err := os.Stat(name)
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}
