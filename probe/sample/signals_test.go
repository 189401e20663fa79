package sample

import (
	"context"
	"errors"
	"flowweight/internal/testutil"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParsePSI(t *testing.T) {
	tests := []struct {
		name string
		data string
		want PSI
		err  string
	}{
		{"host fixture", string(fixture(t, "psi/proc_pressure_cpu")), PSI{Some: 315223041, HasFull: true}, ""},
		{"cgroup2 fixture", string(fixture(t, "psi/cgroup2_cpu.pressure")), PSI{Some: 320294338, HasFull: true}, ""},
		{"before 5.13: no full line", "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n", PSI{Some: 42}, ""},
		{"unknown line kind skipped", "some total=1\nwhatever x=1\nfull total=2\n", PSI{Some: 1, Full: 2, HasFull: true}, ""},
		{"total first", "some total=7 avg10=1.00\n", PSI{Some: 7}, ""},
		{"no some", "full avg10=0.00 total=0\n", PSI{}, `no "some"`},
		{"empty", "", PSI{}, `no "some"`},
		{"no total", "some avg10=0.00 avg60=0.00 avg300=0.00\n", PSI{}, "line 1"},
		{"bad total", "some avg10=0.00 total=12x\n", PSI{}, `total "12x"`},
		{"negative total", "some total=-1\n", PSI{}, "not a number"},
		{"twice", "some total=1\nsome total=2\n", PSI{}, `second "some"`},
	}
	for _, tt := range tests {
		got, err := ParsePSI([]byte(tt.data))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %+v %v, want error %q", tt.name, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v %v, want %+v", tt.name, got, err, tt.want)
		}
	}
}

func FuzzParsePSI(f *testing.F) {
	f.Add(fixture(f, "psi/proc_pressure_cpu"))
	f.Add([]byte("some total=1\nfull total=2\n"))
	f.Add([]byte("some avg10=0.00 total=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePSI(data)
		if err != nil {
			return
		}
		if !strings.Contains(string(data), "some") {
			t.Fatalf("%q parsed without a some line: %+v", data, p)
		}
		if !p.HasFull && p.Full != 0 {
			t.Fatalf("full total without a full line: %+v", p)
		}
	})
}

func TestStallFraction(t *testing.T) {
	tests := []struct {
		prev, cur uint64
		elapsed   time.Duration
		want      float64
		ok        bool
	}{
		{0, 250_000, time.Second, 0.25, true},
		{100, 100, time.Second, 0, true},
		{0, 3_000_000, time.Second, 1, true}, // clock and kernel disagree a little: clamped
		{5, 4, time.Second, 0, false},        // reset
		{0, 1, 0, 0, false},
	}
	for _, tt := range tests {
		got, ok := StallFraction(tt.prev, tt.cur, tt.elapsed)
		if ok != tt.ok || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("StallFraction(%d, %d, %v) = %v %v, want %v %v", tt.prev, tt.cur, tt.elapsed, got, ok, tt.want, tt.ok)
		}
	}
}

func TestPressureSampler(t *testing.T) {
	files := map[string][]byte{"/p": []byte("some avg10=1.00 avg60=0.00 avg300=0.00 total=1000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")}
	clk := testutil.NewClock(time.Unix(1000, 0))
	p := &Pressure{File: "/p", Scope: ScopeCgroup, Read: mapReader(files), Now: clk.Now}
	ctx := context.Background()
	if v, err := p.Sample(ctx); !errors.Is(err, ErrFirstSample) || v.Known != 0 {
		t.Fatalf("first: %+v %v", v, err)
	}
	setTotal := func(us int) { files["/p"] = fmt.Appendf(nil, "some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\n", us) }
	setTotal(1_500_000)
	clk.Advance(2 * time.Second)
	v, err := p.Sample(ctx)
	if err != nil || !v.Has(FieldCPUPressure) || v.CPUPressure != 0.25 || v.PressureScope != ScopeCgroup {
		t.Fatalf("quarter: %+v %v", v, err)
	}
	setTotal(5) // a reset gives no rate, then measures from the new value
	clk.Advance(time.Second)
	if v, err := p.Sample(ctx); err == nil || v.Has(FieldCPUPressure) {
		t.Errorf("reset: %+v %v", v, err)
	}
	setTotal(100_005)
	clk.Advance(time.Second)
	if v, err := p.Sample(ctx); err != nil || math.Abs(v.CPUPressure-0.1) > 1e-12 {
		t.Errorf("after reset: %+v %v", v, err)
	}
	files["/p"] = []byte("garbage\n")
	if v, err := p.Sample(ctx); err == nil || errors.Is(err, ErrUnavailable) || v.Known != 0 || !strings.Contains(err.Error(), "/p") {
		t.Errorf("garbage: %+v %v", v, err)
	}
}

func TestPressureUnavailable(t *testing.T) {
	for _, cause := range []error{
		fmt.Errorf("open /p: %w", syscall.ENOENT),
		fmt.Errorf("read /proc/pressure/cpu: %w", syscall.EOPNOTSUPP), // booted with psi=0
	} {
		p := &Pressure{File: "/p", Read: func(string) ([]byte, error) { return nil, cause }}
		v, err := p.Sample(context.Background())
		if !errors.Is(err, ErrUnavailable) || v.Known != 0 || v.Unavailable != FieldCPUPressure {
			t.Errorf("%v: %+v %v, want the signal unavailable", cause, v, err)
		}
	}
	// A v2 cgroup with PSI switched off has no cpu.pressure; one that does not exist is a failure.
	cgFiles := map[string][]byte{"/cg/be1/cgroup.procs": []byte("1\n")}
	p := &Pressure{File: "/cg/be1/cpu.pressure", Scope: ScopeCgroup, Read: mapReader(cgFiles)}
	if v, err := p.Sample(context.Background()); !errors.Is(err, ErrUnavailable) || v.Unavailable != FieldCPUPressure {
		t.Errorf("cgroup without cpu.pressure: %+v %v, want unavailable", v, err)
	}
	p = &Pressure{File: "/cg/gone/cpu.pressure", Scope: ScopeCgroup, Read: mapReader(cgFiles)}
	if v, err := p.Sample(context.Background()); err == nil || errors.Is(err, ErrUnavailable) || v.Unavailable != 0 {
		t.Errorf("missing cgroup: %+v %v, want a failure", v, err)
	}
	p = &Pressure{File: "/p", Read: func(string) ([]byte, error) { return nil, syscall.EACCES }}
	if v, err := p.Sample(context.Background()); err == nil || errors.Is(err, ErrUnavailable) || v.Unavailable != 0 {
		t.Errorf("permission denied is a failure, not unavailability: %+v %v", v, err)
	}
}

// Without Read the file is kept open and read again in place. (That a removed cgroup's file
// then reads as missing, as with os.ReadFile, needs a real cgroup file system, whose old
// descriptors answer ENODEV: TestRereadRemovedCgroup in the integration tier.)
func TestPressureKeptOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cpu.pressure")
	write := func(name, s string) func() {
		return func() {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("cgroup.procs", "1\n")()
	clk := testutil.NewClock(time.Unix(1000, 0))
	p := &Pressure{File: file, Scope: ScopeCgroup, Now: clk.Now}
	steps := []struct {
		name    string
		change  func()
		want    float64 // the pressure measured; -1: none
		unavail bool    // the signal reported unavailable; else a first reading
	}{
		{"cgroup without the file", func() {}, -1, true},
		{"created", write("cpu.pressure", "some avg10=0 avg60=0 avg300=0 total=1000\n"), -1, false},
		{"rewritten", write("cpu.pressure", "some avg10=0 avg60=0 avg300=0 total=501000\n"), 0.5, false},
		{"unchanged", func() {}, 0, false},
		{"rewritten again", write("cpu.pressure", "some avg10=0 avg60=0 avg300=0 total=751000\nfull avg10=0 avg60=0 avg300=0 total=1\n"), 0.25, false},
	}
	for _, s := range steps {
		s.change()
		clk.Advance(time.Second)
		v, err := p.Sample(context.Background())
		switch {
		case s.want >= 0:
			if err != nil || !v.Has(FieldCPUPressure) || math.Abs(v.CPUPressure-s.want) > 1e-12 {
				t.Fatalf("%s: %+v %v, want %v", s.name, v, err, s.want)
			}
		case s.unavail:
			if !errors.Is(err, ErrUnavailable) || v.Unavailable != FieldCPUPressure {
				t.Fatalf("%s: %+v %v, want unavailable", s.name, v, err)
			}
		case !errors.Is(err, ErrFirstSample):
			t.Fatalf("%s: %+v %v, want the first reading", s.name, v, err)
		}
	}
}

func TestParseThrottle(t *testing.T) {
	tests := []struct {
		name  string
		data  string
		want  Throttle
		found bool
		err   string
	}{
		{"v1 fixture", string(fixture(t, "v1/cpu/fwfixture/cpu.stat")), Throttle{Periods: 6, Throttled: 6, Time: 480079329}, true, ""},
		{"v2", "usage_usec 10\nuser_usec 5\nsystem_usec 5\nnr_periods 100\nnr_throttled 25\nthrottled_usec 7000\nnr_bursts 0\nburst_usec 0\n",
			Throttle{Periods: 100, Throttled: 25, Time: 7 * time.Millisecond}, true, ""},
		{"v2 without cpu controller", string(fixture(t, "v2/web1/cpu.stat")), Throttle{}, false, ""},
		{"v2 no controller, hand-made", "usage_usec 10\nuser_usec 5\nsystem_usec 5\n", Throttle{}, false, ""},
		{"partial", "nr_periods 5\nnr_throttled 1\n", Throttle{}, true, "must come together"},
		{"bad number", "nr_periods 5\nnr_throttled x\nthrottled_time 1\n", Throttle{}, true, "nr_throttled"},
		{"twice", "nr_periods 5\nnr_periods 6\nnr_throttled 1\nthrottled_time 1\n", Throttle{}, true, "twice"},
		{"huge usec", "nr_periods 1\nnr_throttled 1\nthrottled_usec 18446744073709551615\n", Throttle{Periods: 1, Throttled: 1, Time: time.Duration(uint64(1<<63-1)/1000) * time.Microsecond}, true, ""},
	}
	for _, tt := range tests {
		got, found, err := ParseThrottle([]byte(tt.data))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %+v %v, want error %q", tt.name, got, err, tt.err)
			}
			continue
		}
		if err != nil || found != tt.found || got != tt.want {
			t.Errorf("%s: %+v %v %v, want %+v %v", tt.name, got, found, err, tt.want, tt.found)
		}
	}
}

func FuzzParseThrottle(f *testing.F) {
	f.Add(fixture(f, "v1/cpu/fwfixture/cpu.stat"))
	f.Add([]byte("nr_periods 100\nnr_throttled 25\nthrottled_usec 7000\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		th, found, err := ParseThrottle(data)
		if err == nil && !found && th != (Throttle{}) {
			t.Fatalf("not found but %+v", th)
		}
		if th.Time < 0 {
			t.Fatalf("negative time %+v", th)
		}
		if err == nil && found {
			if f, _, ok := ThrottledFraction(Throttle{}, th); !ok || f < 0 || f > 1 {
				t.Fatalf("fraction %v %v from %+v", f, ok, th)
			}
		}
	})
}

func TestCgroupThrottle(t *testing.T) {
	files := map[string][]byte{"/cpu/be1/cpu.stat": []byte("nr_periods 10\nnr_throttled 2\nthrottled_time 1000000\n")}
	s := &CgroupThrottle{Cgroup: Cgroup{Version: 1, CPU: "/cpu/be1"}, Read: mapReader(files)}
	ctx := context.Background()
	if v, err := s.Sample(ctx); !errors.Is(err, ErrFirstSample) || v.Known != 0 {
		t.Fatalf("first: %+v %v", v, err)
	}
	steps := []struct {
		stat     string
		frac     float64
		held     time.Duration
		wantRate bool
	}{
		{"nr_periods 20\nnr_throttled 7\nthrottled_time 31000000\n", 0.5, 30 * time.Millisecond, true},
		{"nr_periods 20\nnr_throttled 7\nthrottled_time 31000000\n", 0, 0, true}, // idle: no period ran
		{"nr_periods 1\nnr_throttled 0\nthrottled_time 0\n", 0, 0, false},        // reset
		{"nr_periods 5\nnr_throttled 0\nthrottled_time 0\n", 0, 0, true},
	}
	for i, st := range steps {
		files["/cpu/be1/cpu.stat"] = []byte(st.stat)
		v, err := s.Sample(ctx)
		if !st.wantRate {
			if err == nil || v.Known != 0 {
				t.Errorf("step %d: %+v %v, want no rate", i, v, err)
			}
			continue
		}
		if err != nil || !v.Has(FieldThrottled) || v.Throttled != st.frac || v.ThrottledTime != st.held {
			t.Errorf("step %d: %+v %v, want %v %v", i, v, err, st.frac, st.held)
		}
	}
	// A v2 cgroup without the cpu controller has no counters: unavailable, not failing.
	files["/v2/be1/cpu.stat"] = []byte("usage_usec 1\nuser_usec 1\nsystem_usec 0\n")
	s2 := &CgroupThrottle{Cgroup: Cgroup{Version: 2, Dir: "/v2/be1"}, Read: mapReader(files)}
	if v, err := s2.Sample(ctx); !errors.Is(err, ErrUnavailable) || v.Unavailable != FieldThrottled || !strings.Contains(err.Error(), "/v2/be1/cpu.stat") {
		t.Errorf("v2 without controller: %+v %v", v, err)
	}
	// A cgroup that does not exist is a failure, not a missing signal.
	s3 := &CgroupThrottle{Cgroup: Cgroup{Version: 2, Dir: "/gone"}, Read: mapReader(files)}
	if v, err := s3.Sample(ctx); err == nil || errors.Is(err, ErrUnavailable) || v.Unavailable != 0 || !strings.Contains(err.Error(), "/gone/cpu.stat") {
		t.Errorf("missing cgroup: %+v %v", v, err)
	}
	files["/cpu/be1/cpu.stat"] = []byte("nr_periods x\n")
	if v, err := s.Sample(ctx); err == nil || errors.Is(err, ErrUnavailable) || v.Known|v.Unavailable != 0 {
		t.Errorf("garbage: %+v %v", v, err)
	}
}

func TestFieldString(t *testing.T) {
	tests := []struct {
		f    Field
		want string
	}{
		{0, "none"},
		{FieldCPUUtil | FieldMemBytes, "cpu_util,mem_bytes"},
		{FieldCPUPressure | FieldThrottled | FieldHealthLatency, "cpu_pressure,cpu_throttled,health_latency"},
		{FieldServiceCPU, "service_cpu"},
		{1 << 15, "0x8000"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%d: %q, want %q", tt.f, got, tt.want)
		}
	}
}

func TestMergeSignals(t *testing.T) {
	var v Values
	v.Merge(Values{Unavailable: FieldCPUPressure | FieldThrottled})
	v.Merge(Values{Known: FieldMemBytes, MemBytes: 5, MemBound: MemBoundAncestor + "/x"})
	v.Merge(Values{Known: FieldThrottled, Throttled: 0.5, ThrottledTime: time.Second})
	v.Merge(Values{Known: FieldHealthLatency, HealthLatency: time.Millisecond})
	v.Merge(Values{Unavailable: FieldServiceCPU})
	v.Merge(Values{Known: FieldServiceCPU, ServiceCores: 0.75})
	v.Merge(Values{MemBound: "ignored without its bit", Throttled: 1, ServiceCores: 3})
	want := Values{Known: FieldMemBytes | FieldThrottled | FieldHealthLatency | FieldServiceCPU, MemBytes: 5, MemBound: MemBoundAncestor + "/x",
		Throttled: 0.5, ThrottledTime: time.Second, HealthLatency: time.Millisecond, ServiceCores: 0.75, Unavailable: FieldCPUPressure}
	if v != want {
		t.Errorf("merged %+v, want %+v", v, want)
	}
}
