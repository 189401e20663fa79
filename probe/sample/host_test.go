package sample

import (
	"context"
	"errors"
	"flowweight/internal/testutil"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/mem"
)

func TestCPUUtil(t *testing.T) {
	tests := []struct {
		name      string
		prev, cur cpu.TimesStat
		want      float64
		ok        bool
	}{
		{"half busy", cpu.TimesStat{User: 10, Idle: 10}, cpu.TimesStat{User: 15, Idle: 15}, 0.5, true},
		{"iowait is idle", cpu.TimesStat{}, cpu.TimesStat{System: 1, Iowait: 2, Idle: 1}, 0.25, true},
		{"all busy kinds", cpu.TimesStat{}, cpu.TimesStat{User: 1, Nice: 1, System: 1, Irq: 1, Softirq: 1, Steal: 1, Idle: 4}, 0.6, true},
		// Guest time is already inside user; counting it again would make an idle VM host look busy.
		{"guest not double counted", cpu.TimesStat{}, cpu.TimesStat{User: 2, Guest: 2, Idle: 2}, 0.5, true},
		{"no time", cpu.TimesStat{User: 1, Idle: 1}, cpu.TimesStat{User: 1, Idle: 1}, 0, false},
		// Seen on an idle machine: only idle advanced, and total-minus-idle rounding made busy
		// fall by 1e-12 s, which read as a counter reset.
		{"only idle advanced", cpu.TimesStat{User: 2630.07, System: 1199.88, Softirq: 71.2, Steal: 5891.77, Idle: 29178.69},
			cpu.TimesStat{User: 2630.07, System: 1199.88, Softirq: 71.2, Steal: 5891.77, Idle: 29180.53}, 0, true},
		{"reset", cpu.TimesStat{User: 100, Idle: 100}, cpu.TimesStat{User: 1, Idle: 1}, 0, false},
	}
	for _, tt := range tests {
		got, ok := CPUUtil(TicksFromTimes(tt.prev), TicksFromTimes(tt.cur))
		if ok != tt.ok || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: %v %v, want %v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestHostCPU(t *testing.T) {
	times := []cpu.TimesStat{{User: 10, Idle: 90}, {User: 40, Idle: 160}, {User: 40, Idle: 160}}
	var i int
	countErr := error(nil)
	h := &HostCPU{
		Times: func(context.Context) (cpu.TimesStat, error) {
			if i >= len(times) {
				return cpu.TimesStat{}, errors.New("proc gone")
			}
			i++
			return times[i-1], nil
		},
		Count: func(context.Context) (int, error) { return 8, countErr },
	}
	ctx := context.Background()
	if v, err := h.Sample(ctx); !errors.Is(err, ErrFirstSample) || v.Known != FieldCPUCount || v.CPUCount != 8 {
		t.Fatalf("first: %+v %v", v, err)
	}
	if v, err := h.Sample(ctx); err != nil || v.CPUUtil != 0.3 || v.Known != FieldCPUCount|FieldCPUUtil {
		t.Errorf("second: %+v %v", v, err)
	}
	if v, err := h.Sample(ctx); err == nil || v.Has(FieldCPUUtil) {
		t.Errorf("no progress: %+v %v", v, err)
	}
	countErr = errors.New("no cpuinfo")
	if v, err := h.Sample(ctx); err == nil || v.Known != 0 || !strings.Contains(err.Error(), "proc gone") || !strings.Contains(err.Error(), "no cpuinfo") {
		t.Errorf("both failing: %+v %v", v, err)
	}
}

func TestHostMem(t *testing.T) {
	tests := []struct {
		name string
		m    *mem.VirtualMemoryStat
		err  error
		want Values
	}{
		// Free is small because of page cache; Available is what counts.
		{"available not free", &mem.VirtualMemoryStat{Total: 1000, Available: 750, Free: 10}, nil,
			Values{Known: FieldMemUtil | FieldMemBytes, MemUtil: 0.25, MemBytes: 1000, MemBound: MemBoundHost}},
		{"zero total", &mem.VirtualMemoryStat{}, nil, Values{}},
		{"error", nil, errors.New("meminfo"), Values{}},
	}
	for _, tt := range tests {
		h := &HostMem{Memory: func(context.Context) (*mem.VirtualMemoryStat, error) { return tt.m, tt.err }}
		v, err := h.Sample(context.Background())
		if v != tt.want || (err != nil) != (tt.want.Known == 0) {
			t.Errorf("%s: %+v %v, want %+v", tt.name, v, err, tt.want)
		}
	}
}

// The real gopsutil path works on this machine and gives sane numbers.
func TestHostSamplersReal(t *testing.T) {
	ctx := context.Background()
	c := NewHostCPU()
	if _, err := c.Sample(ctx); !errors.Is(err, ErrFirstSample) {
		t.Fatalf("first cpu sample: %v", err)
	}
	v, err := NewHostMem().Sample(ctx)
	if err != nil || v.MemBytes == 0 || v.MemUtil <= 0 || v.MemUtil >= 1 {
		t.Errorf("host memory: %+v %v", v, err)
	}
}

func TestNIC(t *testing.T) {
	files := map[string][]byte{
		"/sys/class/net/eth0/speed":               []byte("1000\n"),
		"/sys/class/net/eth0/statistics/rx_bytes": []byte("1000\n"),
		"/sys/class/net/eth0/statistics/tx_bytes": []byte("0\n"),
	}
	clk := testutil.NewClock(time.Unix(0, 0))
	n := &NIC{Name: "eth0", Read: mapReader(files), Now: clk.Now}
	if _, err := n.Sample(context.Background()); !errors.Is(err, ErrFirstSample) {
		t.Fatalf("first: %v", err)
	}
	// 62.5 MB received in 1 s on 1000 Mbit/s: 500 Mbit/s, half the line; tx is idle.
	files["/sys/class/net/eth0/statistics/rx_bytes"] = []byte("62501000\n")
	clk.Advance(time.Second)
	if v, err := n.Sample(context.Background()); err != nil || v.Known != FieldNetUtil || v.NetUtil != 0.5 {
		t.Errorf("half: %+v %v", v, err)
	}
	// The configured speed wins over sysfs: 250 Mbit/s over 2 s at 10 000 Mbit/s.
	n.SpeedMbps = 10000
	files["/sys/class/net/eth0/statistics/tx_bytes"] = []byte("62500000\n")
	clk.Advance(2 * time.Second)
	if v, err := n.Sample(context.Background()); err != nil || v.NetUtil != 0.025 {
		t.Errorf("configured speed: %+v %v", v, err)
	}
	files["/sys/class/net/eth0/statistics/tx_bytes"] = []byte("1\n")
	clk.Advance(time.Second)
	if _, err := n.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "backwards") {
		t.Errorf("reset: %v", err)
	}
	n.SpeedMbps = 0
	files["/sys/class/net/eth0/speed"] = []byte("-1\n")
	if _, err := n.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "nic_speed_mbps") {
		t.Errorf("unknown speed: %v", err)
	}
}

func TestValuesMerge(t *testing.T) {
	var v Values
	v.Merge(Values{Known: FieldCPUCount, CPUCount: 2, CPUUtil: 0.9})
	v.Merge(Values{Known: FieldConns, Conns: 7})
	want := Values{Known: FieldCPUCount | FieldConns, CPUCount: 2, Conns: 7}
	if v != want {
		t.Errorf("got %+v, want %+v (unknown fields must not be copied)", v, want)
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  string
	}{
		{"0-1\n", 2, ""},
		{"0", 1, ""},
		{"0-3,6,8-9", 7, ""},
		{"1-2,4-5\n", 4, ""},
		{"", 0, "empty"},
		{" \n", 0, "empty"},
		{"0-", 0, "bad range"},
		{"3-1", 0, "bad range"},
		{"a", 0, "bad CPU number"},
		{"-1", 0, "bad CPU number"},
		{"0-3,2", 0, "overlaps"},
		{"4,1", 0, "out of order"},
		{"0,,1", 0, "bad CPU number"},
		{"0-99999999", 0, "bad range"},
	}
	for _, tt := range tests {
		n, err := ParseCPUList(tt.in)
		if tt.err == "" {
			if err != nil || n != tt.want {
				t.Errorf("ParseCPUList(%q) = %d, %v; want %d", tt.in, n, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseCPUList(%q) = %d, %v; want an error containing %q", tt.in, n, err, tt.err)
		}
	}
}

// TestHostCPUCountMatchesGopsutil: the sysfs count equals gopsutil's /proc/cpuinfo count on
// this machine, so replacing it changed no figure.
func TestHostCPUCountMatchesGopsutil(t *testing.T) {
	ctx := context.Background()
	got, err := HostCPUCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cpu.CountsWithContext(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("HostCPUCount %d, gopsutil %d", got, want)
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-1\n", "0-3,6,8-9", "", "3-1", "0,,1", "0-99999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCPUList(s)
		if err == nil && (n < 1 || n > maxCPUID+1) {
			t.Fatalf("ParseCPUList(%q) = %d without error", s, n)
		}
	})
}

// writeProc writes files into a directory that stands in for /proc through $HOST_PROC, which
// both gopsutil and procPath honour.
func writeProc(t *testing.T, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOST_PROC", dir)
}

// NewHostCPU's own reading of /proc/stat gives exactly what gopsutil's cpu.Times(false)
// gave, which the probe used before, and fails where gopsutil found no cpu line.
func TestProcStatMatchesGopsutil(t *testing.T) {
	live, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, stat string
		fails      bool
	}{
		{"this machine", string(live), false},
		{"ten counters", "cpu  4705 356 584 3699 23 23 0 7 11 3\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\n", false},
		{"eleven counters, the last ignored", "cpu  1 2 3 4 5 6 7 8 9 10 11\n", false},
		{"seven counters (Linux 2.6)", "cpu  10 20 30 40 50 60 70\n", false},
		{"tabs and no newline", "cpu\t1\t2\t3\t4\t5\t6\t7\t8", false},
		{"counters near 2^64", "cpu  18446744073709551615 1 2 3 4 5 6 7\n", false},
		{"six counters", "cpu  1 2 3 4 5 6\n", true},
		{"not a number", "cpu  1 2 x 4 5 6 7 8\n", true},
		{"negative", "cpu  1 2 -3 4 5 6 7 8\n", true},
		{"first line not cpu", "intr 1 2 3 4 5 6 7 8\ncpu  1 2 3 4 5 6 7 8\n", true},
		{"empty", "", true},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeProc(t, map[string]string{"stat": tt.stat})
			ts, gerr := cpu.TimesWithContext(ctx, false)
			got, err := NewHostCPU().Times(ctx)
			if tt.fails {
				if err == nil || gerr != nil || len(ts) != 0 {
					t.Fatalf("got %+v, %v; gopsutil %+v, %v; want both to find no cpu line", got, err, ts, gerr)
				}
				return
			}
			if err != nil || gerr != nil || len(ts) != 1 {
				t.Fatalf("got %v; gopsutil %+v, %v", err, ts, gerr)
			}
			if got != ts[0] {
				t.Errorf("got      %+v\ngopsutil %+v", got, ts[0])
			}
		})
	}
}

// NewHostMem's own reading of /proc/meminfo gives gopsutil's Total and Available, and hands
// a kernel without MemAvailable to gopsutil's estimate.
func TestMemInfoMatchesGopsutil(t *testing.T) {
	live, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	// Linux before 3.14 had no MemAvailable; gopsutil then estimates it from the rest.
	old := "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nBuffers:          200000 kB\nCached:          3000000 kB\n"
	tests := []struct {
		name, meminfo string
		fails         bool
	}{
		{"this machine", string(live), false},
		{"minimal", "MemTotal:       24731184 kB\nMemFree:          597604 kB\nMemAvailable:   21018176 kB\n", false},
		{"later line wins", "MemTotal: 100 kB\nMemAvailable: 50 kB\nMemAvailable: 60 kB\n", false},
		{"no unit, no spaces", "MemTotal:100\nMemAvailable:40\n", false},
		{"second colon skipped", "MemTotal: 100 kB\nMemAvailable: 7: kB\nMemAvailable: 60 kB\n", false},
		{"no MemTotal", "MemAvailable: 60 kB\n", false},
		{"no MemAvailable", old, false},
		{"MemTotal not a number", "MemTotal: lots kB\nMemAvailable: 60 kB\n", true},
		{"MemAvailable not a number", "MemTotal: 100 kB\nMemAvailable: -1 kB\n", true},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeProc(t, map[string]string{"meminfo": tt.meminfo})
			want, gerr := mem.VirtualMemoryWithContext(ctx)
			got, err := NewHostMem().Memory(ctx)
			if tt.fails {
				if err == nil || gerr == nil {
					t.Fatalf("got %+v, %v; gopsutil %v; want both to fail", got, err, gerr)
				}
				return
			}
			if err != nil || gerr != nil {
				t.Fatalf("got %v; gopsutil %v", err, gerr)
			}
			if got.Total != want.Total || got.Available != want.Available {
				t.Errorf("total %d available %d; gopsutil %d and %d", got.Total, got.Available, want.Total, want.Available)
			}
		})
	}
}

// The samplers keep their files open: a file rewritten in place is read again through the
// same descriptor, so the rate sees the new counters.
func TestHostSamplersReread(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOST_PROC", dir)
	stat, meminfo := filepath.Join(dir, "stat"), filepath.Join(dir, "meminfo")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(stat, "cpu  100 0 0 100 0 0 0 0 0 0\n")
	write(meminfo, "MemTotal: 1000 kB\nMemAvailable: 750 kB\n")
	c, m := NewHostCPU(), NewHostMem()
	ctx := context.Background()
	if _, err := c.Sample(ctx); !errors.Is(err, ErrFirstSample) {
		t.Fatalf("first: %v", err)
	}
	write(stat, "cpu  130 0 0 170 0 0 0 0 0 0\n")
	if v, err := c.Sample(ctx); err != nil || math.Abs(v.CPUUtil-0.3) > 1e-12 {
		t.Errorf("cpu: %+v, %v; want 0.3", v, err)
	}
	for _, tt := range []struct {
		meminfo string
		want    float64
	}{{"", 0.25}, {"MemTotal: 1000 kB\nMemAvailable: 500 kB\n", 0.5}} {
		if tt.meminfo != "" {
			write(meminfo, tt.meminfo)
		}
		if v, err := m.Sample(ctx); err != nil || v.MemUtil != tt.want || v.MemBytes != 1000*1024 {
			t.Errorf("memory: %+v, %v; want %v of 1000 kB", v, err, tt.want)
		}
	}
}

// The parsers run every interval and allocate nothing.
func TestHostParsersAllocate(t *testing.T) {
	stat := []byte("cpu  4705 356 584 3699 23 23 0 7 11 3\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	meminfo := []byte("MemTotal:       24731184 kB\nMemFree:          597604 kB\nMemAvailable:   21018176 kB\nBuffers: 1 kB\n")
	for name, f := range map[string]func(){
		"ParseProcStatCPU": func() { _, _ = ParseProcStatCPU(stat) },
		"ParseMemInfo":     func() { _, _, _, _ = ParseMemInfo(meminfo) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

func FuzzParseProcStatCPU(f *testing.F) {
	for _, s := range []string{"cpu  1 2 3 4 5 6 7 8 9 10\n", "cpu  1 2 3 4 5 6\n", "cpu\t1\t2\t3\t4\t5\t6\t7", "intr 1\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := ParseProcStatCPU(b)
		if err != nil {
			return
		}
		for _, v := range []float64{ts.User, ts.Nice, ts.System, ts.Idle, ts.Iowait, ts.Irq, ts.Softirq, ts.Steal, ts.Guest, ts.GuestNice} {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("%q: counter %v", b, v)
			}
		}
	})
}

func FuzzParseMemInfo(f *testing.F) {
	for _, s := range []string{"MemTotal: 100 kB\nMemAvailable: 50 kB\n", "MemTotal:100\n", "MemAvailable: 7: kB\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		total, avail, hasAvail, err := ParseMemInfo(b)
		if err != nil && (total != 0 || avail != 0 || hasAvail) {
			t.Fatalf("%q: values %d %d %v with error %v", b, total, avail, hasAvail, err)
		}
	})
}
