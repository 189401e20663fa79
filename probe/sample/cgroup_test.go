package sample

import (
	"context"
	"errors"
	"flowweight/internal/testutil"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const pureV2 = `25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
`

const coMounted = `31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`

func TestResolveCgroup(t *testing.T) {
	hybrid := string(fixture(t, "mountinfo_hybrid_v1"))
	v1 := func(rel string) Cgroup {
		return Cgroup{Version: 1, CPU: "/sys/fs/cgroup/cpu" + rel, CPUAcct: "/sys/fs/cgroup/cpuacct" + rel, Memory: "/sys/fs/cgroup/memory" + rel}
	}
	tests := []struct {
		name, mounts, path string
		want               Cgroup
		err                string
	}{
		{"v1 absolute under cpu", hybrid, "/sys/fs/cgroup/cpu/flowweight/web1", v1("/flowweight/web1"), ""},
		{"v1 absolute under memory", hybrid, "/sys/fs/cgroup/memory/flowweight/web1/", v1("/flowweight/web1"), ""},
		{"v1 relative", hybrid, "flowweight/web1", v1("/flowweight/web1"), ""},
		{"hybrid unified", hybrid, "/sys/fs/cgroup/unified/system.slice/x.service", Cgroup{Version: 2, Dir: "/sys/fs/cgroup/unified/system.slice/x.service"}, ""},
		{"pure v2 absolute", pureV2, "/sys/fs/cgroup/system.slice/web.service", Cgroup{Version: 2, Dir: "/sys/fs/cgroup/system.slice/web.service"}, ""},
		{"pure v2 relative", pureV2, "system.slice/web.service", Cgroup{Version: 2, Dir: "/sys/fs/cgroup/system.slice/web.service"}, ""},
		{"co-mounted", coMounted, "/sys/fs/cgroup/cpu,cpuacct/web1", Cgroup{Version: 1, CPU: "/sys/fs/cgroup/cpu,cpuacct/web1", CPUAcct: "/sys/fs/cgroup/cpu,cpuacct/web1", Memory: "/sys/fs/cgroup/memory/web1"}, ""},
		{"not under a mount", hybrid, "/srv/web1", Cgroup{}, `"/srv/web1" is not under any cgroup mount`},
		{"tmpfs parent is not a cgroup", hybrid, "/sys/fs/cgroup/web1", Cgroup{}, "not under any cgroup mount"},
		{"v1 without memory", "31 30 0:28 / /c rw - cgroup cgroup rw,cpu,cpuacct\n", "/c/x", Cgroup{}, "memory not mounted"},
		{"nothing mounted", "1 0 0:1 / / rw - ext4 /dev/sda rw\n", "web1", Cgroup{}, "no cgroup file system"},
		{"empty", hybrid, "", Cgroup{}, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := ParseMountInfo([]byte(tt.mounts))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ResolveCgroup(tt.path, ms)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseMountInfo(t *testing.T) {
	ms, err := ParseMountInfo([]byte(`36 35 98:0 /mnt1 /mnt\040with\040space rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Mount{Root: "/mnt1", Point: "/mnt with space", FSType: "ext3", SuperOptions: []string{"rw", "errors=continue"}}
	if len(ms) != 1 || ms[0].Point != want.Point || ms[0].FSType != want.FSType || ms[0].Root != want.Root ||
		strings.Join(ms[0].SuperOptions, ",") != "rw,errors=continue" {
		t.Errorf("got %+v, want %+v", ms, want)
	}
	for _, bad := range []string{"1 2 3 4 5 6\n", "1 2 3 / /x rw - \n", "ok line\n"} {
		if _, err := ParseMountInfo([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: error %v, want line 1", bad, err)
		}
	}
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add(fixture(f, "mountinfo_hybrid_v1"))
	f.Add([]byte(pureV2))
	f.Add([]byte(`1 2 3 \04 \0401 a - b`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseMountInfo(data)
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.FSType == "" {
				t.Fatalf("mount %+v without type", m)
			}
			_, _ = ResolveCgroup(m.Point+"/x", ms)
		}
	})
}

func TestParseCPUQuotas(t *testing.T) {
	tests := []struct {
		name  string
		parse func() (CPUQuota, error)
		host  float64
		cores float64
		err   string
	}{
		{"v2 quarter", func() (CPUQuota, error) { return ParseCPUMax([]byte("25000 100000\n")) }, 2, 0.25, ""},
		{"v2 max", func() (CPUQuota, error) { return ParseCPUMax([]byte("max 100000\n")) }, 2, 2, ""},
		{"v2 above host", func() (CPUQuota, error) { return ParseCPUMax([]byte("400000 100000")) }, 2, 2, ""},
		{"v2 one field", func() (CPUQuota, error) { return ParseCPUMax([]byte("max")) }, 2, 0, "QUOTA PERIOD"},
		{"v2 bad period", func() (CPUQuota, error) { return ParseCPUMax([]byte("max 0")) }, 2, 0, "bad period"},
		{"v2 bad quota", func() (CPUQuota, error) { return ParseCPUMax([]byte("-5 100000")) }, 2, 0, "bad quota"},
		{"v1 quarter", func() (CPUQuota, error) { return ParseCFSQuota([]byte("25000\n"), []byte("100000\n")) }, 2, 0.25, ""},
		{"v1 unlimited", func() (CPUQuota, error) { return ParseCFSQuota([]byte("-1\n"), []byte("100000\n")) }, 4, 4, ""},
		{"v1 1.5 cores", func() (CPUQuota, error) { return ParseCFSQuota([]byte("150000"), []byte("100000")) }, 4, 1.5, ""},
		{"v1 bad quota", func() (CPUQuota, error) { return ParseCFSQuota([]byte("x"), []byte("100000")) }, 2, 0, "cfs_quota_us"},
		{"v1 zero period", func() (CPUQuota, error) { return ParseCFSQuota([]byte("1"), []byte("0")) }, 2, 0, "cfs_period_us"},
	}
	for _, tt := range tests {
		q, err := tt.parse()
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := q.Cores(tt.host); got != tt.cores {
			t.Errorf("%s: %v cores, want %v", tt.name, got, tt.cores)
		}
	}
}

func TestParseKeyedAndLimit(t *testing.T) {
	stat := fixture(t, "v1/memory/fwfixture/memory.stat")
	if v, found, err := ParseKeyed(stat, "total_inactive_file"); err != nil || !found || v != 20000768 {
		t.Errorf("total_inactive_file: %d %v %v", v, found, err)
	}
	if _, found, err := ParseKeyed(stat, "inactive"); err != nil || found {
		t.Errorf("prefix of a key matched: %v %v", found, err)
	}
	if _, _, err := ParseKeyed([]byte("usage_usec x\n"), "usage_usec"); err == nil || !strings.Contains(err.Error(), "usage_usec") {
		t.Errorf("bad value: %v", err)
	}
	if _, ok, err := ParseLimit([]byte("max\n")); ok || err != nil {
		t.Errorf("max: %v %v", ok, err)
	}
	if l, ok, err := ParseLimit([]byte("536870912\n")); !ok || err != nil || l != 536870912 {
		t.Errorf("limit: %d %v %v", l, ok, err)
	}
	if _, _, err := ParseLimit([]byte("lots")); err == nil {
		t.Error("no error for lots")
	}
}

func FuzzParseCgroupFiles(f *testing.F) {
	f.Add([]byte("25000 100000\n"))
	f.Add([]byte("max 100000"))
	f.Add([]byte("usage_usec 781372000\nuser_usec 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if q, err := ParseCPUMax(data); err == nil {
			if c := q.Cores(2); c <= 0 || c > 2 || math.IsNaN(c) {
				t.Fatalf("%q: %v cores", data, c)
			}
		}
		if q, err := ParseCFSQuota(data, data); err == nil && q.Cores(2) <= 0 {
			t.Fatalf("%q: non-positive cores", data)
		}
		_, _, _ = ParseKeyed(data, "usage_usec")
		_, _, _ = ParseLimit(data)
	})
}

func TestCgroupCPUV1(t *testing.T) {
	files := treeReader(t, "v1", "/sys/fs/cgroup")
	cg := Cgroup{Version: 1, CPU: "/sys/fs/cgroup/cpu/fwfixture", CPUAcct: "/sys/fs/cgroup/cpuacct/fwfixture", Memory: "/sys/fs/cgroup/memory/fwfixture"}
	clk := testutil.NewClock(time.Unix(1000, 0))
	s := &CgroupCPU{Cgroup: cg, HostCPUs: 2, Read: mapReader(files), Now: clk.Now}
	usageFile := "/sys/fs/cgroup/cpuacct/fwfixture/cpuacct.usage"
	base, err := ParseUint(files[usageFile])
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Sample(context.Background())
	if !errors.Is(err, ErrFirstSample) || v.Has(FieldCPUUtil) || !v.Has(FieldCPUCount) || v.CPUCount != 0.25 {
		t.Fatalf("first sample: %+v, %v", v, err)
	}
	steps := []struct {
		elapsed time.Duration
		usedNs  uint64
		want    float64
	}{
		{time.Second, 250_000_000, 1}, // the whole quarter CPU
		{2 * time.Second, 125_000_000, 0.25},
		{time.Second, 0, 0},
		{time.Second, 500_000_000, 1}, // over quota in one window: clamped
	}
	for i, st := range steps {
		base += st.usedNs
		files[usageFile] = []byte(strconv.FormatUint(base, 10) + "\n")
		clk.Advance(st.elapsed)
		v, err := s.Sample(context.Background())
		if err != nil || !v.Has(FieldCPUUtil|FieldCPUCount) || math.Abs(v.CPUUtil-st.want) > 1e-9 {
			t.Errorf("step %d: %+v, %v; want util %v", i, v, err, st.want)
		}
	}
	// A counter reset gives no rate, and the next sample measures from the new value.
	files[usageFile] = []byte("5\n")
	clk.Advance(time.Second)
	if v, err := s.Sample(context.Background()); err == nil || v.Has(FieldCPUUtil) || !v.Has(FieldCPUCount) {
		t.Errorf("reset: %+v, %v", v, err)
	}
	files[usageFile] = []byte("125000005\n")
	clk.Advance(time.Second)
	if v, err := s.Sample(context.Background()); err != nil || v.CPUUtil != 0.5 {
		t.Errorf("after reset: %+v, %v", v, err)
	}
	// A missing quota file loses the count but not the error message's file name.
	delete(files, "/sys/fs/cgroup/cpu/fwfixture/cpu.cfs_quota_us")
	if _, err := s.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "cpu.cfs_quota_us") {
		t.Errorf("missing quota: %v", err)
	}
}

func TestCgroupCPUV2(t *testing.T) {
	files := treeReader(t, "v2", "/cg")
	clk := testutil.NewClock(time.Unix(1000, 0))
	s := &CgroupCPU{Cgroup: Cgroup{Version: 2, Dir: "/cg/web1"}, HostCPUs: 2, Read: mapReader(files), Now: clk.Now}
	if v, err := s.Sample(context.Background()); !errors.Is(err, ErrFirstSample) || v.CPUCount != 0.25 {
		t.Fatalf("first: %+v, %v", v, err)
	}
	files["/cg/web1/cpu.stat"] = []byte(strings.Replace(string(files["/cg/web1/cpu.stat"]), "usage_usec 781372000", "usage_usec 781497000", 1))
	clk.Advance(time.Second)
	if v, err := s.Sample(context.Background()); err != nil || v.CPUUtil != 0.5 {
		t.Errorf("half: %+v, %v", v, err)
	}
	files["/cg/web1/cpu.max"] = []byte("max 100000\n")
	clk.Advance(time.Second)
	if v, err := s.Sample(context.Background()); err != nil || v.CPUCount != 2 || v.CPUUtil != 0 {
		t.Errorf("unlimited: %+v, %v", v, err)
	}
	delete(files, "/cg/web1/cpu.max") // cpu controller not enabled: no quota
	clk.Advance(time.Second)
	if v, err := s.Sample(context.Background()); err != nil || v.CPUCount != 2 {
		t.Errorf("no cpu.max: %+v, %v", v, err)
	}
	files["/cg/web1/cpu.stat"] = []byte("user_usec 1\n")
	if _, err := s.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "usage_usec") {
		t.Errorf("no usage: %v", err)
	}
}

func TestCgroupMem(t *testing.T) {
	v1 := treeReader(t, "v1", "/sys/fs/cgroup")
	v2 := treeReader(t, "v2", "/cg")
	const hostMem = 1 << 34
	// nested builds a tree whose directories hold the given limit files (nearest last).
	nested := func(usage string, files map[string]string) map[string][]byte {
		m := map[string][]byte{}
		for k, v := range files {
			m[k] = []byte(v)
		}
		for k := range files {
			m[path.Join(path.Dir(k), "memory.usage_in_bytes")] = []byte(usage)
			m[path.Join(path.Dir(k), "memory.current")] = []byte(usage)
		}
		return m
	}
	const unlimitedV1 = "9223372036854771712\n"
	tests := []struct {
		name      string
		files     map[string][]byte
		cg        Cgroup
		hostMem   uint64
		wantBytes uint64
		wantUsed  uint64 // working set
		wantBound string
		err       string
	}{
		{"v1 limited", v1, Cgroup{Version: 1, Memory: "/sys/fs/cgroup/memory/fwfixture"}, hostMem, 268435456, 20860928 - 20000768, MemBoundCgroup, ""},
		{"v1 unlimited clamps to host", v1, Cgroup{Version: 1, Memory: "/sys/fs/cgroup/memory/unlimited"}, hostMem, hostMem, 0, MemBoundHost, ""},
		{"v1 limit above host", v1, Cgroup{Version: 1, Memory: "/sys/fs/cgroup/memory/fwfixture"}, 1 << 20, 1 << 20, 20860928 - 20000768, MemBoundHost, ""},
		{"v2 limited", v2, Cgroup{Version: 2, Dir: "/cg/web1"}, hostMem, 536870912, 104857600 - 31457280, MemBoundCgroup, ""},
		// The lab's case: a backend cgroup without a limit of its own.
		{"v1 unlimited, limited parent", nested("1048576\n", map[string]string{
			"/m/memory.limit_in_bytes":         unlimitedV1,
			"/m/lab/memory.limit_in_bytes":     "67108864\n",
			"/m/lab/be1/memory.limit_in_bytes": unlimitedV1,
		}), Cgroup{Version: 1, Memory: "/m/lab/be1"}, hostMem, 64 << 20, 1 << 20, MemBoundAncestor + "/m/lab", ""},
		{"v1 tighter grandparent", nested("1048576\n", map[string]string{
			"/m/memory.limit_in_bytes":         "33554432\n",
			"/m/lab/memory.limit_in_bytes":     "67108864\n",
			"/m/lab/be1/memory.limit_in_bytes": "134217728\n",
		}), Cgroup{Version: 1, Memory: "/m/lab/be1"}, hostMem, 32 << 20, 1 << 20, MemBoundAncestor + "/m", ""},
		{"v1 parent not hierarchical", func() map[string][]byte {
			m := nested("1048576\n", map[string]string{
				"/m/lab/memory.limit_in_bytes":     "67108864\n",
				"/m/lab/be1/memory.limit_in_bytes": unlimitedV1,
			})
			m["/m/lab/memory.use_hierarchy"] = []byte("0\n")
			m["/m/lab/be1/memory.use_hierarchy"] = []byte("0\n")
			return m
		}(), Cgroup{Version: 1, Memory: "/m/lab/be1"}, hostMem, hostMem, 1 << 20, MemBoundHost, ""},
		{"v1 nothing limited", nested("1048576\n", map[string]string{
			"/m/memory.limit_in_bytes":         unlimitedV1,
			"/m/lab/be1/memory.limit_in_bytes": unlimitedV1,
		}), Cgroup{Version: 1, Memory: "/m/lab/be1"}, hostMem, hostMem, 1 << 20, MemBoundHost, ""},
		{"v1 equal limits: the nearest", nested("1048576\n", map[string]string{
			"/m/lab/memory.limit_in_bytes":     "67108864\n",
			"/m/lab/be1/memory.limit_in_bytes": "67108864\n",
		}), Cgroup{Version: 1, Memory: "/m/lab/be1"}, hostMem, 64 << 20, 1 << 20, MemBoundCgroup, ""},
		{"v2 unlimited, limited parent", nested("2097152\n", map[string]string{
			"/cg/sys.slice/memory.max":     "16777216\n",
			"/cg/sys.slice/web/memory.max": "max\n",
		}), Cgroup{Version: 2, Dir: "/cg/sys.slice/web"}, hostMem, 16 << 20, 2 << 20, MemBoundAncestor + "/cg/sys.slice", ""},
		{"v2 bad ancestor", nested("1\n", map[string]string{
			"/cg/a/memory.max":   "lots\n",
			"/cg/a/b/memory.max": "max\n",
		}), Cgroup{Version: 2, Dir: "/cg/a/b"}, hostMem, 0, 0, "", "/cg/a/memory.max"},
		{"v2 limit 0", nested("0\n", map[string]string{"/cg/a/memory.max": "0\n"}), Cgroup{Version: 2, Dir: "/cg/a"}, hostMem, 0, 0, "", "is 0 bytes"},
		{"v2 unknown host", map[string][]byte{"/x/memory.current": []byte("1\n"), "/x/memory.max": []byte("max\n")}, Cgroup{Version: 2, Dir: "/x"}, 0, 0, 0, "", "host memory unknown"},
		{"v2 missing current", map[string][]byte{}, Cgroup{Version: 2, Dir: "/x"}, hostMem, 0, 0, "", "memory.current"},
		{"v2 bad max", map[string][]byte{"/x/memory.current": []byte("1\n"), "/x/memory.max": []byte("lots\n")}, Cgroup{Version: 2, Dir: "/x"}, hostMem, 0, 0, "", "/x/memory.max"},
		{"v2 missing max", map[string][]byte{"/x/memory.current": []byte("1\n")}, Cgroup{Version: 2, Dir: "/x"}, hostMem, 0, 0, "", "/x/memory.max"},
	}
	for _, tt := range tests {
		s := &CgroupMem{Cgroup: tt.cg, HostMem: tt.hostMem, Read: mapReader(tt.files)}
		v, err := s.Sample(context.Background())
		if tt.err != "" {
			if err == nil || v.Known != 0 || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %+v, error %v, want %q", tt.name, v, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if v.MemBound != tt.wantBound {
			t.Errorf("%s: bound %q, want %q", tt.name, v.MemBound, tt.wantBound)
		}
		if tt.name == "v1 unlimited clamps to host" {
			// The root's working set is whatever the machine had; check only the size.
			if v.MemBytes != tt.wantBytes {
				t.Errorf("%s: size %d, want %d", tt.name, v.MemBytes, tt.wantBytes)
			}
			continue
		}
		want := float64(tt.wantUsed) / float64(tt.wantBytes)
		if !v.Has(FieldMemUtil|FieldMemBytes) || v.MemBytes != tt.wantBytes || math.Abs(v.MemUtil-want) > 1e-12 {
			t.Errorf("%s: %+v, want bytes %d util %v", tt.name, v, tt.wantBytes, want)
		}
	}
}

func TestMemBound(t *testing.T) {
	lim := func(dir string, b uint64) MemLimit { return MemLimit{Dir: dir, Bytes: b, Limited: true} }
	free := func(dir string) MemLimit { return MemLimit{Dir: dir} }
	tests := []struct {
		name   string
		limits []MemLimit
		host   uint64
		size   uint64
		bound  string
	}{
		{"none", nil, 100, 100, MemBoundHost},
		{"own", []MemLimit{lim("/a/b", 10), free("/a")}, 100, 10, MemBoundCgroup},
		{"parent", []MemLimit{free("/a/b"), lim("/a", 10)}, 100, 10, MemBoundAncestor + "/a"},
		{"tightest wins", []MemLimit{lim("/a/b", 50), lim("/a", 20), lim("/", 30)}, 100, 20, MemBoundAncestor + "/a"},
		{"above host", []MemLimit{lim("/a/b", 500)}, 100, 100, MemBoundHost},
		{"equal to host", []MemLimit{lim("/a/b", 100)}, 100, 100, MemBoundHost},
		{"host unknown", []MemLimit{free("/a/b"), lim("/a", 7)}, 0, 7, MemBoundAncestor + "/a"},
		{"nothing known", []MemLimit{free("/a/b")}, 0, 0, MemBoundHost},
	}
	for _, tt := range tests {
		size, bound := MemBound(tt.limits, tt.host)
		if size != tt.size || bound != tt.bound {
			t.Errorf("%s: %d %q, want %d %q", tt.name, size, bound, tt.size, tt.bound)
		}
	}
}

func TestEvalExisting(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "cpu,cpuacct")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("cpu,cpuacct", filepath.Join(dir, "cpu")); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{filepath.Join(dir, "cpu", "web1", "x"), filepath.Join(real, "web1", "x")}, // does not exist yet
		{filepath.Join(dir, "cpu"), real},
		{"/nonexistent-root/a", "/nonexistent-root/a"},
	}
	for _, tt := range tests {
		if got := evalExisting(tt.in); got != tt.want {
			t.Errorf("evalExisting(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// evalIn resolves links as seen from another root: an absolute target is under that root.
func TestEvalIn(t *testing.T) {
	root := t.TempDir()
	cg := filepath.Join(root, "sys", "fs", "cgroup")
	if err := os.MkdirAll(filepath.Join(cg, "cpu,cpuacct", "web1"), 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"cpu":   "cpu,cpuacct",                // relative, as systemd makes them
		"abs":   "/sys/fs/cgroup/cpu,cpuacct", // absolute: from root, not from /
		"up":    "../cgroup/cpu",              // relative with .., through another link
		"loop1": "loop2",
		"loop2": "loop1",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(cg, name)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ in, want, err string }{
		{"/sys/fs/cgroup/cpu/web1", "/sys/fs/cgroup/cpu,cpuacct/web1", ""},
		{"/sys/fs/cgroup/abs/web1", "/sys/fs/cgroup/cpu,cpuacct/web1", ""},
		{"/sys/fs/cgroup/up/web1", "/sys/fs/cgroup/cpu,cpuacct/web1", ""},
		{"/sys/fs/cgroup/cpu/new/deeper", "/sys/fs/cgroup/cpu,cpuacct/new/deeper", ""}, // not created yet
		{"/sys/fs/cgroup/./cpu/../cpu/web1/", "/sys/fs/cgroup/cpu,cpuacct/web1", ""},
		{"/sys/fs/cgroup/loop1/x", "", "too many symbolic links"},
		{"/", "/", ""},
	}
	for _, tt := range tests {
		got, err := evalIn(root, tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("evalIn(%s) = %q %v, want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("evalIn(%s) = %q %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestCgroupUnder(t *testing.T) {
	v1 := Cgroup{Version: 1, CPU: "/sys/fs/cgroup/cpu/a", CPUAcct: "/sys/fs/cgroup/cpuacct/a", Memory: "/sys/fs/cgroup/memory/a"}
	want := Cgroup{Version: 1, CPU: "/proc/1/root/sys/fs/cgroup/cpu/a", CPUAcct: "/proc/1/root/sys/fs/cgroup/cpuacct/a",
		Memory: "/proc/1/root/sys/fs/cgroup/memory/a", Root: "/proc/1/root"}
	if got := v1.Under("/proc/1/root"); got != want {
		t.Errorf("v1: %+v", got)
	}
	if got := (Cgroup{Version: 2, Dir: "/sys/fs/cgroup/a"}).Under("/r"); got != (Cgroup{Version: 2, Dir: "/r/sys/fs/cgroup/a", Root: "/r"}) {
		t.Errorf("v2: %+v", got)
	}
	ms, _ := ParseMountInfo([]byte("1 0 0:1 / / rw - ext4 /dev/sda rw\n22 1 0:20 / /sys rw - sysfs sysfs rw\n"))
	if HasCgroupMount(ms) {
		t.Error("no cgroup mount, as under ip netns exec, but HasCgroupMount")
	}
	ms, _ = ParseMountInfo(fixture(t, "mountinfo_hybrid_v1"))
	if !HasCgroupMount(ms) {
		t.Error("hybrid mounts: HasCgroupMount false")
	}
}
