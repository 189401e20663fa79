package sample

import (
	"context"
	"errors"
	"flowweight/internal/testutil"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeProc is a /proc, a pidfile and cgroup files that a test edits between samples.
type fakeProc struct {
	files  map[string][]byte
	mtimes map[string]time.Time
}

func newFakeProc() *fakeProc {
	return &fakeProc{files: map[string][]byte{}, mtimes: map[string]time.Time{}}
}

func (f *fakeProc) read(name string) ([]byte, error) { return mapReader(f.files)(name) }

// readDir lists the next path component of every file under name, as a directory would.
func (f *fakeProc) readDir(name string) ([]string, error) {
	var out []string
	for k := range f.files {
		if rest, ok := strings.CutPrefix(k, name+"/"); ok {
			first, _, _ := strings.Cut(rest, "/")
			if !slices.Contains(out, first) {
				out = append(out, first)
			}
		}
	}
	if out == nil {
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeProc) modTime(name string) (time.Time, error) {
	t, ok := f.mtimes[name]
	if !ok {
		return time.Time{}, fmt.Errorf("stat %s: %w", name, fs.ErrNotExist)
	}
	return t, nil
}

// statLine is a /proc/PID/stat line as the kernel writes it, with a command name that has a
// space and a parenthesis in it; the CPU times go to utime and cutime.
func statLine(pid, ppid int, own, reaped, start uint64) []byte {
	f := make([]string, 52)
	for i := range f {
		f[i] = "0"
	}
	f[0], f[1], f[2] = fmt.Sprint(pid), "(web (worker)", "S"
	f[3] = fmt.Sprint(ppid)
	f[13], f[14], f[15], f[16] = fmt.Sprint(own), "0", fmt.Sprint(reaped), "0"
	f[21] = fmt.Sprint(start)
	return []byte(strings.Join(f, " ") + "\n")
}

// proc adds process pid, a single thread whose children file lists kids.
func (f *fakeProc) proc(pid, ppid int, own, reaped, start uint64, kids ...int) {
	f.files[fmt.Sprintf("/proc/%d/stat", pid)] = statLine(pid, ppid, own, reaped, start)
	f.files[fmt.Sprintf("/proc/%d/task/%d/stat", pid, pid)] = statLine(pid, ppid, own, reaped, start)
	var ks []string
	for _, k := range kids {
		ks = append(ks, fmt.Sprint(k))
	}
	f.files[fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)] = []byte(strings.Join(ks, " ") + " ")
}

func (f *fakeProc) drop(pid int) {
	prefix := fmt.Sprintf("/proc/%d/", pid)
	for k := range f.files {
		if strings.HasPrefix(k, prefix) {
			delete(f.files, k)
		}
	}
}

func (f *fakeProc) pidfile(pid int, at time.Time) {
	f.files["/run/web.pid"] = []byte(fmt.Sprintf("%d\n", pid))
	f.mtimes["/run/web.pid"] = at
}

// webTree is a service: PID 100 with a second thread 101; 100 forked 200, thread 101 forked
// 300, and 200 forked 400. Unrelated process 900 is a neighbour.
func webTree(f *fakeProc, clk *testutil.Clock) {
	f.pidfile(100, clk.Now())
	f.proc(1, 0, 5000, 0, 1, 100, 900)
	f.proc(100, 1, 100, 0, 50, 200)
	f.files["/proc/100/task/101/children"] = []byte("300\n")
	f.files["/proc/100/task/101/stat"] = statLine(101, 1, 0, 0, 51)
	f.proc(200, 100, 30, 0, 60, 400)
	f.proc(300, 100, 10, 0, 70)
	f.proc(400, 200, 20, 0, 80)
	f.proc(900, 1, 7000, 0, 90)
}

type serviceStep struct {
	mod     func(f *fakeProc, clk *testutil.Clock)
	cores   float64 // want, when err is nil
	err     error   // ErrFirstSample, ErrUnavailable or nil
	message string  // in the error
}

func runServiceSteps(t *testing.T, s *ServiceCPU, f *fakeProc, clk *testutil.Clock, steps []serviceStep) {
	t.Helper()
	for i, st := range steps {
		if i > 0 {
			clk.Advance(time.Second)
		}
		if st.mod != nil {
			st.mod(f, clk)
		}
		v, err := s.Sample(context.Background())
		switch {
		case st.err == nil && err != nil:
			t.Fatalf("step %d: %v", i, err)
		case st.err != nil && !errors.Is(err, st.err):
			t.Fatalf("step %d: err %v, want %v", i, err, st.err)
		case err != nil && !strings.Contains(err.Error(), st.message):
			t.Errorf("step %d: error %q does not say %q", i, err, st.message)
		}
		if st.err != nil {
			if v.Known != 0 {
				t.Errorf("step %d: known %s on error: absent means no value, not 0", i, v.Known)
			}
			if wantU := errors.Is(st.err, ErrUnavailable); (v.Unavailable == FieldServiceCPU) != wantU {
				t.Errorf("step %d: unavailable %s, want service_cpu %v", i, v.Unavailable, wantU)
			}
			continue
		}
		if !v.Has(FieldServiceCPU) || math.Abs(v.ServiceCores-st.cores) > 1e-9 {
			t.Errorf("step %d: %+v, want service cores %v", i, v, st.cores)
		}
	}
}

func TestServiceCPUPIDFile(t *testing.T) {
	tests := []struct {
		name     string
		steps    []serviceStep
		wantScan bool
	}{
		{"tree across threads, neighbour not counted", []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) {
				f.proc(100, 1, 120, 0, 50, 200) // +20 ticks
				f.proc(300, 100, 20, 0, 70)     // +10, a child of the second thread
				f.proc(400, 200, 40, 0, 80)     // +20, a grandchild
				f.proc(900, 1, 9000, 0, 90)     // the neighbour's 2000 ticks do not count
			}, cores: 0.5},
			{cores: 0},
		}, false},
		{"a reaped worker's time moves to its parent", []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) {
				// 300 used 5 more ticks, exited and was reaped by 100: its 15 move to
				// 100's cutime, so only the 5 are new.
				f.drop(300)
				f.files["/proc/100/task/101/children"] = []byte("\n")
				f.proc(100, 1, 100, 15, 50, 200)
			}, cores: 0.05},
		}, false},
		{"a process leaving the tree unreaped restarts the rate", []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) {
				// 200 exited without being waited for and 400 went to init: their 50
				// ticks leave the sum, which is no rate.
				f.drop(200)
				f.proc(100, 1, 100, 0, 50)
				f.proc(1, 0, 5000, 0, 1, 100, 400, 900)
				f.proc(400, 1, 20, 0, 80)
			}, err: ErrFirstSample, message: "went back"},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.proc(100, 1, 110, 0, 50) }, cores: 0.1},
		}, false},
		{"a worker forked since the last reading counts whole", []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) {
				f.proc(100, 1, 100, 0, 50, 200, 500)
				f.proc(500, 100, 15, 0, 150)
			}, cores: 0.15},
		}, false},
		{"process gone: stale pidfile", []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.drop(100) }, err: ErrUnavailable, message: "names PID 100, which is not running (stale pidfile)"},
		}, false},
		{"PID reused by another process: stale until the pidfile is written", []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.proc(100, 1, 3, 0, 5000) },
				err: ErrUnavailable, message: "started at tick 5000, not 50 as when the pidfile was read: the PID was reused"},
			{err: ErrUnavailable, message: "reused"},
			{mod: func(f *fakeProc, clk *testutil.Clock) {
				f.pidfile(600, clk.Now())
				f.proc(600, 1, 40, 0, 6000)
			}, err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.proc(600, 1, 65, 0, 6000) }, cores: 0.25},
		}, false},
		{"restarted with the same PID and a new pidfile", []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, clk *testutil.Clock) {
				f.drop(200)
				f.proc(100, 1, 1, 0, 7000)
				f.pidfile(100, clk.Now())
			}, err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.proc(100, 1, 31, 0, 7000) }, cores: 0.3},
		}, false},
		{"pidfile missing", []serviceStep{
			{mod: func(f *fakeProc, _ *testutil.Clock) { delete(f.files, "/run/web.pid") }, err: ErrUnavailable, message: "pidfile: open /run/web.pid"},
		}, false},
		{"pidfile garbage", []serviceStep{
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.files["/run/web.pid"] = []byte("web\n") }, err: ErrUnavailable, message: `pidfile /run/web.pid: "web" is not a PID`},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.files["/run/web.pid"] = []byte("-3") }, err: ErrUnavailable, message: "is not a PID"},
		}, false},
		{"unparsable stat", []serviceStep{
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.files["/proc/100/stat"] = []byte("100 (web) S 1 2") }, err: ErrUnavailable, message: "/proc/100/stat: proc stat"},
		}, false},
		{"no children files: /proc is scanned", []serviceStep{
			{mod: func(f *fakeProc, _ *testutil.Clock) {
				for k := range f.files {
					if strings.HasSuffix(k, "/children") {
						delete(f.files, k)
					}
				}
			}, err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) {
				f.files["/proc/100/stat"] = statLine(100, 1, 120, 0, 50)
				f.files["/proc/300/stat"] = statLine(300, 100, 20, 0, 70)
				f.files["/proc/400/stat"] = statLine(400, 200, 40, 0, 80)
				f.files["/proc/900/stat"] = statLine(900, 1, 9000, 0, 90)
			}, cores: 0.5},
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, clk := newFakeProc(), testutil.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
			webTree(f, clk)
			s := &ServiceCPU{PIDFile: "/run/web.pid", Read: f.read, ReadDir: f.readDir, ModTime: f.modTime, Now: clk.Now}
			runServiceSteps(t, s, f, clk, tt.steps)
			if s.scan != tt.wantScan {
				t.Errorf("scanning /proc: %v, want %v", s.scan, tt.wantScan)
			}
		})
	}
}

func TestServiceCPUCgroup(t *testing.T) {
	v2 := Cgroup{Version: 2, Dir: "/sys/fs/cgroup/system.slice/web.service"}
	v1 := Cgroup{Version: 1, CPU: "/sys/fs/cgroup/cpu/web", CPUAcct: "/sys/fs/cgroup/cpuacct/web", Memory: "/sys/fs/cgroup/memory/web"}
	cpuStat := func(usec int) []byte {
		return fmt.Appendf(nil, "usage_usec %d\nuser_usec %d\nsystem_usec 0\n", usec, usec)
	}
	tests := []struct {
		name  string
		cg    Cgroup
		init  map[string][]byte
		steps []serviceStep
	}{
		{"v2 usage_usec", v2, map[string][]byte{v2.Dir + "/cpu.stat": cpuStat(1_000_000)}, []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.files[v2.Dir+"/cpu.stat"] = cpuStat(2_500_000) }, cores: 1.5},
		}},
		{"v1 cpuacct.usage", v1, map[string][]byte{v1.CPUAcct + "/cpuacct.usage": []byte("5000000000\n")}, []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.files[v1.CPUAcct+"/cpuacct.usage"] = []byte("5250000000\n") }, cores: 0.25},
		}},
		{"unit stopped: cgroup missing, then recreated", v2, map[string][]byte{v2.Dir + "/cpu.stat": cpuStat(1_000_000)}, []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) { delete(f.files, v2.Dir+"/cpu.stat") },
				err: ErrUnavailable, message: "cgroup /sys/fs/cgroup/system.slice/web.service does not exist (is the service running?)"},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.files[v2.Dir+"/cpu.stat"] = cpuStat(10) }, err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.files[v2.Dir+"/cpu.stat"] = cpuStat(200_010) }, cores: 0.2},
		}},
		{"counter went back without the cgroup going", v2, map[string][]byte{v2.Dir + "/cpu.stat": cpuStat(1_000_000)}, []serviceStep{
			{err: ErrFirstSample},
			{mod: func(f *fakeProc, _ *testutil.Clock) { f.files[v2.Dir+"/cpu.stat"] = cpuStat(10) }, err: ErrFirstSample, message: "went back"},
		}},
		{"cpu.stat without usage_usec", v2, map[string][]byte{v2.Dir + "/cpu.stat": []byte("nr_periods 3\n")}, []serviceStep{
			{err: ErrUnavailable, message: "no usage_usec"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, clk := newFakeProc(), testutil.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
			f.files = tt.init
			s := &ServiceCPU{Cgroup: tt.cg, Read: f.read, ReadDir: f.readDir, ModTime: f.modTime, Now: clk.Now}
			runServiceSteps(t, s, f, clk, tt.steps)
		})
	}
}

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ProcStat
		err  string
	}{
		{"command with space and parenthesis", string(statLine(42, 7, 11, 5, 1234)), ProcStat{PPID: 7, CPU: 16, StartTime: 1234}, ""},
		{"all four times", "9 (sh) R 1 9 9 0 -1 4194304 100 0 0 0 1 2 3 4 20 0 1 0 77 1000 10 18446744073709551615",
			ProcStat{PPID: 1, CPU: 10, StartTime: 77}, ""},
		{"no parenthesis", "9 sh R 1", ProcStat{}, "no ')'"},
		{"too short", "9 (sh) R 1 9 9", ProcStat{}, "want at least 20"},
		{"bad utime", "9 (sh) R 1 9 9 0 -1 4194304 100 0 0 0 x 2 3 4 20 0 1 0 77", ProcStat{}, "field 14"},
		{"bad start time", "9 (sh) R 1 9 9 0 -1 4194304 100 0 0 0 1 2 3 4 20 0 1 0 -77", ProcStat{}, "field 22"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcStat([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one naming %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestServiceCPUFraction(t *testing.T) {
	tests := []struct {
		cores, count, want float64
		ok                 bool
	}{
		{0.5, 2, 0.25, true},
		{0, 4, 0, true},
		{0.3, 0.25, 1, true}, // more than the quota within one window
		{1, 0, 0, false},
		{1, math.NaN(), 0, false},
		{math.NaN(), 2, 0, false},
		{-0.1, 2, 0, false},
	}
	for _, tt := range tests {
		if got, ok := ServiceCPUFraction(tt.cores, tt.count); got != tt.want || ok != tt.ok {
			t.Errorf("ServiceCPUFraction(%v, %v) = %v, %v; want %v, %v", tt.cores, tt.count, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParsePID(t *testing.T) {
	tests := []struct {
		in   string
		want int // 0: an error
	}{
		{"1234\n", 1234},
		{"  7 ", 7},
		{"0", 0},
		{"-3", 0},
		{"+3", 0},
		{"12 13", 0},
		{"", 0},
		{"2147483648", 0},
	}
	for _, tt := range tests {
		got, err := ParsePID([]byte(tt.in))
		if tt.want == 0 {
			if err == nil || !strings.Contains(err.Error(), "is not a PID") {
				t.Errorf("ParsePID(%q) = %d, %v; want an error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePID(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParseProcStat: arbitrary stat files never panic, and an accepted one keeps its fields
// when the command name is replaced by one full of spaces and parentheses.
func FuzzParseProcStat(f *testing.F) {
	f.Add(statLine(42, 7, 11, 5, 1234))
	f.Add([]byte("9 (sh) R 1 9 9 0 -1 4194304 100 0 0 0 1 2 3 4 20 0 1 0 77"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseProcStat(data)
		if err != nil {
			return
		}
		end := strings.LastIndexByte(string(data), ')')
		again, err := ParseProcStat(append([]byte("1 (a) (b c) ) x"), data[end:]...))
		if err != nil || again != st {
			t.Fatalf("%q: %+v, with another command name %+v, %v", data, st, again, err)
		}
	})
}
