package sample

import (
	"context"
	"errors"
	"math"
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
	clk := &fakeClock{t: time.Unix(0, 0)}
	n := &NIC{Name: "eth0", Read: mapReader(files), Now: clk.now}
	if _, err := n.Sample(context.Background()); !errors.Is(err, ErrFirstSample) {
		t.Fatalf("first: %v", err)
	}
	// 62.5 MB received in 1 s on 1000 Mbit/s: 500 Mbit/s, half the line; tx is idle.
	files["/sys/class/net/eth0/statistics/rx_bytes"] = []byte("62501000\n")
	clk.advance(time.Second)
	if v, err := n.Sample(context.Background()); err != nil || v.Known != FieldNetUtil || v.NetUtil != 0.5 {
		t.Errorf("half: %+v %v", v, err)
	}
	// The configured speed wins over sysfs: 250 Mbit/s over 2 s at 10 000 Mbit/s.
	n.SpeedMbps = 10000
	files["/sys/class/net/eth0/statistics/tx_bytes"] = []byte("62500000\n")
	clk.advance(2 * time.Second)
	if v, err := n.Sample(context.Background()); err != nil || v.NetUtil != 0.025 {
		t.Errorf("configured speed: %+v %v", v, err)
	}
	files["/sys/class/net/eth0/statistics/tx_bytes"] = []byte("1\n")
	clk.advance(time.Second)
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
