package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CgroupVersion says which cgroup interface carries the CPU controller.
type CgroupVersion int

const (
	// CgroupV1: cpu.cfs_quota_us / cpu.cfs_period_us in the cpu hierarchy,
	// cpuacct.usage in the cpuacct hierarchy (the same one when mounted as
	// "cpu,cpuacct").
	CgroupV1 CgroupVersion = 1
	// CgroupV2: cpu.max and cpu.stat in one unified directory.
	CgroupV2 CgroupVersion = 2
)

func (v CgroupVersion) String() string { return "v" + strconv.Itoa(int(v)) }

// CFSPeriod is the CPU bandwidth period written with every quota, in µs.
const CFSPeriod = 100000

// CgroupLayout is where the CPU controllers are mounted.
type CgroupLayout struct {
	Version CgroupVersion
	// CPU is the mount point of the hierarchy with the cpu controller
	// (v1) or of the unified hierarchy (v2).
	CPU string
	// CPUAcct is the v1 cpuacct mount point (equal to CPU when they are
	// co-mounted); empty for v2.
	CPUAcct string
}

// Mount is one line of /proc/self/mountinfo, the fields the lab needs.
type Mount struct {
	Root, MountPoint, FSType string
	SuperOptions             []string
}

// ParseMountinfo parses /proc/PID/mountinfo text (proc(5)). Octal escapes
// (\040 for a space) in paths are decoded.
func ParseMountinfo(text string) ([]Mount, error) {
	var out []Mount
	for i, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			return nil, fmt.Errorf("mountinfo line %d %q: want 6+ fields, '-', fstype, source, options", i+1, line)
		}
		out = append(out, Mount{
			Root:         unescapeMount(f[3]),
			MountPoint:   unescapeMount(f[4]),
			FSType:       f[sep+1],
			SuperOptions: strings.Split(f[sep+3], ","),
		})
	}
	return out, nil
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FindCPUCgroup picks the hierarchy that holds the cpu controller: a v1
// "cgroup" mount with the cpu option wins (a controller lives in one
// hierarchy only); otherwise a cgroup2 mount whose cgroup.controllers,
// read through controllers(mountpoint), lists cpu. It is pure so that
// hybrid, v1-only and v2-only machines can be tested from recorded text.
func FindCPUCgroup(mounts []Mount, controllers func(mountPoint string) (string, error)) (CgroupLayout, error) {
	var lay CgroupLayout
	for _, m := range mounts {
		if m.FSType != "cgroup" || m.Root != "/" {
			continue
		}
		if slices.Contains(m.SuperOptions, "cpu") && lay.CPU == "" {
			lay.CPU = m.MountPoint
		}
		if slices.Contains(m.SuperOptions, "cpuacct") && lay.CPUAcct == "" {
			lay.CPUAcct = m.MountPoint
		}
	}
	if lay.CPU != "" {
		if lay.CPUAcct == "" {
			return CgroupLayout{}, fmt.Errorf("cgroup v1: cpu mounted at %s but no cpuacct hierarchy (probe needs cpuacct.usage)", lay.CPU)
		}
		lay.Version = CgroupV1
		return lay, nil
	}
	var errs []error
	for _, m := range mounts {
		if m.FSType != "cgroup2" || m.Root != "/" {
			continue
		}
		c, err := controllers(m.MountPoint)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if slices.Contains(strings.Fields(c), "cpu") {
			return CgroupLayout{Version: CgroupV2, CPU: m.MountPoint}, nil
		}
		errs = append(errs, fmt.Errorf("cgroup2 at %s offers %q, no cpu", m.MountPoint, strings.TrimSpace(c)))
	}
	return CgroupLayout{}, fmt.Errorf("no cgroup hierarchy with the cpu controller: %w", errors.Join(errs...))
}

// DetectCgroups reads /proc/self/mountinfo and applies FindCPUCgroup.
func DetectCgroups() (CgroupLayout, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return CgroupLayout{}, fmt.Errorf("detect cgroups: %w", err)
	}
	mounts, err := ParseMountinfo(string(b))
	if err != nil {
		return CgroupLayout{}, fmt.Errorf("detect cgroups: %w", err)
	}
	return FindCPUCgroup(mounts, func(mp string) (string, error) {
		b, err := os.ReadFile(filepath.Join(mp, "cgroup.controllers"))
		return string(b), err
	})
}

// Cgroup is a CPU-limited cgroup the lab created directly under the root of
// the CPU hierarchy (and, for v1, of cpuacct). Memory is left alone: the
// processes keep the memory cgroup they inherited, so a backend's memory
// figures in cgroup scope are those of that inherited group.
type Cgroup struct {
	// Name is "PREFIX-NAME", the directory name in every hierarchy.
	Name     string
	Version  CgroupVersion
	CPUQuota float64 // cores; 0 means unlimited
	dirs     []string
}

// QuotaLine renders a quota in cores as the v1 cfs_quota_us value and the
// v2 cpu.max line; cores <= 0 means no limit.
func QuotaLine(cores float64) (v1 string, v2 string) {
	if cores <= 0 {
		return "-1", fmt.Sprintf("max %d", CFSPeriod)
	}
	q := int64(cores*CFSPeriod + 0.5)
	q = max(q, 1000) // the kernel's minimum quota is 1 ms
	return strconv.FormatInt(q, 10), fmt.Sprintf("%d %d", q, CFSPeriod)
}

// NewCgroup creates cgroup NAME limited to cpuQuota cores (0.25 = a quarter
// of one CPU; 0 = unlimited), detecting v1 or v2. Close moves any task left
// in it to the root group and removes the directories.
func (l *Lab) NewCgroup(name string, cpuQuota float64) (*Cgroup, error) {
	lay, err := DetectCgroups()
	if err != nil {
		return nil, fmt.Errorf("cgroup %q: %w", name, err)
	}
	full, err := l.claimName("cgroup", name)
	if err != nil {
		return nil, err
	}
	cg := &Cgroup{Name: full, Version: lay.Version, CPUQuota: cpuQuota}
	if err := l.onClose("cgroup "+full, cg.remove); err != nil {
		return nil, err
	}
	v1q, v2q := QuotaLine(cpuQuota)
	switch lay.Version {
	case CgroupV1:
		roots := []string{lay.CPU}
		if lay.CPUAcct != lay.CPU {
			roots = append(roots, lay.CPUAcct)
		}
		for _, r := range roots {
			d := filepath.Join(r, full)
			if err := os.Mkdir(d, 0o755); err != nil {
				return nil, fmt.Errorf("cgroup %q: %w", name, err)
			}
			cg.dirs = append(cg.dirs, d)
		}
		if err := writeFile(filepath.Join(cg.dirs[0], "cpu.cfs_period_us"), strconv.Itoa(CFSPeriod)); err != nil {
			return nil, fmt.Errorf("cgroup %q: %w", name, err)
		}
		if err := writeFile(filepath.Join(cg.dirs[0], "cpu.cfs_quota_us"), v1q); err != nil {
			return nil, fmt.Errorf("cgroup %q: %w", name, err)
		}
	case CgroupV2:
		sub := filepath.Join(lay.CPU, "cgroup.subtree_control")
		if err := writeFile(sub, "+cpu"); err != nil {
			return nil, fmt.Errorf("cgroup %q: enable cpu controller: %w", name, err)
		}
		d := filepath.Join(lay.CPU, full)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup %q: %w", name, err)
		}
		cg.dirs = append(cg.dirs, d)
		if err := writeFile(filepath.Join(d, "cpu.max"), v2q); err != nil {
			return nil, fmt.Errorf("cgroup %q: %w", name, err)
		}
	}
	l.Log.Info("cgroup", "name", full, "version", lay.Version.String(), "cpu_quota", cpuQuota, "dirs", cg.dirs)
	return cg, nil
}

func writeFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(s)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %q to %s: %w", s, path, werr)
	}
	return cerr
}

// Path is the directory the probe's cgroup scope should read: for v1 the
// cpu-controller directory (cpu.cfs_quota_us, cpu.cfs_period_us; the usage
// counter cpuacct.usage is in CPUAcctPath), for v2 the unified directory
// (cpu.max, cpu.stat usage_usec).
func (c *Cgroup) Path() string { return c.dirs[0] }

// CPUAcctPath is the v1 directory holding cpuacct.usage (equal to Path when
// cpu and cpuacct are co-mounted); for v2 it is Path.
func (c *Cgroup) CPUAcctPath() string { return c.dirs[len(c.dirs)-1] }

// Dirs lists every directory a member process must be in.
func (c *Cgroup) Dirs() []string { return slices.Clone(c.dirs) }

// Add moves pid into the cgroup (every hierarchy). Prefer Lab.Start with a
// cgroup, which joins before exec.
func (c *Cgroup) Add(pid int) error {
	for _, d := range c.dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("cgroup %s: add pid %d: %w", c.Name, pid, err)
		}
	}
	return nil
}

// Procs lists the PIDs in the cgroup's first directory.
func (c *Cgroup) Procs() ([]int, error) {
	if len(c.dirs) == 0 {
		return nil, nil
	}
	return readProcs(c.dirs[0])
}

func readProcs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s/cgroup.procs: %q: %w", dir, f, err)
		}
		pids = append(pids, n)
	}
	return pids, nil
}

func (c *Cgroup) remove() error {
	var errs []error
	for i := len(c.dirs) - 1; i >= 0; i-- {
		if err := removeCgroupDir(c.dirs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroupDir moves leftover tasks to the parent group, then removes
// dir, retrying briefly while exiting tasks still pin it (EBUSY).
func removeCgroupDir(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	parent := filepath.Join(filepath.Dir(dir), "cgroup.procs")
	return Poll(3*time.Second, func() error {
		pids, err := readProcs(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, p := range pids {
			// A task that exits meanwhile gives ESRCH; the next round sees.
			_ = writeFile(parent, strconv.Itoa(p))
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		return nil
	})
}
