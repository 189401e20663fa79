package report

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestSignalsString(t *testing.T) {
	tests := []struct {
		s    Signals
		want string
	}{
		{0, "none"},
		{SignalCPUPressure, "cpu_pressure"},
		{SignalCPUPressure | SignalThrottled, "cpu_pressure,throttled"},
		{knownSignals, "cpu_pressure,pressure_cgroup,throttled,service_cpu,health_latency,in_flight,conns_stale"},
		{SignalServiceCPU | 1<<15, "service_cpu,0x8000"},
		{SignalInFlight, "in_flight"},
		{SignalConnsStale, "conns_stale"},
		{1 << 7, "0x80"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Signals(%#x).String() = %q, want %q", uint16(tt.s), got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		field string // must appear in the error
		mod   func(r *Report)
	}{
		{"backend id", func(r *Report) { r.BackendID = "" }},
		{"backend id", func(r *Report) { r.BackendID = strings.Repeat("x", MaxIDLen+1) }},
		{"backend id", func(r *Report) { r.BackendID = "web 1" }},
		{"backend id", func(r *Report) { r.BackendID = "wéb" }},
		{"backend id", func(r *Report) { r.BackendID = "a/b" }},
		{"seq", func(r *Report) { r.Seq = 0 }},
		{"time", func(r *Report) { r.Time = time.Time{} }},
		{"time", func(r *Report) { r.Time = time.Unix(0, 0) }},
		{"time", func(r *Report) { r.Time = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"interval", func(r *Report) { r.Interval = 0 }},
		{"interval", func(r *Report) { r.Interval = -time.Second }},
		{"flags", func(r *Report) { r.Flags = 1 << 3 }},
		{"cpu_util", func(r *Report) { r.CPUUtil = math.NaN() }},
		{"cpu_util", func(r *Report) { r.CPUUtil = math.Inf(1) }},
		{"cpu_util", func(r *Report) { r.CPUUtil = -0.01 }},
		{"cpu_util", func(r *Report) { r.CPUUtil = 1.0000001 }},
		{"cpu_count", func(r *Report) { r.CPUCount = 0 }},
		{"cpu_count", func(r *Report) { r.CPUCount = 0.0004 }},
		{"cpu_count", func(r *Report) { r.CPUCount = math.NaN() }},
		{"cpu_count", func(r *Report) { r.CPUCount = math.Inf(1) }},
		{"cpu_count", func(r *Report) { r.CPUCount = -1 }},
		{"cpu_count", func(r *Report) { r.CPUCount = 5e6 }},
		{"mem_util", func(r *Report) { r.MemUtil = math.NaN() }},
		{"mem_util", func(r *Report) { r.MemUtil = 2 }},
		{"mem_bytes", func(r *Report) { r.MemBytes = 0 }},
		{"net_util", func(r *Report) { r.NetUtil = math.Inf(-1) }},
		{"net_util", func(r *Report) { r.NetUtil = -1e-12 }},
		{"health_latency", func(r *Report) { r.HealthLatency = -1 }},
		{"health_status", func(r *Report) { r.HealthStatus = 99 }},
		{"health_status", func(r *Report) { r.HealthStatus = 600 }},
		{"health_error", func(r *Report) { r.HealthError = strings.Repeat("e", MaxHealthErrorLen+1) }},
		{"health_error", func(r *Report) { r.HealthError = "bad \xff utf-8" }},
		{"version 3", func(r *Report) { r.Version = 3 }},
		{"signals", func(r *Report) { r.Signals |= 1 << 7 }},
		{"pressure_cgroup without cpu_pressure", func(r *Report) { r.Signals &^= SignalCPUPressure; r.CPUPressure = 0 }},
		{"version 1 carries only health_latency", func(r *Report) { *r = sampleV1(); r.Signals |= SignalThrottled; r.Throttled = 0.5 }},
		{"cpu_pressure 0.125 without signal cpu_pressure", func(r *Report) { r.Signals &^= SignalCPUPressure | SignalPressureCgroup }},
		{"throttled 0.25 without signal throttled", func(r *Report) { r.Signals &^= SignalThrottled }},
		{"service_cpu 0.3 without signal service_cpu", func(r *Report) { r.Signals &^= SignalServiceCPU }},
		{"service_cpu 0.3 without signal service_cpu", func(r *Report) { *r = sampleV1(); r.ServiceCPU = 0.3 }},
		{"cpu_pressure", func(r *Report) { r.CPUPressure = math.NaN() }},
		{"cpu_pressure", func(r *Report) { r.CPUPressure = 1.0000001 }},
		{"throttled", func(r *Report) { r.Throttled = -0.5 }},
		{"throttled", func(r *Report) { r.Throttled = math.Inf(1) }},
		{"service_cpu", func(r *Report) { r.ServiceCPU = 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			r := sample()
			tt.mod(&r)
			dst := []byte("keep")
			b, err := r.AppendSeal(dst, testKey)
			if ReasonOf(err) != ReasonMalformed {
				t.Fatalf("AppendSeal: err = %v, want reason %s", err, ReasonMalformed)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %q", err, tt.field)
			}
			if string(b) != "keep" {
				t.Errorf("dst changed to %q on error", b)
			}
		})
	}
}
