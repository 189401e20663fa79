package snmp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gosnmp/gosnmp"
)

// processorRows is a hrProcessorTable walk with n processors (FrwID and Load columns).
func processorRows(n int) []gosnmp.SnmpPDU {
	out := make([]gosnmp.SnmpPDU, 0, 2*n)
	for i := range n {
		out = append(out, gosnmp.SnmpPDU{Name: fmt.Sprintf("%s.1.%d", oidHrProcessorEntry, 196608+i), Type: gosnmp.ObjectIdentifier, Value: ".0.0"})
	}
	for i := range n {
		out = append(out, gosnmp.SnmpPDU{Name: fmt.Sprintf("%s.2.%d", oidHrProcessorEntry, 196608+i), Type: gosnmp.Integer, Value: 10})
	}
	return out
}

// connRows is a legacy tcpConnTable walk of n established connections to port 80.
func connRows(n int) []gosnmp.SnmpPDU {
	out := []gosnmp.SnmpPDU{{Name: oidTCPConnState + ".0.0.0.0.80.0.0.0.0.0", Type: gosnmp.Integer, Value: tcpStateListen}}
	for i := range n - 1 {
		out = append(out, gosnmp.SnmpPDU{Name: fmt.Sprintf("%s.10.0.0.1.80.10.%d.%d.%d.40000", oidTCPConnState, i>>16&255, i>>8&255, i&255),
			Type: gosnmp.Integer, Value: tcpStateEstablished})
	}
	return out
}

// connectionRows is an RFC 4022 tcpConnectionTable walk of n established connections to port 80.
func connectionRows(n int) []gosnmp.SnmpPDU {
	out := make([]gosnmp.SnmpPDU, 0, n)
	for i := range n {
		out = append(out, gosnmp.SnmpPDU{Name: fmt.Sprintf("%s.1.4.10.0.0.1.80.1.4.10.%d.%d.%d.40000", oidTCPConnectionState, i>>16&255, i>>8&255, i&255),
			Type: gosnmp.Integer, Value: tcpStateEstablished})
	}
	return out
}

func TestWalkBounds(t *testing.T) {
	tests := []struct {
		name      string
		target    Target
		walks     map[string][]gosnmp.SnmpPDU
		ignoreMax bool     // the Agent returns everything; the Poller must still refuse
		contains  []string // nil: the poll succeeds
		cpus      float64
	}{
		{"processors at the bound", v2cTarget(), map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(MaxProcessors)}, false, nil, MaxProcessors},
		{"one processor over", v2cTarget(), map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(MaxProcessors + 1)}, false,
			[]string{"192.0.2.7:161", oidHrProcessorEntry, "8192 processors", "too many rows"}, 0},
		{"200,000 processors from an Agent ignoring max", v2cTarget(), map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(200_000)}, true,
			[]string{"192.0.2.7:161", oidHrProcessorEntry, "8192 processors"}, 0},
		{"connection rows at the bound", func() Target { t := v2cTarget(80); t.MaxConnRows = 50; return t }(),
			map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(2), oidTCPConnState: connRows(50)}, false, nil, 2},
		{"legacy table over the bound", func() Target { t := v2cTarget(80); t.MaxConnRows = 50; return t }(),
			map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(2), oidTCPConnState: connRows(51)}, false,
			[]string{"192.0.2.7:161", oidTCPConnState, "50 connection rows"}, 0},
		{"RFC 4022 table over the bound", func() Target { t := v2cTarget(80); t.MaxConnRows = 50; return t }(),
			map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(2), oidTCPConnectionState: connectionRows(51)}, true,
			[]string{"192.0.2.7:161", oidTCPConnectionState, "50 connection rows"}, 0},
		{"default connection bound", v2cTarget(80),
			map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(2), oidTCPConnState: connRows(DefaultMaxConnRows + 1)}, true,
			[]string{oidTCPConnState, "100000 connection rows"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &fakeAgent{scalars: goodScalars(), walks: tc.walks, errs: map[string]error{}, ignoreMax: tc.ignoreMax}
			s, err := mustPoller(t, tc.target, a).Poll(context.Background())
			if tc.contains == nil {
				if err != nil || s.CPUCount != tc.cpus {
					t.Fatalf("Poll = %+v, %v; want %v CPUs", s, err, tc.cpus)
				}
				return
			}
			if !errors.Is(err, ErrTooManyRows) {
				t.Fatalf("err = %v, want ErrTooManyRows", err)
			}
			for _, c := range tc.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error %q does not name %q", err, c)
				}
			}
		})
	}
}

func TestCheckTicks(t *testing.T) {
	base := cpuTicks{user: 1000, nice: 10, system: 500, idle: 8000, wait: 20, interrupt: 5, softIRQ: 5, steal: 0}
	add := func(c cpuTicks, user, idle uint32) cpuTicks { c.user += user; c.idle += idle; return c }
	tests := []struct {
		name      string
		prev, cur cpuTicks
		elapsed   uint32 // centiseconds
		known     bool
		cpus      int
		wantErr   string
	}{
		{"normal 5 s on 4 CPUs", base, add(base, 1000, 1000), 500, true, 4, ""},
		{"at the limit", base, add(base, (500+tickSlackCS)*4*tickMargin-1000, 1000), 500, true, 4, ""},
		{"just past the limit", base, add(base, (500+tickSlackCS)*4*tickMargin-1000+1, 1000), 500, true, 4, "more than 4 processors"},
		{"wrap forward is fine", cpuTicks{user: math.MaxUint32 - 10, idle: 5}, cpuTicks{user: 20, idle: 100}, 500, true, 1, ""},
		{"user went backwards", base, cpuTicks{user: 999, nice: 10, system: 500, idle: 8100, wait: 20, interrupt: 5, softIRQ: 5}, 500, true, 4, "ssCpuRawUser went backwards from 1000 to 999"},
		{"steal went backwards", cpuTicks{steal: 50, idle: 1}, cpuTicks{steal: 10, idle: 2}, 500, true, 4, "ssCpuRawSteal"},
		{"backwards without uptime", base, add(base, math.MaxUint32, 0), 0, false, 4, "went backwards"},
		{"huge jump without uptime is not judged", base, add(base, 1<<30, 0), 0, false, 4, ""},
		{"huge jump in 5 s", base, add(base, 1<<30, 0), 500, true, 64, "ticks in 5.00 s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkTicks(tc.prev, tc.cur, tc.elapsed, tc.known, tc.cpus)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrCounters) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want ErrCounters naming %q", err, tc.wantErr)
			}
		})
	}
}

// TestPollCountersBackwards: counters that go backwards while sysUpTime runs on fail one poll
// with a clear error, and the poll after measures from the new reading.
func TestPollCountersBackwards(t *testing.T) {
	a := recordedAgent(t, "fresh")
	p := mustPoller(t, v2cTarget(), a)
	poll := func(c cpuTicks, uptime uint32) (Sample, error) {
		a.scalars = scalarsWith(t, c, uptime)
		return p.Poll(context.Background())
	}
	if _, err := poll(cpuTicks{user: 5000, idle: 5000}, 1000); err != nil {
		t.Fatal(err)
	}
	if s, err := poll(cpuTicks{user: 5100, idle: 5100}, 1500); err != nil || s.CPUUtil != 0.5 {
		t.Fatalf("%+v %v", s, err)
	}
	_, err := poll(cpuTicks{user: 100, idle: 5200}, 2000)
	if !errors.Is(err, ErrCounters) || !strings.Contains(err.Error(), "192.0.2.7:161") || !strings.Contains(err.Error(), "ssCpuRawUser") {
		t.Fatalf("err = %v, want ErrCounters naming the agent and the counter", err)
	}
	if s, err := poll(cpuTicks{user: 175, idle: 5225}, 2500); err != nil || !s.CPUKnown || s.CPUUtil != 0.75 {
		t.Fatalf("after the jump: %+v %v, want util 0.75 measured from the new reading", s, err)
	}
}

func TestTargetMaxConnRows(t *testing.T) {
	tg := v2cTarget()
	tg.MaxConnRows = -1
	if err := tg.Validate(); err == nil || !strings.Contains(err.Error(), "MaxConnRows") {
		t.Fatalf("err = %v", err)
	}
}

// FuzzCheckTicks: a reading checkTicks accepts gives a utilisation in [0,1], and no reading
// whose counters all went forward by less than 2^31 is called backwards.
func FuzzCheckTicks(f *testing.F) {
	f.Add(uint32(1000), uint32(8000), uint32(1100), uint32(8100), uint32(500), true, 4)
	f.Add(uint32(math.MaxUint32-5), uint32(0), uint32(5), uint32(1), uint32(0), false, 1)
	f.Fuzz(func(t *testing.T, u0, i0, u1, i1, elapsed uint32, known bool, cpus int) {
		prev, cur := cpuTicks{user: u0, idle: i0}, cpuTicks{user: u1, idle: i1}
		err := checkTicks(prev, cur, elapsed, known, cpus)
		if err != nil && !errors.Is(err, ErrCounters) {
			t.Fatalf("error %v is not ErrCounters", err)
		}
		if err == nil {
			if u, ok := cpuUtil(prev, cur); ok && (u < 0 || u > 1 || math.IsNaN(u)) {
				t.Fatalf("util %v", u)
			}
		}
		if u1-u0 < 1<<31 && i1-i0 < 1<<31 && !known && err != nil {
			t.Fatalf("forward counters refused: %v", err)
		}
	})
}
