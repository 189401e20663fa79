package report

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// The model of a report: what it says (Report, Flags, Signals), the protocol's limits, and
// Validate, the rules a report must meet before it is sealed. The byte layout is in
// frame.go, the encoder in encode.go, the decoder in decode.go.

// Flags carry the probe's view of the service. Unknown bits are rejected as
// malformed: a new flag comes with a new protocol version, so an old
// collector never silently ignores, say, a drain request.
type Flags uint16

const (
	// FlagHealthOK: the local HTTP health check passed.
	FlagHealthOK Flags = 1 << iota
	// FlagDrain: the operator asked for no new connections (weight 0) while
	// the backend keeps serving existing ones.
	FlagDrain
	// FlagLeaving: the probe is shutting down; this is its last report.
	FlagLeaving

	knownFlags = FlagHealthOK | FlagDrain | FlagLeaving
)

// Signals says which version-2 signals a report carries. A clear bit means absent (not
// measured, or not available on that machine), never zero load: the collector must be able
// to tell "no CPU pressure" from "pressure not known". Unknown bits are malformed, for the
// same reason as unknown Flags.
type Signals uint16

const (
	SignalCPUPressure    Signals = 1 << iota // CPUPressure is set
	SignalPressureCgroup                     // CPUPressure is the cgroup's own cpu.pressure, not the host's /proc/pressure/cpu (only with SignalCPUPressure)
	SignalThrottled                          // Throttled is set
	SignalServiceCPU                         // ServiceCPU is set
	SignalHealthLatency                      // HealthLatency is a measured health-check time
	// SignalInFlight marks an in-flight report: Conns was counted just now, as the work in
	// flight, for the controller's fast loop; every other field repeats the probe's last full
	// report and is not a new sample (the collector takes Conns and the drain flag from it,
	// and nothing else). Probes send them between full reports (docs/push-protocol.md).
	SignalInFlight
	// SignalConnsStale says Conns is not a count: the probe could not count the connections
	// for more than its StaleAfter intervals and sends 0 in their place. A 0 that is not a
	// count must not tell a drain that the backend is safe to stop (controller drain -wait).
	SignalConnsStale

	knownSignals = SignalCPUPressure | SignalPressureCgroup | SignalThrottled | SignalServiceCPU | SignalHealthLatency | SignalInFlight | SignalConnsStale
)

var signalNames = [...]string{"cpu_pressure", "pressure_cgroup", "throttled", "service_cpu", "health_latency", "in_flight", "conns_stale"}

// String lists the bits of s by name, comma-separated ("cpu_pressure,throttled"), unknown
// bits as one hex number; "none" for 0. The names are the ones docs/push-protocol.md uses.
func (s Signals) String() string {
	var b strings.Builder
	for i, n := range signalNames {
		if s&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(n)
		}
	}
	if rest := s &^ knownSignals; rest != 0 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%#x", uint16(rest))
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// The protocol's versions and the limits of a report's fields (docs/push-protocol.md).
// Version 2 is version 1 with a 16-byte extension after the header; a collector accepts
// both, so probes can be upgraded one at a time after the collectors. The sizes of the
// datagram itself are in frame.go.
const (
	Version1 = 1        // the original layout: no Signals
	Version2 = 2        // adds Signals, CPUPressure, Throttled and ServiceCPU
	Version  = Version2 // the version AppendSeal writes for a Report whose Version is 0

	MaxIDLen          = 64  // bytes of BackendID
	MaxHealthErrorLen = 128 // bytes of HealthError
	MinKeyLen         = 16  // bytes of key, for AppendSeal, Open and LoadKey

	// Fixed-point scales. Utilisations travel as parts per billion, so any
	// value with at most nine decimals survives the trip exactly; CPU
	// counts travel in millicores (Kubernetes' unit), so a cgroup quota of
	// 0.25 cores is exact.
	utilScale = 1e9
	cpuScale  = 1e3
)

// Report is one probe sample as it travels from probe to collector.
type Report struct {
	BackendID     string        // 1..64 bytes of [A-Za-z0-9._-]
	BootNonce     uint64        // random per probe process start
	Seq           uint64        // 1,2,3... per boot
	Time          time.Time     // probe wall clock when sent (unix nanoseconds on the wire)
	Interval      time.Duration // probe's sampling interval
	Flags         Flags
	CPUUtil       float64 // [0,1] of CPUCount
	CPUCount      float64 // cores available to the service (a cgroup quota may be fractional, e.g. 0.25)
	MemUtil       float64 // [0,1]
	MemBytes      uint64  // memory capacity (limit) in bytes
	Conns         uint32  // established TCP connections on the service port(s)
	NetUtil       float64 // [0,1]; 0 when not measured
	HealthLatency time.Duration
	HealthStatus  uint16 // HTTP status of the health check, 0 when no response
	HealthError   string // <=128 bytes, empty when healthy

	// Version is the protocol version the report came in (1 or 2). AppendSeal writes the
	// version given, and Version (2) when it is 0, so a probe that leaves it unset speaks the
	// current version; Open sets it. A version-1 report can carry no signal but
	// SignalHealthLatency, and Open gives a version-1 report SignalHealthLatency exactly when
	// HealthStatus is not 0 (version 1's rule: only an answered check times the service).
	Version uint8
	// Signals says which of the fields below are set, and whether HealthLatency is a
	// measured health-check time (without SignalHealthLatency it is whatever the check took
	// to fail, such as its timeout). A field whose bit is clear must be 0.
	Signals     Signals
	CPUPressure float64 // [0,1]: fraction of the interval in which some task waited for CPU (PSI "some")
	Throttled   float64 // [0,1]: fraction of CFS periods in the interval in which the cgroup hit its quota
	ServiceCPU  float64 // [0,1] of CPUCount: CPU used by the service's own processes
}

// validID reports whether id is 1..MaxIDLen bytes of [A-Za-z0-9._-]. The
// charset keeps ids safe in logs, metric labels and file names.
func validID[T string | []byte](id T) bool {
	if len(id) == 0 || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Validate checks every field against the limits of the wire format, so a
// probe learns about a bad value when it builds the report rather than from
// a silent rejection at the collector. The error is a *Error with
// ReasonMalformed naming the field.
func (r *Report) Validate() error {
	bad := func(format string, args ...any) error {
		return reject(ReasonMalformed, r.BackendID, format, args...)
	}
	switch {
	case !validID(r.BackendID):
		return bad("backend id %q: want 1..%d bytes of [A-Za-z0-9._-]", r.BackendID, MaxIDLen)
	case r.Seq == 0:
		return bad("seq is 0: sequence numbers start at 1")
	case r.Time.IsZero() || r.Time.Unix() <= 0 || r.Time.Unix() >= math.MaxInt64/int64(time.Second):
		return bad("time %s: want after 1970 and before 2262 (unix nanoseconds in an int64)", r.Time)
	case r.Interval <= 0:
		return bad("interval %s: want > 0", r.Interval)
	case r.Flags&^knownFlags != 0:
		return bad("flags %#04x: unknown bits %#04x", uint16(r.Flags), uint16(r.Flags&^knownFlags))
	case !unitRange(r.CPUUtil):
		return bad("cpu_util %v: want [0,1]", r.CPUUtil)
	case !cpuRange(r.CPUCount):
		return bad("cpu_count %v: want 0.001..%.3f cores in steps of 0.001", r.CPUCount, math.MaxUint32/cpuScale)
	case !unitRange(r.MemUtil):
		return bad("mem_util %v: want [0,1]", r.MemUtil)
	case r.MemBytes == 0:
		return bad("mem_bytes is 0: want the memory capacity in bytes")
	case !unitRange(r.NetUtil):
		return bad("net_util %v: want [0,1]", r.NetUtil)
	case r.HealthLatency < 0:
		return bad("health_latency %s: want >= 0", r.HealthLatency)
	case !validStatus(r.HealthStatus):
		return bad("health_status %d: want 0 (no response) or 100..599", r.HealthStatus)
	case len(r.HealthError) > MaxHealthErrorLen:
		return bad("health_error is %d bytes: want <= %d", len(r.HealthError), MaxHealthErrorLen)
	case !utf8.ValidString(r.HealthError):
		return bad("health_error is not valid UTF-8")
	}
	return r.validateSignals()
}

// validateSignals checks the version and the version-2 fields: values only under their bits,
// so a collector never mistakes an unset field for a measured zero.
func (r *Report) validateSignals() error {
	bad := func(format string, args ...any) error {
		return reject(ReasonMalformed, r.BackendID, format, args...)
	}
	s := r.Signals
	switch {
	case r.Version > Version2:
		return bad("version %d: want 1, 2, or 0 for %d", r.Version, Version)
	case s&^knownSignals != 0:
		return bad("signals %#04x: unknown bits %#04x", uint16(s), uint16(s&^knownSignals))
	case s&SignalPressureCgroup != 0 && s&SignalCPUPressure == 0:
		return bad("signals %s: pressure_cgroup without cpu_pressure", s)
	case r.Version == Version1 && s&^SignalHealthLatency != 0:
		return bad("signals %s: version 1 carries only health_latency", s)
	}
	for _, f := range [...]struct {
		name string
		bit  Signals
		v    float64
	}{
		{"cpu_pressure", SignalCPUPressure, r.CPUPressure},
		{"throttled", SignalThrottled, r.Throttled},
		{"service_cpu", SignalServiceCPU, r.ServiceCPU},
	} {
		switch {
		case s&f.bit == 0 && f.v != 0:
			return bad("%s %v without signal %s: want 0 (absent)", f.name, f.v, f.name)
		case !unitRange(f.v):
			return bad("%s %v: want [0,1]", f.name, f.v)
		}
	}
	return nil
}

// unitRange is false for NaN as well as for values outside [0,1].
func unitRange(v float64) bool { return v >= 0 && v <= 1 }

func cpuRange(v float64) bool {
	m := math.Round(v * cpuScale)
	return m >= 1 && m <= math.MaxUint32
}

func validStatus(s uint16) bool { return s == 0 || (s >= 100 && s <= 599) }
