package sample

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Field is a bit naming one measured quantity in Values.
type Field uint16

// The measured quantities. The first six are the push protocol's version-1 fields; the others
// travel as version-2 signals (report.Signals), each only when its bit is set.
const (
	FieldCPUUtil Field = 1 << iota
	FieldCPUCount
	FieldMemUtil
	FieldMemBytes
	FieldConns
	FieldNetUtil
	FieldCPUPressure   // CPUPressure and PressureScope
	FieldThrottled     // Throttled and ThrottledTime
	FieldHealthLatency // HealthLatency
	FieldServiceCPU    // ServiceCores
)

var fieldNames = [...]string{"cpu_util", "cpu_count", "mem_util", "mem_bytes", "conns", "net_util",
	"cpu_pressure", "cpu_throttled", "health_latency", "service_cpu"}

// String lists the fields in f by name, comma-separated ("cpu_util,mem_util"); "none" for 0.
func (f Field) String() string {
	var b strings.Builder
	for i, n := range fieldNames {
		if f&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(n)
		}
	}
	if rest := f &^ (1<<len(fieldNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "0x%x", uint16(rest))
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// Memory bounds: what MemBytes is. A cgroup bound by an ancestor's limit reads
// MemBoundAncestor + the ancestor's directory.
const (
	MemBoundHost     = "host"   // the machine's MemTotal: no limit applies, or every limit is larger
	MemBoundCgroup   = "cgroup" // the measured cgroup's own limit
	MemBoundAncestor = "ancestor:"
)

// PSI scopes: whose pressure CPUPressure is.
const (
	ScopeHost   = "host"   // /proc/pressure/cpu: every task on the machine
	ScopeCgroup = "cgroup" // the cgroup's cpu.pressure (cgroup v2 only)
)

// Values is one sample. A field is meaningful only when its bit is set in Known: a sampler that
// failed, or that needs a second reading to compute a rate, leaves its bits clear, and the
// collector then treats the quantity as unknown rather than as zero load.
type Values struct {
	Known    Field
	CPUUtil  float64 // fraction of CPUCount busy over the last period, in [0,1]
	CPUCount float64 // logical CPUs available (a cgroup quota gives fractions)
	MemUtil  float64 // fraction of MemBytes in use, in [0,1]
	MemBytes uint64  // memory available to the backend, bytes
	Conns    uint32  // established TCP connections on the service ports
	NetUtil  float64 // NIC throughput as a fraction of line rate, in [0,1]
	// MemBound says which limit MemBytes is (MemBoundHost, MemBoundCgroup or
	// MemBoundAncestor+dir); set with FieldMemBytes.
	MemBound string
	// ConnsVia says how Conns was counted (ConnsViaNetlink, or ConnsViaProc with the reason
	// sock_diag was not used); set with FieldConns.
	ConnsVia string

	// CPUPressure is the fraction of the last period in which at least one runnable task
	// waited for a CPU (PSI "some"), in [0,1]; PressureScope is ScopeHost or ScopeCgroup.
	CPUPressure   float64
	PressureScope string
	// Throttled is the fraction of the CFS periods in the last period in which the cgroup hit
	// its quota, in [0,1]; ThrottledTime is how long its tasks were held back in it.
	Throttled     float64
	ThrottledTime time.Duration
	// HealthLatency is how long the last health check that got a response took.
	HealthLatency time.Duration
	// ServiceCores is the CPU the service's own processes used over the last period, in
	// cores (CPU time over elapsed time, not clamped); the report carries it as a fraction of
	// CPUCount (ServiceCPUFraction).
	ServiceCores float64

	// Unavailable lists the fields a sampler found this machine cannot provide at all (no
	// PSI in the kernel, no cpu.stat throttling counters): unlike a clear Known bit alone,
	// it says the absence is permanent, not a failed reading.
	Unavailable Field
}

// Has reports whether every field in f is known.
func (v Values) Has(f Field) bool { return v.Known&f == f }

// Merge copies into v the fields that o knows.
func (v *Values) Merge(o Values) {
	if o.Has(FieldCPUUtil) {
		v.CPUUtil = o.CPUUtil
	}
	if o.Has(FieldCPUCount) {
		v.CPUCount = o.CPUCount
	}
	if o.Has(FieldMemUtil) {
		v.MemUtil = o.MemUtil
	}
	if o.Has(FieldMemBytes) {
		v.MemBytes = o.MemBytes
	}
	if o.Has(FieldConns) {
		v.Conns = o.Conns
	}
	if o.Has(FieldNetUtil) {
		v.NetUtil = o.NetUtil
	}
	if o.Has(FieldMemBytes) {
		v.MemBound = o.MemBound
	}
	if o.Has(FieldConns) {
		v.ConnsVia = o.ConnsVia
	}
	if o.Has(FieldCPUPressure) {
		v.CPUPressure, v.PressureScope = o.CPUPressure, o.PressureScope
	}
	if o.Has(FieldThrottled) {
		v.Throttled, v.ThrottledTime = o.Throttled, o.ThrottledTime
	}
	if o.Has(FieldHealthLatency) {
		v.HealthLatency = o.HealthLatency
	}
	if o.Has(FieldServiceCPU) {
		v.ServiceCores = o.ServiceCores
	}
	v.Known |= o.Known
	v.Unavailable = (v.Unavailable | o.Unavailable) &^ v.Known
}

// Sampler measures some of the fields of Values. It returns the fields it could measure even
// when it also returns an error about others.
type Sampler interface {
	Sample(ctx context.Context) (Values, error)
}

// ErrFirstSample is returned by rate samplers on their first call: a rate needs two readings.
var ErrFirstSample = errors.New("first reading, no rate yet")

// ErrUnavailable is wrapped by a sampler whose signal this machine does not offer (the file
// does not exist, or the kernel refuses it), or, for ServiceCPU, whose service's processes
// cannot be found at the moment: not a failure to count, a fact to log once. The
// sampler sets the signal's bits in Values.Unavailable and keeps trying, cheaply, in case it
// appears (a controller enabled later).
var ErrUnavailable = errors.New("signal not available here")

// Provider is implemented by samplers that can say which fields they measure, so that the
// probe can log at start what it will report.
type Provider interface {
	Provides() Field
}

// ReadFileFunc reads a whole file; os.ReadFile in production, a map in tests.
type ReadFileFunc func(name string) ([]byte, error)

// Clock gives the time for rate computations.
type Clock func() time.Time

func orRead(f ReadFileFunc) ReadFileFunc {
	if f == nil {
		return os.ReadFile
	}
	return f
}

func orClock(c Clock) Clock {
	if c == nil {
		return time.Now
	}
	return c
}
