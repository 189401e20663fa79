package report

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

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

	knownSignals = SignalCPUPressure | SignalPressureCgroup | SignalThrottled | SignalServiceCPU | SignalHealthLatency | SignalInFlight
)

var signalNames = [...]string{"cpu_pressure", "pressure_cgroup", "throttled", "service_cpu", "health_latency", "in_flight"}

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

// Wire constants of the push protocol (docs/push-protocol.md). Version 2 is version 1 with a
// 16-byte extension after the header; a collector accepts both, so probes can be upgraded one
// at a time after the collectors.
const (
	Version1    = 1        // the original layout: no Signals
	Version2    = 2        // adds Signals, CPUPressure, Throttled and ServiceCPU
	Version     = Version2 // the version AppendSeal writes for a Report whose Version is 0
	MaxDatagram = 512      // longer datagrams are ReasonOversized
	TagSize     = 32       // full HMAC-SHA256, never truncated

	MaxIDLen          = 64  // bytes of BackendID
	MaxHealthErrorLen = 128 // bytes of HealthError
	MinKeyLen         = 16  // bytes of key, for AppendSeal, Open and LoadKey

	// HeaderSize is the fixed header both versions start with; in version 1 the backend id
	// follows it.
	HeaderSize = 80
	// ExtensionSize is the version-2 extension between the header and the backend id.
	ExtensionSize = 16
	// HeaderSizeV2 is the fixed part before the backend id in version 2.
	HeaderSizeV2 = HeaderSize + ExtensionSize
	// MinDatagram is the smallest datagram of any version: a version-1 header, a one-byte id
	// and the tag.
	MinDatagram = HeaderSize + 1 + TagSize

	magic0, magic1 = 'F', 'W'

	// Fixed-point scales. Utilisations travel as parts per billion, so any
	// value with at most nine decimals survives the trip exactly; CPU
	// counts travel in millicores (Kubernetes' unit), so a cgroup quota of
	// 0.25 cores is exact.
	utilScale = 1e9
	cpuScale  = 1e3
)

// Byte offsets of the header fields (all big-endian).
const (
	offMagic     = 0  // 2 bytes "FW"
	offVersion   = 2  // 1
	offIDLen     = 3  // 1
	offErrLen    = 4  // 1
	offReserved  = 5  // 1, must be 0
	offFlags     = 6  // 2
	offNonce     = 8  // 8
	offSeq       = 16 // 8
	offTime      = 24 // 8, int64 unix ns
	offInterval  = 32 // 8, int64 ns
	offCPUUtil   = 40 // 4, ppb
	offCPUCount  = 44 // 4, millicores
	offMemUtil   = 48 // 4, ppb
	offNetUtil   = 52 // 4, ppb
	offMemBytes  = 56 // 8
	offLatency   = 64 // 8, int64 ns
	offConns     = 72 // 4
	offStatus    = 76 // 2
	offReserved2 = 78 // 2, must be 0

	// The version-2 extension.
	offSignals     = 80 // 2
	offReserved3   = 82 // 2, must be 0
	offCPUPressure = 84 // 4, ppb
	offThrottled   = 88 // 4, ppb
	offServiceCPU  = 92 // 4, ppb
)

// headerSize is the fixed part before the backend id of version v, which Frame checked.
func headerSize(v byte) int {
	if v == Version1 {
		return HeaderSize
	}
	return HeaderSizeV2
}

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

func toUtil(v float64) uint32   { return uint32(math.Round(v * utilScale)) }
func fromUtil(u uint32) float64 { return float64(u) / utilScale }

// AppendSeal validates r, appends its encoding to dst and then the
// HMAC-SHA256 tag computed with key over the encoding. On error dst is
// returned unchanged.
func (r *Report) AppendSeal(dst, key []byte) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return dst, err
	}
	if len(key) < MinKeyLen {
		return dst, fmt.Errorf("report: key for backend %q is %d bytes, want >= %d", r.BackendID, len(key), MinKeyLen)
	}
	start := len(dst)
	be := binary.BigEndian
	v := r.Version
	if v == 0 {
		v = Version
	}
	dst = append(dst, magic0, magic1, v, byte(len(r.BackendID)), byte(len(r.HealthError)), 0)
	dst = be.AppendUint16(dst, uint16(r.Flags))
	dst = be.AppendUint64(dst, r.BootNonce)
	dst = be.AppendUint64(dst, r.Seq)
	dst = be.AppendUint64(dst, uint64(r.Time.UnixNano()))
	dst = be.AppendUint64(dst, uint64(r.Interval))
	dst = be.AppendUint32(dst, toUtil(r.CPUUtil))
	dst = be.AppendUint32(dst, uint32(math.Round(r.CPUCount*cpuScale)))
	dst = be.AppendUint32(dst, toUtil(r.MemUtil))
	dst = be.AppendUint32(dst, toUtil(r.NetUtil))
	dst = be.AppendUint64(dst, r.MemBytes)
	dst = be.AppendUint64(dst, uint64(r.HealthLatency))
	dst = be.AppendUint32(dst, r.Conns)
	dst = be.AppendUint16(dst, r.HealthStatus)
	dst = be.AppendUint16(dst, 0)
	if v == Version2 {
		dst = be.AppendUint16(dst, uint16(r.Signals))
		dst = be.AppendUint16(dst, 0)
		dst = be.AppendUint32(dst, toUtil(r.CPUPressure))
		dst = be.AppendUint32(dst, toUtil(r.Throttled))
		dst = be.AppendUint32(dst, toUtil(r.ServiceCPU))
	}
	dst = append(dst, r.BackendID...)
	dst = append(dst, r.HealthError...)
	return hmacSHA256(dst, key, dst[start:]), nil
}

// Open checks datagram and decodes it into r. The checks run in this order,
// each failure returning a *Error with the Reason in brackets: size
// [truncated, oversized], magic [malformed], version [version], lengths
// [malformed, truncated], backend id charset [malformed], key lookup
// [unknown_backend], HMAC in constant time [bad_mac], field values
// [malformed]. Field values are only looked at once the tag verified, so an
// unauthenticated sender learns nothing from the reason beyond the framing.
//
// keyFor is called with the claimed, not yet authenticated, backend id; it
// is called from the collector's read loop, so it should be a map lookup,
// and it must not keep the id string past its return (it may share memory
// with datagram).
// On error r is left untouched. Open allocates only the id string
// (and HealthError when non-empty), and not even that when r already holds
// the same value; Opener avoids the id allocation across backends.
func Open(datagram []byte, keyFor func(backendID string) (key []byte, ok bool), r *Report) error {
	return (*Opener)(nil).Open(datagram, keyFor, r)
}

// Opener is Open with a bounded cache of backend id strings, so a collector
// decoding reports from many backends allocates nothing per datagram. Ids
// enter the cache only after their MAC verified, so unauthenticated senders
// cannot fill it; it holds at most MaxInterned ids and is emptied when full.
// The zero value is ready to use; an Opener is not safe for concurrent use.
type Opener struct {
	// Brief makes rejections before authentication (framing,
	// unknown_backend, bad_mac) shared errors without the backend id or
	// details, so they allocate nothing; a server logging them re-opens the
	// datagram with a plain Open when it is about to write a line.
	Brief bool

	ids map[string]string
}

// MaxInterned bounds Opener's id cache: enough for the 100,000 backends one collector is
// sized for (docs/benchmarks.md, "Collector ingest"), whose ids are all authenticated. At 4,096
// a collector of 100,000 backends emptied its cache every 4,096 reports and allocated an id
// per report. Full, the cache holds about 10 MB per read loop.
const MaxInterned = 1 << 17

// Open is the package-level Open, using o's id cache. A nil *Opener has no
// cache.
func (o *Opener) Open(datagram []byte, keyFor func(backendID string) (key []byte, ok bool), r *Report) error {
	idb, reason := Frame(datagram)
	if reason != "" {
		if o != nil && o.Brief {
			return briefErrors[reason]
		}
		return frameError(datagram)
	}
	// Find the id string without allocating when we can: the caller's
	// previous report, then the cache.
	id, cached, owned := r.BackendID, false, true
	if id != string(idb) {
		if id, cached = o.lookup(idb); !cached {
			// Borrow the datagram's bytes for the key lookup: a string of our own is
			// made only once the tag verified (or for a detailed error), so a flood of
			// forged ids allocates nothing.
			id, owned = unsafe.String(unsafe.SliceData(idb), len(idb)), false
		}
	}
	if keyFor == nil {
		return o.fail(ReasonUnknownBackend, id, owned, "no key lookup configured")
	}
	key, ok := keyFor(id)
	if !ok {
		return o.fail(ReasonUnknownBackend, id, owned, "no key for this backend")
	}
	if len(key) < MinKeyLen {
		return o.fail(ReasonUnknownBackend, id, owned, fmt.Sprintf("configured key is %d bytes, want >= %d", len(key), MinKeyLen))
	}
	hdr := headerSize(datagram[offVersion])
	idLen, errLen := int(datagram[offIDLen]), int(datagram[offErrLen])
	body := hdr + idLen + errLen
	if !verifyMAC(key, datagram[:body], datagram[body:]) {
		return o.fail(ReasonBadMAC, id, owned, "tag does not verify")
	}
	if !owned {
		id = strings.Clone(id)
	}
	if !cached {
		o.intern(id)
	}
	return o.fields(datagram, id, hdr+idLen, body, r)
}

// Frame runs the checks that need no key (size, magic, version, lengths,
// id charset: checks 1 to 7 of docs/push-protocol.md) and returns the
// claimed, unauthenticated backend id, a slice of datagram. It allocates
// nothing, so a server can shed junk before it costs a key lookup, an HMAC
// or an error value; reason is "" when the framing is sound, and Open
// gives the same reason with the details.
func Frame(datagram []byte) (id []byte, reason Reason) {
	n := len(datagram)
	switch {
	case n > MaxDatagram:
		return nil, ReasonOversized
	case n < HeaderSize:
		return nil, ReasonTruncated
	case datagram[offMagic] != magic0 || datagram[offMagic+1] != magic1:
		return nil, ReasonMalformed
	case datagram[offVersion] != Version1 && datagram[offVersion] != Version2:
		return nil, ReasonVersion
	}
	hdr := headerSize(datagram[offVersion])
	idLen, errLen := int(datagram[offIDLen]), int(datagram[offErrLen])
	if idLen == 0 || idLen > MaxIDLen || errLen > MaxHealthErrorLen {
		return nil, ReasonMalformed
	}
	if want := hdr + idLen + errLen + TagSize; n != want {
		if n < want {
			return nil, ReasonTruncated
		}
		return nil, ReasonMalformed
	}
	id = datagram[hdr : hdr+idLen]
	if !validID(id) {
		return nil, ReasonMalformed
	}
	return id, ""
}

// frameError is Frame's rejection with the details, for datagrams Frame
// refused.
func frameError(datagram []byte) error {
	n := len(datagram)
	if n > MaxDatagram {
		return reject(ReasonOversized, "", "datagram is %d bytes, max %d", n, MaxDatagram)
	}
	if n < HeaderSize {
		return reject(ReasonTruncated, "", "datagram is %d bytes, shorter than the %d-byte header", n, HeaderSize)
	}
	if datagram[offMagic] != magic0 || datagram[offMagic+1] != magic1 {
		return reject(ReasonMalformed, "", "bad magic %#02x%02x, want %#02x%02x", datagram[0], datagram[1], magic0, magic1)
	}
	v := datagram[offVersion]
	if v != Version1 && v != Version2 {
		return reject(ReasonVersion, "", "version %d, this collector speaks %d and %d", v, Version1, Version2)
	}
	hdr := headerSize(v)
	idLen, errLen := int(datagram[offIDLen]), int(datagram[offErrLen])
	if idLen == 0 || idLen > MaxIDLen {
		return reject(ReasonMalformed, "", "id length %d, want 1..%d", idLen, MaxIDLen)
	}
	if errLen > MaxHealthErrorLen {
		return reject(ReasonMalformed, "", "health error length %d, want <= %d", errLen, MaxHealthErrorLen)
	}
	body := hdr + idLen + errLen
	if want := body + TagSize; n != want {
		if n < want {
			return reject(ReasonTruncated, "", "version-%d datagram is %d bytes, its lengths say %d", v, n, want)
		}
		return reject(ReasonMalformed, "", "version-%d datagram is %d bytes, its lengths say %d", v, n, want)
	}
	if idb := datagram[hdr : hdr+idLen]; !validID(idb) {
		return reject(ReasonMalformed, "", "backend id %q: want [A-Za-z0-9._-]", idb)
	}
	return reject(ReasonMalformed, "", "framing") // unreachable while Frame and this agree
}

// fail is a rejection before authentication. Brief Openers return a shared
// error without formatting anything: a flood of forged datagrams then costs
// no allocation.
// id may borrow the datagram (owned false): it is copied if it is kept.
func (o *Opener) fail(reason Reason, id string, owned bool, msg string) error {
	if o != nil && o.Brief {
		return briefErrors[reason]
	}
	if !owned {
		id = strings.Clone(id)
	}
	return &Error{Reason: reason, BackendID: id, Err: errors.New(msg)}
}

var briefErrors = map[Reason]*Error{
	ReasonOversized:      {Reason: ReasonOversized, Err: errors.New("datagram too long")},
	ReasonTruncated:      {Reason: ReasonTruncated, Err: errors.New("datagram shorter than its framing")},
	ReasonMalformed:      {Reason: ReasonMalformed, Err: errors.New("framing is not a version-1 or version-2 report")},
	ReasonVersion:        {Reason: ReasonVersion, Err: errors.New("a protocol version this collector does not speak")},
	ReasonUnknownBackend: {Reason: ReasonUnknownBackend, Err: errors.New("no key for the claimed backend id")},
	ReasonBadMAC:         {Reason: ReasonBadMAC, Err: errors.New("tag does not verify")},
}

// fields decodes and checks the authenticated header fields; the health error runs from
// errStart to body.
func (o *Opener) fields(datagram []byte, id string, errStart, body int, r *Report) error {
	be := binary.BigEndian
	bad := func(format string, args ...any) error { return reject(ReasonMalformed, id, format, args...) }
	if datagram[offReserved] != 0 || be.Uint16(datagram[offReserved2:]) != 0 {
		return bad("reserved bytes are not zero")
	}
	var out Report
	out.BackendID = id
	out.Flags = Flags(be.Uint16(datagram[offFlags:]))
	if out.Flags&^knownFlags != 0 {
		return bad("flags %#04x: unknown bits %#04x", uint16(out.Flags), uint16(out.Flags&^knownFlags))
	}
	out.BootNonce = be.Uint64(datagram[offNonce:])
	if out.Seq = be.Uint64(datagram[offSeq:]); out.Seq == 0 {
		return bad("seq is 0")
	}
	ns := int64(be.Uint64(datagram[offTime:]))
	// The same bounds as Validate: after 1970-01-01T00:00:01Z, and a whole second before the
	// end of the int64 nanoseconds (in 2262), so every report Open accepts also validates
	// and can be sealed again (FuzzOpen found the last 0.85 s of the range accepted here).
	if ns < int64(time.Second) || ns/int64(time.Second) >= math.MaxInt64/int64(time.Second) {
		return bad("time %d ns: want after 1970 and before 2262 (unix nanoseconds in an int64)", ns)
	}
	out.Time = time.Unix(0, ns).UTC()
	if out.Interval = time.Duration(be.Uint64(datagram[offInterval:])); out.Interval <= 0 {
		return bad("interval %d ns: want > 0", int64(out.Interval))
	}
	var err error
	out.CPUUtil, err = utilField(datagram, offCPUUtil, "cpu_util", id)
	if err != nil {
		return err
	}
	mc := be.Uint32(datagram[offCPUCount:])
	if mc == 0 {
		return bad("cpu_count is 0")
	}
	out.CPUCount = float64(mc) / cpuScale
	if out.MemUtil, err = utilField(datagram, offMemUtil, "mem_util", id); err != nil {
		return err
	}
	if out.NetUtil, err = utilField(datagram, offNetUtil, "net_util", id); err != nil {
		return err
	}
	if out.MemBytes = be.Uint64(datagram[offMemBytes:]); out.MemBytes == 0 {
		return bad("mem_bytes is 0")
	}
	if out.HealthLatency = time.Duration(be.Uint64(datagram[offLatency:])); out.HealthLatency < 0 {
		return bad("health_latency %d ns: want >= 0", int64(out.HealthLatency))
	}
	out.Conns = be.Uint32(datagram[offConns:])
	if out.HealthStatus = be.Uint16(datagram[offStatus:]); !validStatus(out.HealthStatus) {
		return bad("health_status %d: want 0 or 100..599", out.HealthStatus)
	}
	out.Version = datagram[offVersion]
	if out.Version == Version1 {
		if out.HealthStatus != 0 {
			out.Signals = SignalHealthLatency
		}
	} else if out, err = extension(datagram, id, out); err != nil {
		return err
	}
	if errb := datagram[errStart:body]; len(errb) > 0 {
		if !utf8.Valid(errb) {
			return bad("health_error is not valid UTF-8")
		}
		if out.HealthError = r.HealthError; out.HealthError != string(errb) {
			out.HealthError = string(errb)
		}
	}
	*r = out
	return nil
}

// extension decodes and checks the version-2 extension into out: the same rules as
// validateSignals, on the wire's integers. It takes out by value and returns it, so that
// fields' Report stays on the stack.
func extension(d []byte, id string, out Report) (Report, error) {
	be := binary.BigEndian
	bad := func(format string, args ...any) error { return reject(ReasonMalformed, id, format, args...) }
	if be.Uint16(d[offReserved3:]) != 0 {
		return out, bad("reserved bytes of the version-2 extension are not zero")
	}
	s := Signals(be.Uint16(d[offSignals:]))
	switch {
	case s&^knownSignals != 0:
		return out, bad("signals %#04x: unknown bits %#04x", uint16(s), uint16(s&^knownSignals))
	case s&SignalPressureCgroup != 0 && s&SignalCPUPressure == 0:
		return out, bad("signals %s: pressure_cgroup without cpu_pressure", s)
	}
	out.Signals = s
	var vals [3]float64
	for i, f := range [...]struct {
		off  int
		name string
		bit  Signals
	}{
		{offCPUPressure, "cpu_pressure", SignalCPUPressure},
		{offThrottled, "throttled", SignalThrottled},
		{offServiceCPU, "service_cpu", SignalServiceCPU},
	} {
		if s&f.bit == 0 {
			if u := be.Uint32(d[f.off:]); u != 0 {
				return out, bad("%s %d ppb without signal %s: want 0 (absent)", f.name, u, f.name)
			}
			continue
		}
		v, err := utilField(d, f.off, f.name, id)
		if err != nil {
			return out, err
		}
		vals[i] = v
	}
	out.CPUPressure, out.Throttled, out.ServiceCPU = vals[0], vals[1], vals[2]
	return out, nil
}

func utilField(d []byte, off int, name, id string) (float64, error) {
	u := binary.BigEndian.Uint32(d[off:])
	if u > utilScale {
		return 0, reject(ReasonMalformed, id, "%s %d ppb: want <= %d", name, u, uint32(utilScale))
	}
	return fromUtil(u), nil
}

func (o *Opener) lookup(idb []byte) (string, bool) {
	if o == nil {
		return "", false
	}
	s, ok := o.ids[string(idb)] // no allocation: the compiler special-cases this
	return s, ok
}

func (o *Opener) intern(id string) {
	if o == nil {
		return
	}
	if o.ids == nil || len(o.ids) >= MaxInterned {
		o.ids = make(map[string]string)
	}
	o.ids[id] = id
}
