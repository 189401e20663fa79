package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"flowweight/e2e/lab"
)

// sweep is the backstop after the supervisor is gone: e2e/lab.Sweep removes namespaces
// (and what runs in them), interfaces and cpu/cpuacct cgroups with the lab's prefix and the
// Open vSwitch daemons whose pidfiles are in the lab directory. On cgroup v1 the scenario
// also made a memory cgroup per backend, which lab.Sweep does not know; it goes here.
func sweep(w io.Writer, st State) error {
	var errs []error
	if err := lab.Sweep(st.Prefix, st.Dir, &noDebug{w: w}); err != nil {
		errs = append(errs, err)
	}
	if mem := memoryMount(); mem != "" {
		for _, d := range prefixedDirs(mem, st.Prefix) {
			if err := removeCgroup(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sweep %s: %w", st.Prefix, err)
	}
	return nil
}

// leftovers lists what still carries the lab's prefix or runs from its directory.
func leftovers(st State) []string {
	var left []string
	nss, err := labNamespaces(st.Prefix)
	if err != nil {
		left = append(left, err.Error())
	}
	for _, ns := range nss {
		left = append(left, "namespace "+ns)
	}
	for _, l := range prefixedNames("/sys/class/net", st.Prefix) {
		left = append(left, "interface "+l)
	}
	for _, c := range labCgroups(st.Prefix) {
		left = append(left, "cgroup "+c)
	}
	for _, p := range dirProcs(st.Dir) {
		left = append(left, "process "+procLine(p))
	}
	return left
}

// labNamespaces lists the network namespaces whose names start with prefix.
func labNamespaces(prefix string) ([]string, error) {
	out, err := run(10*time.Second, "ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	var nss []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			nss = append(nss, f[0])
		}
	}
	slices.Sort(nss)
	return nss, nil
}

// nsProcs describes the processes inside namespace ns.
func nsProcs(ns string) []string {
	out, err := run(10*time.Second, "ip", "netns", "pids", ns)
	if err != nil {
		return []string{err.Error()}
	}
	var lines []string
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil {
			lines = append(lines, procLine(pid))
		}
	}
	return lines
}

// labCgroups lists the cgroup directories with the prefix in the cpu, cpuacct and (v1)
// memory hierarchies.
func labCgroups(prefix string) []string {
	var roots []string
	if lay, err := lab.DetectCgroups(); err == nil {
		roots = append(roots, lay.CPU)
		if lay.CPUAcct != "" && lay.CPUAcct != lay.CPU {
			roots = append(roots, lay.CPUAcct)
		}
	}
	if mem := memoryMount(); mem != "" {
		roots = append(roots, mem)
	}
	var out []string
	for _, r := range roots {
		out = append(out, prefixedDirs(r, prefix)...)
	}
	return out
}

func prefixedNames(dir, prefix string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func prefixedDirs(root, prefix string) []string {
	var out []string
	for _, n := range prefixedNames(root, prefix) {
		if fi, err := os.Stat(filepath.Join(root, n)); err == nil && fi.IsDir() {
			out = append(out, filepath.Join(root, n))
		}
	}
	return out
}

// memoryMount is the v1 memory hierarchy's mount point, "" on v2 (or without one).
func memoryMount() string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	mounts, err := lab.ParseMountinfo(string(data))
	if err != nil {
		return ""
	}
	for _, m := range mounts {
		if m.FSType == "cgroup" && m.Root == "/" && slices.Contains(m.SuperOptions, "memory") {
			return m.MountPoint
		}
	}
	return ""
}

// removeCgroup moves any task left in dir to the parent group and removes dir, retrying
// while exiting tasks still pin it.
func removeCgroup(dir string) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(filepath.Dir(dir), "cgroup.procs"), []byte(f), 0o644)
			}
		}
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ovsDaemons describes the lab's ovsdb-server and ovs-vswitchd from their pidfiles.
func ovsDaemons(dir string) []string {
	var out []string
	for _, d := range []string{"ovsdb-server", "ovs-vswitchd"} {
		b, err := os.ReadFile(filepath.Join(dir, "ovs", d+".pid"))
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil {
			out = append(out, d+" (no pidfile)")
			continue
		}
		if c, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err != nil || strings.TrimSpace(string(c)) != d {
			out = append(out, fmt.Sprintf("%s pid %d (not running)", d, pid))
			continue
		}
		out = append(out, fmt.Sprintf("%s pid %d", d, pid))
	}
	return out
}

// ancestors returns pid and its ancestors: the lab command itself and whoever started it
// (`timeout 300 DIR/bin/lab up -dir DIR` names the directory too, and is not the lab's).
func ancestors(pid int) map[int]bool {
	out := map[int]bool{}
	for pid > 1 && !out[pid] {
		out[pid] = true
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			break
		}
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if i < 0 || len(f) < 2 {
			break
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return out
}

// dirProcs lists processes whose command line names the lab directory: the lab's own
// daemons, binaries and wrappers, never anything else (the directory name is unique).
func dirProcs(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	mine := ancestors(os.Getpid())
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || mine[pid] {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || isZombie(pid) {
			continue
		}
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a == dir || strings.HasPrefix(a, dir+"/") || strings.Contains(a, "="+dir+"/") {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// noDebug passes on the lines of a slog text log except its debug lines (lab.Sweep logs
// every helper command at debug level; its warnings name what it had to remove).
type noDebug struct {
	w   io.Writer
	buf []byte
}

func (d *noDebug) Write(p []byte) (int, error) {
	d.buf = append(d.buf, p...)
	for {
		i := bytes.IndexByte(d.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := d.buf[:i+1]
		if !bytes.Contains(line, []byte(" level=DEBUG ")) {
			if _, err := d.w.Write(line); err != nil {
				return len(p), err
			}
		}
		d.buf = d.buf[i+1:]
	}
}
