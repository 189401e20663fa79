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

// The decoder: Open and Opener check a datagram's framing (frame.go), find the backend's
// key, verify the tag, and only then decode and check the fields.

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
	f, ft := parseFrame(datagram)
	if ft.check != checkNone {
		if o != nil && o.Brief {
			return briefErrors[ft.reason]
		}
		return ft.err(datagram)
	}
	idb := datagram[f.idStart():f.errStart()]
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
	if body := f.body(); !verifyMAC(key, datagram[:body], datagram[body:]) {
		return o.fail(ReasonBadMAC, id, owned, "tag does not verify")
	}
	if !owned {
		id = strings.Clone(id)
	}
	if !cached {
		o.intern(id)
	}
	return o.fields(datagram, id, f, r)
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

// fields decodes and checks the authenticated fields of a datagram framed by f.
func (o *Opener) fields(datagram []byte, id string, f frame, r *Report) error {
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
	out.Version = f.version
	if !f.extended() {
		if out.HealthStatus != 0 {
			out.Signals = SignalHealthLatency
		}
	} else if out, err = extension(datagram, id, out); err != nil {
		return err
	}
	if errb := datagram[f.errStart():f.body()]; len(errb) > 0 {
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

func fromUtil(u uint32) float64 { return float64(u) / utilScale }
