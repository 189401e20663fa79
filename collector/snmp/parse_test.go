package snmp

import (
	"math"
	"strings"
	"testing"

	"github.com/gosnmp/gosnmp"
)

func TestParseScalarsRecorded(t *testing.T) {
	for _, prefix := range []string{"fresh", "t1", "t2", "warm"} {
		t.Run(prefix, func(t *testing.T) {
			f, pdus := loadFixture(t, prefix+"_scalars")
			s, err := parseScalars(pdus)
			if err != nil {
				t.Fatalf("%s: %v", f.Comment, err)
			}
			if want := fixtureValue(t, f, oidMemTotalReal); s.memTotalKB != want {
				t.Errorf("memTotalKB = %d, recorded %d", s.memTotalKB, want)
			}
			if want := fixtureValue(t, f, oidMemAvailReal); s.memAvailKB != want {
				t.Errorf("memAvailKB = %d, recorded %d", s.memAvailKB, want)
			}
			if want := fixtureValue(t, f, oidSsCpuRawIdle); uint64(s.cpu.idle) != want {
				t.Errorf("idle = %d, recorded %d", s.cpu.idle, want)
			}
			if want := fixtureValue(t, f, oidTCPCurrEstab); !s.tcpCurrEstabOK || uint64(s.tcpCurrEstab) != want {
				t.Errorf("tcpCurrEstab = %d (ok %v), recorded %d", s.tcpCurrEstab, s.tcpCurrEstabOK, want)
			}
			if !s.cpuOK || !s.uptimeOK {
				t.Errorf("cpuOK %v uptimeOK %v, want both", s.cpuOK, s.uptimeOK)
			}
			// The agent's first answer has all counters 0 (docs/design.md); later ones not.
			if got, want := s.cpu.zero(), prefix == "fresh"; got != want {
				t.Errorf("cpu.zero() = %v, want %v", got, want)
			}
			bytes, util := s.memory()
			if bytes != s.memTotalKB*1024 {
				t.Errorf("memory bytes = %d, want %d", bytes, s.memTotalKB*1024)
			}
			if util <= 0 || util >= 1 {
				t.Errorf("memory util = %v, want in (0,1) on a running host", util)
			}
		})
	}
}

func TestCPUUtilRecorded(t *testing.T) {
	_, p1 := loadFixture(t, "t1_scalars")
	_, p2 := loadFixture(t, "t2_scalars")
	s1, err := parseScalars(p1)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := parseScalars(p2)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := cpuUtil(s1.cpu, s2.cpu)
	// t2 was recorded after two 6 s busy loops on the host's 2 CPUs, so
	// most ticks between t1 and t2 were busy.
	if !ok || u <= 0.5 || u > 1 {
		t.Errorf("cpuUtil(t1, t2) = %v, %v; want ok and in (0.5, 1]", u, ok)
	}
}

func TestCPUUtil(t *testing.T) {
	const max = math.MaxUint32
	tests := []struct {
		name      string
		prev, cur cpuTicks
		want      float64
		ok        bool
	}{
		{"no ticks", cpuTicks{user: 5, idle: 5}, cpuTicks{user: 5, idle: 5}, 0, false},
		{"all idle", cpuTicks{idle: 100}, cpuTicks{idle: 200}, 0, true},
		{"iowait is idle", cpuTicks{wait: 1}, cpuTicks{wait: 101}, 0, true},
		{"all busy kinds", cpuTicks{}, cpuTicks{user: 1, nice: 1, system: 1, interrupt: 1, softIRQ: 1, steal: 1}, 1, true},
		{"half", cpuTicks{user: 10, idle: 10}, cpuTicks{user: 60, idle: 60}, 0.5, true},
		{"user wraps", cpuTicks{user: max - 9, idle: 0}, cpuTicks{user: 10, idle: 20}, 0.5, true},
		{"idle wraps", cpuTicks{user: 0, idle: max}, cpuTicks{user: 30, idle: 89}, 1 - 90.0/120, true},
		{"every counter wraps", cpuTicks{user: max, nice: max, system: max, idle: max}, cpuTicks{user: 0, nice: 0, system: 0, idle: 2}, 3.0 / 6, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := cpuUtil(tc.prev, tc.cur)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("cpuUtil = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// goodScalars is a minimal valid answer; cases below break one thing each.
func goodScalars() []gosnmp.SnmpPDU {
	return []gosnmp.SnmpPDU{
		{Name: oidSysUpTime, Type: gosnmp.TimeTicks, Value: uint32(500)},
		{Name: oidSsCpuRawUser, Type: gosnmp.Counter32, Value: uint(1)},
		{Name: oidSsCpuRawNice, Type: gosnmp.Counter32, Value: uint(2)},
		{Name: oidSsCpuRawSystem, Type: gosnmp.Counter32, Value: uint(3)},
		{Name: oidSsCpuRawIdle, Type: gosnmp.Counter32, Value: uint(4)},
		{Name: oidMemTotalReal, Type: gosnmp.Integer, Value: 1000},
		{Name: oidMemAvailReal, Type: gosnmp.Integer, Value: 250},
		{Name: oidTCPCurrEstab, Type: gosnmp.Gauge32, Value: uint(7)},
	}
}

func withPDU(name string, typ gosnmp.Asn1BER, v any) []gosnmp.SnmpPDU {
	pdus := goodScalars()
	for i := range pdus {
		if pdus[i].Name == name {
			pdus[i] = gosnmp.SnmpPDU{Name: name, Type: typ, Value: v}
			return pdus
		}
	}
	return append(pdus, gosnmp.SnmpPDU{Name: name, Type: typ, Value: v})
}

func without(name string) []gosnmp.SnmpPDU {
	var out []gosnmp.SnmpPDU
	for _, p := range goodScalars() {
		if p.Name != name {
			out = append(out, p)
		}
	}
	return out
}

func TestParseScalars(t *testing.T) {
	tests := []struct {
		name    string
		pdus    []gosnmp.SnmpPDU
		wantErr string // substring; "" means success
		check   func(t *testing.T, s scalars)
	}{
		{name: "good", pdus: goodScalars(), check: func(t *testing.T, s scalars) {
			if !s.cpuOK || s.cpu != (cpuTicks{user: 1, nice: 2, system: 3, idle: 4}) {
				t.Errorf("cpu = %+v ok %v", s.cpu, s.cpuOK)
			}
			if b, u := s.memory(); b != 1000*1024 || u != 0.75 {
				t.Errorf("memory = %d, %v; want %d, 0.75", b, u, 1000*1024)
			}
		}},
		{name: "buffers and cache count as available", pdus: append(goodScalars(),
			gosnmp.SnmpPDU{Name: oidMemBuffer, Type: gosnmp.Integer, Value: 100},
			gosnmp.SnmpPDU{Name: oidMemCached, Type: gosnmp.Integer, Value: 150}),
			check: func(t *testing.T, s scalars) {
				if _, u := s.memory(); u != 0.5 {
					t.Errorf("util = %v, want 0.5", u)
				}
			}},
		{name: "cache larger than total is capped", pdus: append(goodScalars(),
			gosnmp.SnmpPDU{Name: oidMemCached, Type: gosnmp.Integer, Value: 900}),
			check: func(t *testing.T, s scalars) {
				if _, u := s.memory(); u != 0 {
					t.Errorf("util = %v, want 0", u)
				}
			}},
		{name: "cpu counters absent", pdus: func() []gosnmp.SnmpPDU {
			p := goodScalars()
			for i := 1; i <= 4; i++ {
				p[i] = gosnmp.SnmpPDU{Name: p[i].Name, Type: gosnmp.NoSuchObject}
			}
			return p
		}(), check: func(t *testing.T, s scalars) {
			if s.cpuOK {
				t.Error("cpuOK with all counters absent")
			}
		}},
		{name: "one cpu counter missing", pdus: without(oidSsCpuRawIdle), wantErr: "ssCpuRawIdle"},
		{name: "uptime missing is fine", pdus: without(oidSysUpTime), check: func(t *testing.T, s scalars) {
			if s.uptimeOK {
				t.Error("uptimeOK without sysUpTime")
			}
		}},
		{name: "tcpCurrEstab NoSuchInstance", pdus: withPDU(oidTCPCurrEstab, gosnmp.NoSuchInstance, nil), check: func(t *testing.T, s scalars) {
			if s.tcpCurrEstabOK {
				t.Error("tcpCurrEstabOK for NoSuchInstance")
			}
		}},
		{name: "memTotal missing", pdus: without(oidMemTotalReal), wantErr: "memTotalReal (.1.3.6.1.4.1.2021.4.5.0) missing"},
		{name: "memAvail NoSuchObject", pdus: withPDU(oidMemAvailReal, gosnmp.NoSuchObject, nil), wantErr: "memAvailReal"},
		{name: "memTotal zero", pdus: withPDU(oidMemTotalReal, gosnmp.Integer, 0), wantErr: "is 0"},
		{name: "memAvail above total", pdus: withPDU(oidMemAvailReal, gosnmp.Integer, 1001), wantErr: "exceeds memTotalReal"},
		{name: "memTotal negative", pdus: withPDU(oidMemTotalReal, gosnmp.Integer, -5), wantErr: "negative"},
		{name: "memTotal as string", pdus: withPDU(oidMemTotalReal, gosnmp.OctetString, []byte("1000")), wantErr: "want type Integer, got OctetString"},
		{name: "memTotal Integer holding a string", pdus: withPDU(oidMemTotalReal, gosnmp.Integer, "1000"), wantErr: "Go type string"},
		{name: "counter as Integer", pdus: withPDU(oidSsCpuRawUser, gosnmp.Integer, 5), wantErr: "ssCpuRawUser (.1.3.6.1.4.1.2021.11.50.0): want type Counter32"},
		{name: "counter beyond 32 bits", pdus: withPDU(oidSsCpuRawUser, gosnmp.Counter32, uint64(1)<<32), wantErr: "exceeds"},
		{name: "uptime as Gauge32", pdus: withPDU(oidSysUpTime, gosnmp.Gauge32, uint(5)), wantErr: "sysUpTime"},
		{name: "tcpCurrEstab nil value", pdus: withPDU(oidTCPCurrEstab, gosnmp.Gauge32, nil), wantErr: "tcpCurrEstab"},
		{name: "unexpected OID", pdus: append(goodScalars(), gosnmp.SnmpPDU{Name: ".1.3.6.1.2.1.1.5.0", Type: gosnmp.OctetString}), wantErr: "unexpected OID .1.3.6.1.2.1.1.5.0"},
		{name: "duplicate", pdus: append(goodScalars(), goodScalars()[1]), wantErr: "appears twice"},
		{name: "duplicate after absent", pdus: append(withPDU(oidTCPCurrEstab, gosnmp.NoSuchObject, nil), gosnmp.SnmpPDU{Name: oidTCPCurrEstab, Type: gosnmp.Gauge32, Value: uint(1)}), wantErr: "appears twice"},
		{name: "empty answer", pdus: nil, wantErr: "missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseScalars(tc.pdus)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestParseProcessorsRecorded(t *testing.T) {
	tests := []struct {
		prefix string
		loadOK bool // hrProcessorLoad appears only after the agent's first minute
	}{
		{"fresh", false},
		{"t2", false},
		{"warm", true},
	}
	for _, tc := range tests {
		t.Run(tc.prefix, func(t *testing.T) {
			f, pdus := loadFixture(t, tc.prefix+"_hrprocessor")
			rows := 0
			for _, p := range f.PDUs {
				if strings.HasPrefix(p.OID, oidHrProcessorEntry+".1.") {
					rows++
				}
			}
			got, err := parseProcessors(pdus)
			if err != nil {
				t.Fatal(err)
			}
			if got.count != rows || got.loadOK != tc.loadOK {
				t.Errorf("got %+v, want count %d loadOK %v", got, rows, tc.loadOK)
			}
			if got.loadOK && (got.meanLoad < 0 || got.meanLoad > 1) {
				t.Errorf("meanLoad %v outside [0,1]", got.meanLoad)
			}
		})
	}
}

func hrRow(col, index string, typ gosnmp.Asn1BER, v any) gosnmp.SnmpPDU {
	return gosnmp.SnmpPDU{Name: oidHrProcessorEntry + "." + col + "." + index, Type: typ, Value: v}
}

func TestParseProcessors(t *testing.T) {
	frw := func(i string) gosnmp.SnmpPDU { return hrRow("1", i, gosnmp.ObjectIdentifier, ".0.0") }
	load := func(i string, v int) gosnmp.SnmpPDU { return hrRow("2", i, gosnmp.Integer, v) }
	tests := []struct {
		name    string
		pdus    []gosnmp.SnmpPDU
		want    processors
		wantErr string
	}{
		{name: "two cpus with load", pdus: []gosnmp.SnmpPDU{frw("1"), frw("2"), load("1", 20), load("2", 60)}, want: processors{count: 2, meanLoad: 0.4, loadOK: true}},
		{name: "load missing for one", pdus: []gosnmp.SnmpPDU{frw("1"), frw("2"), load("1", 20)}, want: processors{count: 2}},
		{name: "load for another row", pdus: []gosnmp.SnmpPDU{frw("1"), load("9", 20)}, want: processors{count: 1}},
		{name: "unknown column ignored", pdus: []gosnmp.SnmpPDU{frw("1"), hrRow("3", "1", gosnmp.OctetString, []byte("x"))}, want: processors{count: 1}},
		{name: "empty", pdus: nil, wantErr: "no rows"},
		{name: "only NoSuchObject", pdus: []gosnmp.SnmpPDU{hrRow("1", "1", gosnmp.NoSuchObject, nil)}, wantErr: "no rows"},
		{name: "outside table", pdus: []gosnmp.SnmpPDU{{Name: ".1.3.6.1.2.1.25.3.4.1.1.1", Type: gosnmp.Integer, Value: 1}}, wantErr: "outside"},
		{name: "no index", pdus: []gosnmp.SnmpPDU{{Name: oidHrProcessorEntry + ".1", Type: gosnmp.ObjectIdentifier}}, wantErr: "outside"},
		{name: "two-arc index", pdus: []gosnmp.SnmpPDU{hrRow("1", "1.2", gosnmp.ObjectIdentifier, ".0.0")}, wantErr: "not one integer"},
		{name: "frwID wrong type", pdus: []gosnmp.SnmpPDU{hrRow("1", "1", gosnmp.Integer, 3)}, wantErr: "hrProcessorFrwID"},
		{name: "load over 100", pdus: []gosnmp.SnmpPDU{frw("1"), load("1", 101)}, wantErr: "exceeds 100"},
		{name: "load negative", pdus: []gosnmp.SnmpPDU{frw("1"), load("1", -1)}, wantErr: "negative"},
		{name: "duplicate row", pdus: []gosnmp.SnmpPDU{frw("1"), frw("1")}, wantErr: "twice"},
		{name: "duplicate load", pdus: []gosnmp.SnmpPDU{frw("1"), load("1", 1), load("1", 2)}, wantErr: "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcessors(tc.pdus)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.count != tc.want.count || got.loadOK != tc.want.loadOK || math.Abs(got.meanLoad-tc.want.meanLoad) > 1e-12 {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
