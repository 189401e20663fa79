package lab

import (
	"errors"
	"strings"
	"testing"
)

func TestFindCPUCgroup(t *testing.T) {
	cases := []struct {
		file        string
		controllers map[string]string
		want        CgroupLayout
		wantErr     string
	}{
		// This machine: v1 cpu and cpuacct apart, cgroup2 with only hugetlb.
		{"mountinfo-hybrid-v1cpu.txt", map[string]string{"/sys/fs/cgroup/unified": "hugetlb\n"},
			CgroupLayout{Version: CgroupV1, CPU: "/sys/fs/cgroup/cpu", CPUAcct: "/sys/fs/cgroup/cpuacct"}, ""},
		{"mountinfo-v1-comounted.txt", map[string]string{"/sys/fs/cgroup/unified": ""},
			CgroupLayout{Version: CgroupV1, CPU: "/sys/fs/cgroup/cpu,cpuacct", CPUAcct: "/sys/fs/cgroup/cpu,cpuacct"}, ""},
		{"mountinfo-v2.txt", map[string]string{"/sys/fs/cgroup": "cpuset cpu io memory pids\n"},
			CgroupLayout{Version: CgroupV2, CPU: "/sys/fs/cgroup"}, ""},
		{"mountinfo-v2.txt", map[string]string{"/sys/fs/cgroup": "memory pids\n"},
			CgroupLayout{}, `offers "memory pids", no cpu`},
		{"mountinfo-v2.txt", map[string]string{},
			CgroupLayout{}, "no cgroup hierarchy with the cpu controller"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			mounts, err := ParseMountinfo(readTestdata(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := FindCPUCgroup(mounts, func(mp string) (string, error) {
				s, ok := c.controllers[mp]
				if !ok {
					return "", errors.New("read " + mp + ": no such file")
				}
				return s, nil
			})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestFindCPUCgroupNeedsCPUAcct(t *testing.T) {
	mounts := []Mount{{Root: "/", MountPoint: "/cg/cpu", FSType: "cgroup", SuperOptions: []string{"rw", "cpu"}}}
	_, err := FindCPUCgroup(mounts, nil)
	if err == nil || !strings.Contains(err.Error(), "cpuacct") {
		t.Fatalf("err %v, want a missing cpuacct error", err)
	}
}

func TestParseMountinfo(t *testing.T) {
	mounts, err := ParseMountinfo(readTestdata(t, "mountinfo-v1-comounted.txt"))
	if err != nil {
		t.Fatal(err)
	}
	last := mounts[len(mounts)-1]
	if last.MountPoint != "/sys/fs/cgroup/my dir" || last.FSType != "cgroup" || strings.Join(last.SuperOptions, ",") != "rw,memory" {
		t.Fatalf("last mount %+v: want octal \\040 decoded, fstype cgroup, options rw,memory", last)
	}
	bad := []string{
		"1 2 3:4 / /x rw - cgroup",
		"1 2 3:4 / /x rw cgroup cgroup rw",
		"short - a b c",
	}
	for _, b := range bad {
		if _, err := ParseMountinfo(b); err == nil {
			t.Errorf("ParseMountinfo(%q) accepted a malformed line", b)
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	for _, file := range []string{"mountinfo-hybrid-v1cpu.txt", "mountinfo-v2.txt", "mountinfo-v1-comounted.txt"} {
		f.Add(readTestdata(f, file))
	}
	f.Add(`1 2 3:4 / /a\04 rw - cgroup x rw,cpu`)
	f.Fuzz(func(t *testing.T, in string) {
		mounts, err := ParseMountinfo(in)
		if err != nil {
			return
		}
		for _, m := range mounts {
			if m.FSType == "" || len(m.SuperOptions) == 0 {
				t.Fatalf("mount %+v from %q: empty fstype or options", m, in)
			}
		}
		// Detection must not fail on anything the parser accepts, other
		// than by saying no cpu hierarchy was found.
		_, err = FindCPUCgroup(mounts, func(string) (string, error) { return "cpu", nil })
		if err != nil && !strings.Contains(err.Error(), "cpu") {
			t.Fatalf("FindCPUCgroup: %v", err)
		}
	})
}

func TestQuotaLine(t *testing.T) {
	cases := []struct {
		cores  float64
		v1, v2 string
	}{
		{0.25, "25000", "25000 100000"},
		{1, "100000", "100000 100000"},
		{1.5, "150000", "150000 100000"},
		{0.001, "1000", "1000 100000"},
		{0, "-1", "max 100000"},
		{-2, "-1", "max 100000"},
	}
	for _, c := range cases {
		v1, v2 := QuotaLine(c.cores)
		if v1 != c.v1 || v2 != c.v2 {
			t.Errorf("QuotaLine(%v) = %q, %q; want %q, %q", c.cores, v1, v2, c.v1, c.v2)
		}
	}
}
