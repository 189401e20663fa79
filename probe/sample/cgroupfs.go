package sample

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of /proc/self/mountinfo, reduced to what cgroup discovery needs.
type Mount struct {
	Root, Point, FSType string
	// SuperOptions are the per-superblock options; for cgroup v1 they name the controllers
	// ("rw,cpu,cpuacct").
	SuperOptions []string
}

// ParseMountInfo parses /proc/self/mountinfo (proc(5)). Octal escapes in paths (\040 for a
// space) are decoded. A malformed line is an error naming its line number.
func ParseMountInfo(data []byte) ([]Mount, error) {
	var ms []Mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+3 {
			return nil, fmt.Errorf("mountinfo line %d: %d fields, separator at %d", n, len(f), sep)
		}
		m := Mount{Root: unescapeOctal(f[3]), Point: unescapeOctal(f[4]), FSType: f[sep+1]}
		if len(f) > sep+3 {
			m.SuperOptions = strings.Split(f[sep+3], ",")
		}
		ms = append(ms, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return ms, nil
}

func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// Cgroup is a resolved cgroup: the directories holding each controller's files.
type Cgroup struct {
	// Version is 1 or 2.
	Version int
	// Dir is the cgroup's directory on v2.
	Dir string
	// CPU, CPUAcct and Memory are the directories under each v1 controller's mount; on a
	// host that co-mounts cpu and cpuacct they are the same.
	CPU, CPUAcct, Memory string
	// Root is "" when the directories are in the probe's own mount namespace, or the
	// /proc/PID/root they are reached through (see LoadCgroup).
	Root string
}

// ResolveCgroup finds the directories of the cgroup p given the mounts.
//
// An absolute p names a directory under some cgroup mount; its version is that mount's, and on
// v1 the same relative path is looked up under the cpu, cpuacct and memory mounts (which may be
// separate, as on this project's lab machine, or co-mounted). A relative p is taken from the
// hierarchy root: v2 when a cgroup2 file system is mounted at /sys/fs/cgroup (a pure v2 host),
// else v1 when the v1 controllers are mounted, else the hybrid "unified" v2 mount.
func ResolveCgroup(p string, mounts []Mount) (Cgroup, error) {
	if p == "" {
		return Cgroup{}, errors.New("cgroup path is empty")
	}
	var v2 *Mount
	var v1 []Mount
	for i, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			if v2 == nil || m.Point == "/sys/fs/cgroup" {
				v2 = &mounts[i]
			}
		case "cgroup":
			v1 = append(v1, m)
		}
	}
	if path.IsAbs(p) {
		p = path.Clean(p)
		var best *Mount
		for i, m := range mounts {
			if (m.FSType == "cgroup" || m.FSType == "cgroup2") && under(p, m.Point) &&
				(best == nil || len(m.Point) > len(best.Point)) {
				best = &mounts[i]
			}
		}
		if best == nil {
			return Cgroup{}, fmt.Errorf("cgroup path %q is not under any cgroup mount", p)
		}
		if best.FSType == "cgroup2" {
			return Cgroup{Version: 2, Dir: p}, nil
		}
		rel := strings.TrimPrefix(p, best.Point)
		return resolveV1(rel, v1, p)
	}
	rel := "/" + path.Clean(p)
	if v2 != nil && v2.Point == "/sys/fs/cgroup" {
		return Cgroup{Version: 2, Dir: path.Join(v2.Point, rel)}, nil
	}
	if len(v1) > 0 {
		return resolveV1(rel, v1, p)
	}
	if v2 != nil {
		return Cgroup{Version: 2, Dir: path.Join(v2.Point, rel)}, nil
	}
	return Cgroup{}, fmt.Errorf("cgroup path %q: no cgroup file system is mounted", p)
}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func resolveV1(rel string, v1 []Mount, orig string) (Cgroup, error) {
	find := func(ctrl string) string {
		for _, m := range v1 {
			if slices.Contains(m.SuperOptions, ctrl) {
				return path.Join(m.Point, rel)
			}
		}
		return ""
	}
	c := Cgroup{Version: 1, CPU: find("cpu"), CPUAcct: find("cpuacct"), Memory: find("memory")}
	var missing []string
	for ctrl, dir := range map[string]string{"cpu": c.CPU, "cpuacct": c.CPUAcct, "memory": c.Memory} {
		if dir == "" {
			missing = append(missing, ctrl)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return Cgroup{}, fmt.Errorf("cgroup path %q: cgroup v1 controller(s) %s not mounted", orig, strings.Join(missing, ", "))
	}
	return c, nil
}

// ParseUint parses a file holding one unsigned decimal number (cpuacct.usage,
// memory.usage_in_bytes, memory.current).
func ParseUint(data []byte) (uint64, error) {
	s := strings.TrimSpace(string(data))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an unsigned number", truncate(s))
	}
	return n, nil
}

// ParseLimit parses memory.max (v2): "max" means no limit, returned as ok=false.
func ParseLimit(data []byte) (limit uint64, ok bool, err error) {
	if strings.TrimSpace(string(data)) == "max" {
		return 0, false, nil
	}
	n, err := ParseUint(data)
	return n, err == nil, err
}

// CPUQuota is a CPU bandwidth limit: Quota of CPU time per Period. Unlimited means no quota.
type CPUQuota struct {
	Quota, Period int64 // microseconds
	Unlimited     bool
}

// Cores is the number of CPUs the quota amounts to, hostCPUs when unlimited, and never more
// than hostCPUs (a quota above the machine's size cannot be used).
func (q CPUQuota) Cores(hostCPUs float64) float64 {
	if q.Unlimited || q.Period <= 0 {
		return hostCPUs
	}
	c := float64(q.Quota) / float64(q.Period)
	if hostCPUs > 0 && c > hostCPUs {
		return hostCPUs
	}
	return c
}

// ParseCPUMax parses v2 cpu.max: "max 100000" or "25000 100000".
func ParseCPUMax(data []byte) (CPUQuota, error) {
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return CPUQuota{}, fmt.Errorf("cpu.max %q: want \"QUOTA PERIOD\"", truncate(string(data)))
	}
	period, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || period <= 0 {
		return CPUQuota{}, fmt.Errorf("cpu.max %q: bad period", truncate(string(data)))
	}
	if f[0] == "max" {
		return CPUQuota{Period: period, Unlimited: true}, nil
	}
	quota, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || quota <= 0 {
		return CPUQuota{}, fmt.Errorf("cpu.max %q: bad quota", truncate(string(data)))
	}
	return CPUQuota{Quota: quota, Period: period}, nil
}

// ParseCFSQuota combines v1 cpu.cfs_quota_us and cpu.cfs_period_us; a quota of -1 is no limit.
func ParseCFSQuota(quotaData, periodData []byte) (CPUQuota, error) {
	qs := strings.TrimSpace(string(quotaData))
	quota, err := strconv.ParseInt(qs, 10, 64)
	if err != nil {
		return CPUQuota{}, fmt.Errorf("cpu.cfs_quota_us %q is not a number", truncate(qs))
	}
	ps := strings.TrimSpace(string(periodData))
	period, err := strconv.ParseInt(ps, 10, 64)
	if err != nil || period <= 0 {
		return CPUQuota{}, fmt.Errorf("cpu.cfs_period_us %q is not a positive number", truncate(ps))
	}
	if quota < 0 {
		return CPUQuota{Period: period, Unlimited: true}, nil
	}
	if quota == 0 {
		return CPUQuota{}, errors.New("cpu.cfs_quota_us is 0")
	}
	return CPUQuota{Quota: quota, Period: period}, nil
}

// ParseKeyed finds key in a flat-keyed file ("key value" per line: cpu.stat, memory.stat).
// found is false when the key is absent.
func ParseKeyed(data []byte, key string) (value uint64, found bool, err error) {
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, true, fmt.Errorf("key %s: %q is not an unsigned number", key, truncate(v))
		}
		return n, true, nil
	}
	return 0, false, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
