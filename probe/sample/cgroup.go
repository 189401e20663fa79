package sample

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"flowweight/internal/fraction"
)

// v1Unlimited is the smallest memory.limit_in_bytes treated as "no limit": the kernel reports
// PAGE_COUNTER_MAX rounded to pages (9223372036854771712 on 4 KiB pages); anything this large
// is not a real limit.
const v1Unlimited = math.MaxInt64 / 2

// LoadCgroup resolves the cgroup at p on this machine from /proc/self/mountinfo.
//
// When this mount namespace has no cgroup file system at all, as under `ip netns exec` (which
// remounts /sys for the network namespace, so /sys/fs/cgroup is empty), it resolves p among
// the mounts of PID 1's mount namespace instead and reaches them through /proc/1/root, which
// the kernel resolves in that namespace; Cgroup.Root then says so. This needs the right to
// look into PID 1 (root, or CAP_SYS_PTRACE); without it the error says to enter only the
// network namespace instead (nsenter --net).
func LoadCgroup(p string) (Cgroup, error) { return loadCgroup(p, "1") }

// hostMountsHint is appended when no cgroup mount can be found at all.
const hostMountsHint = "no cgroup file system is mounted in the probe's mount namespace " +
	"(`ip netns exec` remounts /sys and hides them); start the probe in the network " +
	"namespace only: nsenter --net=/var/run/netns/NAME probe ..."

// loadCgroup is LoadCgroup with the process whose mount namespace is the fallback.
func loadCgroup(p, hostPID string) (Cgroup, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup: %w", err)
	}
	mounts, err := ParseMountInfo(data)
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup: %w", err)
	}
	if HasCgroupMount(mounts) {
		if path.IsAbs(p) {
			// Many v1 hosts link /sys/fs/cgroup/cpu to the co-mount cpu,cpuacct; mountinfo has
			// only the real name.
			p = evalExisting(p)
		}
		return ResolveCgroup(p, mounts)
	}
	root := "/proc/" + hostPID + "/root"
	hostData, err := os.ReadFile("/proc/" + hostPID + "/mountinfo")
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup path %q: %s (reading PID %s's mounts: %w)", p, hostMountsHint, hostPID, err)
	}
	hostMounts, err := ParseMountInfo(hostData)
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup: /proc/%s/mountinfo: %w", hostPID, err)
	}
	if !HasCgroupMount(hostMounts) {
		return Cgroup{}, fmt.Errorf("cgroup path %q: %s (PID %s has none either)", p, hostMountsHint, hostPID)
	}
	if _, err := os.Stat(root + "/"); err != nil {
		return Cgroup{}, fmt.Errorf("cgroup path %q: %s (reaching PID %s's mounts through %s: %w)", p, hostMountsHint, hostPID, root, err)
	}
	if path.IsAbs(p) {
		if p, err = evalIn(root, p); err != nil {
			return Cgroup{}, fmt.Errorf("cgroup path: %w", err)
		}
	}
	cg, err := ResolveCgroup(p, hostMounts)
	if err != nil {
		return Cgroup{}, fmt.Errorf("%w (resolved among PID %s's mounts)", err, hostPID)
	}
	return cg.Under(root), nil
}

// HasCgroupMount reports whether any cgroup (v1) or cgroup2 file system is mounted.
func HasCgroupMount(mounts []Mount) bool {
	for _, m := range mounts {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			return true
		}
	}
	return false
}

// Under returns c with every directory prefixed by root (a /proc/PID/root), and Root set.
func (c Cgroup) Under(root string) Cgroup {
	join := func(d string) string {
		if d == "" {
			return ""
		}
		return root + d
	}
	c.Dir, c.CPU, c.CPUAcct, c.Memory = join(c.Dir), join(c.CPU), join(c.CPUAcct), join(c.Memory)
	c.Root = root
	return c
}

// maxSymlinks bounds link resolution as the kernel does (ELOOP after 40).
const maxSymlinks = 40

// evalIn resolves symbolic links in the longest existing prefix of the absolute path p as seen
// from root (a /proc/PID/root): absolute link targets are taken from root, not from the
// probe's own /, which filepath.EvalSymlinks would do. The result is a path below root,
// without the root prefix.
func evalIn(root, p string) (string, error) {
	rest := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	cur := "/"
	for hops := 0; len(rest) > 0; {
		comp := rest[0]
		rest = rest[1:]
		if comp == "" || comp == "." {
			continue
		}
		if comp == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, comp)
		fi, err := os.Lstat(root + next)
		if err != nil {
			// Does not exist (yet): the rest is taken as written.
			return path.Join(append([]string{next}, rest...)...), nil
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxSymlinks {
			return "", fmt.Errorf("%s: too many symbolic links under %s", p, root)
		}
		target, err := os.Readlink(root + next)
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return cur, nil
}

// evalExisting resolves symbolic links in the longest existing prefix of p, so that a cgroup
// that does not exist yet still resolves through a linked mount point.
func evalExisting(p string) string {
	rest := ""
	for dir := path.Clean(p); ; dir = path.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return path.Join(real, rest)
		}
		if dir == "/" {
			return p
		}
		rest = path.Join(path.Base(dir), rest)
	}
}

// CgroupCPU samples a cgroup's CPU: utilisation is CPU time used over the period divided by
// elapsed time × the cores its quota allows, so a cgroup using all of a 0.25-CPU quota reads
// 1.0; the count is the quota in CPUs (fractions allowed).
type CgroupCPU struct {
	Cgroup Cgroup
	// HostCPUs is the machine's logical CPU count, used when the cgroup has no quota and as
	// the upper bound of a quota.
	HostCPUs float64
	Read     ReadFileFunc // default os.ReadFile
	Now      Clock        // default time.Now

	prevUsage time.Duration
	prevTime  time.Time
	hasPrev   bool
}

// Provides implements Provider.
func (c *CgroupCPU) Provides() Field { return FieldCPUUtil | FieldCPUCount }

// Sample implements Sampler.
func (c *CgroupCPU) Sample(ctx context.Context) (Values, error) {
	read, now := orRead(c.Read), orClock(c.Now)
	var v Values
	var errs []error
	q, err := c.quota(read)
	if err != nil {
		errs = append(errs, err)
	} else {
		v.CPUCount, v.Known = q.Cores(c.HostCPUs), v.Known|FieldCPUCount
	}
	usage, err := c.usage(read)
	t := now()
	if err != nil {
		return v, errors.Join(append(errs, err)...)
	}
	prevUsage, prevTime, had := c.prevUsage, c.prevTime, c.hasPrev
	c.prevUsage, c.prevTime, c.hasPrev = usage, t, true
	switch {
	case !had:
		errs = append(errs, fmt.Errorf("cgroup cpu util: %w", ErrFirstSample))
	case !v.Has(FieldCPUCount) || v.CPUCount <= 0:
		errs = append(errs, errors.New("cgroup cpu util: no core count"))
	default:
		u, ok := CgroupCPUUtil(usage-prevUsage, t.Sub(prevTime), v.CPUCount)
		if !ok {
			errs = append(errs, fmt.Errorf("cgroup cpu util: usage %v→%v over %v is not a rate", prevUsage, usage, t.Sub(prevTime)))
			break
		}
		v.CPUUtil, v.Known = u, v.Known|FieldCPUUtil
	}
	return v, errors.Join(errs...)
}

// CgroupCPUUtil is used CPU time over elapsed time × cores, clamped to [0,1] (the quota is
// enforced per period, so a measurement window can see slightly more). ok is false for a
// negative usage delta (counter reset) or no elapsed time.
func CgroupCPUUtil(used, elapsed time.Duration, cores float64) (float64, bool) {
	if used < 0 || elapsed <= 0 || cores <= 0 {
		return 0, false
	}
	return fraction.Clamp(float64(used) / (float64(elapsed) * cores)), true
}

func (c *CgroupCPU) quota(read ReadFileFunc) (CPUQuota, error) {
	if c.Cgroup.Version == 2 {
		data, err := read(path.Join(c.Cgroup.Dir, "cpu.max"))
		if err != nil {
			// The cpu controller may not be enabled for this cgroup: no quota file means no quota.
			if errors.Is(err, os.ErrNotExist) {
				return CPUQuota{Unlimited: true}, nil
			}
			return CPUQuota{}, fmt.Errorf("cgroup cpu quota: %w", err)
		}
		q, err := ParseCPUMax(data)
		if err != nil {
			return CPUQuota{}, fmt.Errorf("cgroup %s: %w", c.Cgroup.Dir, err)
		}
		return q, nil
	}
	qd, err := read(path.Join(c.Cgroup.CPU, "cpu.cfs_quota_us"))
	if err != nil {
		return CPUQuota{}, fmt.Errorf("cgroup cpu quota: %w", err)
	}
	pd, err := read(path.Join(c.Cgroup.CPU, "cpu.cfs_period_us"))
	if err != nil {
		return CPUQuota{}, fmt.Errorf("cgroup cpu quota: %w", err)
	}
	q, err := ParseCFSQuota(qd, pd)
	if err != nil {
		return CPUQuota{}, fmt.Errorf("cgroup %s: %w", c.Cgroup.CPU, err)
	}
	return q, nil
}

func (c *CgroupCPU) usage(read ReadFileFunc) (time.Duration, error) {
	return cgroupUsage(read, c.Cgroup)
}

// cgroupUsage is the CPU time used by every process that ran in cg: usage_usec in cpu.stat on
// v2 (present whether or not the cpu controller is enabled), cpuacct.usage on v1.
func cgroupUsage(read ReadFileFunc, cg Cgroup) (time.Duration, error) {
	if cg.Version == 2 {
		file := path.Join(cg.Dir, "cpu.stat")
		data, err := read(file)
		if err != nil {
			return 0, fmt.Errorf("cgroup cpu usage: %w", err)
		}
		us, found, err := ParseKeyed(data, "usage_usec")
		switch {
		case err != nil:
			return 0, fmt.Errorf("%s: %w", file, err)
		case !found:
			return 0, fmt.Errorf("%s: no usage_usec", file)
		}
		return time.Duration(us) * time.Microsecond, nil
	}
	file := path.Join(cg.CPUAcct, "cpuacct.usage")
	data, err := read(file)
	if err != nil {
		return 0, fmt.Errorf("cgroup cpu usage: %w", err)
	}
	ns, err := ParseUint(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return time.Duration(ns), nil
}

// CgroupMem samples a cgroup's memory. Usage is the working set: memory.usage_in_bytes (v1) or
// memory.current (v2) minus the inactive file cache from memory.stat (total_inactive_file on
// v1, inactive_file on v2), because the kernel reclaims that cache before it would fail an
// allocation, so counting it would make an idle file server look full.
//
// The size is the tightest limit on the way from the cgroup up to its hierarchy's root (the
// kernel enforces every ancestor's limit on the whole subtree, so a cgroup without a limit of
// its own inside a limited one is bounded by that one), or the host's memory when there is
// none or every limit is larger. Values.MemBound says which.
type CgroupMem struct {
	Cgroup  Cgroup
	HostMem uint64       // bytes, the host's MemTotal; the size when no limit applies
	Read    ReadFileFunc // default os.ReadFile
}

// Provides implements Provider.
func (c *CgroupMem) Provides() Field { return FieldMemUtil | FieldMemBytes }

// maxCgroupDepth bounds the walk up the tree; cgroup trees are a handful of levels deep.
const maxCgroupDepth = 64

// Sample implements Sampler.
func (c *CgroupMem) Sample(ctx context.Context) (Values, error) {
	read := orRead(c.Read)
	dir, usageFile, limitFile, inactiveKey := c.Cgroup.Memory, "memory.usage_in_bytes", "memory.limit_in_bytes", "total_inactive_file"
	if c.Cgroup.Version == 2 {
		dir, usageFile, limitFile, inactiveKey = c.Cgroup.Dir, "memory.current", "memory.max", "inactive_file"
	}
	ud, err := read(path.Join(dir, usageFile))
	if err != nil {
		if c.Cgroup.Version == 2 && errors.Is(err, os.ErrNotExist) {
			// Seen on hybrid hosts, where the memory controller is bound to the v1 hierarchy.
			return Values{}, fmt.Errorf("cgroup memory: the memory controller is not enabled for %s (its parent's cgroup.subtree_control lacks +memory, or the controller is bound to a v1 hierarchy): %w", dir, err)
		}
		return Values{}, fmt.Errorf("cgroup memory: %w", err)
	}
	usage, err := ParseUint(ud)
	if err != nil {
		return Values{}, fmt.Errorf("%s: %w", path.Join(dir, usageFile), err)
	}
	limits, err := c.limits(read, dir, limitFile)
	if err != nil {
		return Values{}, err
	}
	size, bound := MemBound(limits, c.HostMem)
	switch {
	case size == 0 && bound == MemBoundHost:
		return Values{}, fmt.Errorf("cgroup memory %s: no limit and host memory unknown", dir)
	case size == 0:
		return Values{}, fmt.Errorf("cgroup memory %s: the limit (%s) is 0 bytes", dir, bound)
	}
	var inactive uint64
	if sd, err := read(path.Join(dir, "memory.stat")); err == nil {
		if n, found, err := ParseKeyed(sd, inactiveKey); err == nil && found {
			inactive = n
		}
	}
	ws := usage - min(inactive, usage)
	return Values{
		Known:    FieldMemUtil | FieldMemBytes,
		MemUtil:  fraction.Clamp(float64(ws) / float64(size)),
		MemBytes: size,
		MemBound: bound,
	}, nil
}

// limits reads limitFile in dir and each of its ancestors, nearest first. The walk ends where
// the file does not exist: above the v1 hierarchy's mount point, and at the v2 root, which has
// no memory.max.
func (c *CgroupMem) limits(read ReadFileFunc, dir, limitFile string) ([]MemLimit, error) {
	var limits []MemLimit
	for d := path.Clean(dir); len(limits) < maxCgroupDepth; d = path.Dir(d) {
		if len(limits) > 0 && c.Cgroup.Version == 1 {
			// On v1 kernels before 5.x an ancestor could opt out of hierarchical accounting;
			// its limit (and every one above it) then does not bound its children.
			if uh, err := read(path.Join(d, "memory.use_hierarchy")); err == nil && strings.TrimSpace(string(uh)) == "0" {
				break
			}
		}
		file := path.Join(d, limitFile)
		data, err := read(file)
		if errors.Is(err, os.ErrNotExist) && len(limits) > 0 {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("cgroup memory limit: %w", err)
		}
		l, limited, err := ParseLimit(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		limits = append(limits, MemLimit{Dir: d, Bytes: l, Limited: limited && l < v1Unlimited})
		if d == "/" || d == "." {
			break
		}
	}
	return limits, nil
}

// MemLimit is one cgroup's memory limit; Limited is false for "max" and for v1's huge
// "unlimited" number.
type MemLimit struct {
	Dir     string
	Bytes   uint64
	Limited bool
}

// MemBound picks the memory size of a cgroup from its own limit and its ancestors' (limits[0]
// is the cgroup's own, then each parent in turn): the smallest limit, the nearest of equal
// ones, or hostMem when no limit is set or none is below it. bound is MemBoundCgroup,
// MemBoundAncestor+dir or MemBoundHost. A size of 0 means nothing is known (no limit and
// hostMem 0).
func MemBound(limits []MemLimit, hostMem uint64) (size uint64, bound string) {
	best := -1
	for i, l := range limits {
		if l.Limited && (best < 0 || l.Bytes < limits[best].Bytes) {
			best = i
		}
	}
	switch {
	case best < 0 || (hostMem > 0 && limits[best].Bytes >= hostMem):
		return hostMem, MemBoundHost
	case best == 0:
		return limits[0].Bytes, MemBoundCgroup
	}
	return limits[best].Bytes, MemBoundAncestor + limits[best].Dir
}
