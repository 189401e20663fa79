package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"flowweight/probe/sample"
)

// cpuTime is a process's utime+stime from /proc/PID/stat (all its threads), in USER_HZ
// ticks converted to time.
func cpuTime(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process (pid %d)", pid)
	}
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	st, err := sample.ParseProcStat(data)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(st.CPU) * (time.Second / sample.UserHZ), nil
}

// cpuMeter measures the CPU a set of processes use between start and stop.
type cpuMeter struct {
	pids   []int
	before []time.Duration
	t0     time.Time
}

func startCPU(pids ...int) (*cpuMeter, error) {
	m := &cpuMeter{pids: pids, t0: time.Now()}
	for _, p := range pids {
		c, err := cpuTime(p)
		if err != nil {
			return nil, err
		}
		m.before = append(m.before, c)
	}
	return m, nil
}

// cpuUse is the CPU time of some processes over a run and the run's length.
type cpuUse struct {
	cpu, elapsed time.Duration
}

// cores is the mean CPU used, in cores.
func (u cpuUse) cores() float64 {
	if u.elapsed <= 0 {
		return 0
	}
	return u.cpu.Seconds() / u.elapsed.Seconds()
}

func (u cpuUse) String() string {
	if u.elapsed <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", u.cores())
}

func (m *cpuMeter) stop() (cpuUse, error) {
	u := cpuUse{elapsed: time.Since(m.t0)}
	for i, p := range m.pids {
		c, err := cpuTime(p)
		if err != nil {
			return cpuUse{}, err
		}
		u.cpu += c - m.before[i]
	}
	return u, nil
}
