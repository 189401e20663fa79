package report

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

var (
	testKey   = []byte("test-key-0123456789abcdef")
	otherKey  = []byte("other-key-0123456789abcdef")
	testEpoch = time.Date(2026, 11, 30, 21, 0, 0, 123456789, time.UTC)
)

// keys is the collector's view of configured backends for these tests.
func keys(id string) ([]byte, bool) {
	switch id {
	case "web-1", "web-2", "a", "b":
		return testKey, true
	case "short-key":
		return []byte("too-short"), true
	case strings.Repeat("x", MaxIDLen):
		return testKey, true
	}
	return nil, false
}

func sample() Report {
	return Report{
		BackendID:     "web-1",
		BootNonce:     0x0123456789abcdef,
		Seq:           42,
		Time:          testEpoch,
		Interval:      5 * time.Second,
		Flags:         FlagHealthOK,
		CPUUtil:       0.375,
		CPUCount:      2,
		MemUtil:       0.5,
		MemBytes:      8 << 30,
		Conns:         17,
		NetUtil:       0.01,
		HealthLatency: 1500 * time.Microsecond,
		HealthStatus:  200,
		Version:       Version2,
		Signals:       SignalCPUPressure | SignalPressureCgroup | SignalThrottled | SignalServiceCPU | SignalHealthLatency,
		CPUPressure:   0.125,
		Throttled:     0.25,
		ServiceCPU:    0.3,
	}
}

// sampleV1 is sample as a version-1 report: no signal but health_latency, which version 1
// implies for an answered check.
func sampleV1() Report {
	r := sample()
	r.Version, r.Signals = Version1, SignalHealthLatency
	r.CPUPressure, r.Throttled, r.ServiceCPU = 0, 0, 0
	return r
}

func seal(t testing.TB, r Report) []byte {
	t.Helper()
	b, err := r.AppendSeal(nil, testKey)
	if err != nil {
		t.Fatalf("AppendSeal(%+v): %v", r, err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		mod  func(r *Report)
	}{
		{"sample", func(r *Report) {}},
		{"longest id and health error", func(r *Report) {
			r.BackendID = strings.Repeat("x", MaxIDLen)
			r.HealthError = strings.Repeat("é", MaxHealthErrorLen/2)
		}},
		{"one-byte id", func(r *Report) { r.BackendID = "a" }},
		{"all flags, unhealthy", func(r *Report) {
			r.Flags = FlagHealthOK | FlagDrain | FlagLeaving
			r.HealthStatus = 503
			r.HealthError = "GET /healthz: 503 Service Unavailable"
		}},
		{"no response", func(r *Report) {
			r.Flags = 0
			r.HealthStatus = 0
			r.HealthError = "dial tcp 127.0.0.1:8080: connect: connection refused"
		}},
		{"bounds of utilisations", func(r *Report) { r.CPUUtil, r.MemUtil, r.NetUtil = 0, 1, 1 }},
		{"nine decimals are exact", func(r *Report) { r.CPUUtil, r.MemUtil, r.NetUtil = 0.123456789, 0.999999999, 1e-9 }},
		{"fractional quota", func(r *Report) { r.CPUCount = 0.25 }},
		{"smallest quota", func(r *Report) { r.CPUCount = 0.001 }},
		{"largest cpu count", func(r *Report) { r.CPUCount = math.MaxUint32 / cpuScale }},
		{"extremes of integers", func(r *Report) {
			r.BootNonce, r.Seq, r.MemBytes, r.Conns = math.MaxUint64, math.MaxUint64, math.MaxUint64, math.MaxUint32
			r.Interval, r.HealthLatency = math.MaxInt64, 0
		}},
		{"status 100 and 599", func(r *Report) { r.HealthStatus = 100 }},
		{"status 599", func(r *Report) { r.HealthStatus = 599 }},
		{"earliest time", func(r *Report) { r.Time = time.Unix(1, 0).UTC() }},
		{"time in another zone", func(r *Report) { r.Time = testEpoch.In(time.FixedZone("X", 3600)) }},
		{"version 2 without signals", func(r *Report) { r.Signals, r.CPUPressure, r.Throttled, r.ServiceCPU = 0, 0, 0, 0 }},
		{"version 2 host pressure only", func(r *Report) {
			r.Signals, r.Throttled, r.ServiceCPU = SignalCPUPressure, 0, 0
		}},
		{"version 2 bounds of signals", func(r *Report) { r.CPUPressure, r.Throttled, r.ServiceCPU = 0, 1, 1e-9 }},
		{"version 2 unanswered check keeps its latency", func(r *Report) {
			r.Signals &^= SignalHealthLatency
			r.HealthStatus, r.HealthLatency, r.HealthError = 0, 2*time.Second, "timeout"
		}},
		{"version 1", func(r *Report) { *r = sampleV1() }},
		{"version 1 longest id and health error", func(r *Report) {
			*r = sampleV1()
			r.BackendID = strings.Repeat("x", MaxIDLen)
			r.HealthError = strings.Repeat("é", MaxHealthErrorLen/2)
		}},
		{"version 1 no response", func(r *Report) {
			*r = sampleV1()
			r.Signals, r.HealthStatus, r.HealthError = 0, 0, "connection refused"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := sample()
			tt.mod(&in)
			b := seal(t, in)
			if len(b) > MaxDatagram || len(b) < MinDatagram {
				t.Fatalf("sealed size %d outside [%d,%d]", len(b), MinDatagram, MaxDatagram)
			}
			var out Report
			if err := Open(b, keys, &out); err != nil {
				t.Fatalf("Open: %v", err)
			}
			want := in
			want.Time = in.Time.UTC()
			if !want.Time.Equal(out.Time) || out.Time.Location() != time.UTC {
				t.Errorf("time = %v, want %v in UTC", out.Time, want.Time)
			}
			out.Time, want.Time = time.Time{}, time.Time{}
			if out != want {
				t.Errorf("round trip:\n got %+v\nwant %+v", out, want)
			}
		})
	}
}

// TestVersionDefaults covers what AppendSeal and Open fill in on their own: version 2 for a
// Report without a Version, and health_latency for a version-1 report with a response, the
// only version-1 datagrams whose latency timed the service.
func TestVersionDefaults(t *testing.T) {
	tests := []struct {
		name        string
		mod         func(r *Report)
		wantVersion uint8
		wantSignals Signals
		wantLen     int // of the sealed datagram
	}{
		{"version 0 is sealed as 2", func(r *Report) { r.Version = 0 }, Version2, sample().Signals, HeaderSizeV2 + 5 + TagSize},
		{"version 1 with a response", func(r *Report) { *r = sampleV1(); r.Signals = 0 }, Version1, SignalHealthLatency, HeaderSize + 5 + TagSize},
		{"version 1 without a response", func(r *Report) {
			*r = sampleV1()
			r.HealthStatus = 0
		}, Version1, 0, HeaderSize + 5 + TagSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := sample()
			tt.mod(&in)
			b := seal(t, in)
			if len(b) != tt.wantLen || b[offVersion] != tt.wantVersion {
				t.Fatalf("sealed %d bytes of version %d, want %d bytes of version %d", len(b), b[offVersion], tt.wantLen, tt.wantVersion)
			}
			var out Report
			if err := Open(b, keys, &out); err != nil {
				t.Fatal(err)
			}
			if out.Version != tt.wantVersion || out.Signals != tt.wantSignals {
				t.Errorf("decoded version %d signals %s, want %d %s", out.Version, out.Signals, tt.wantVersion, tt.wantSignals)
			}
		})
	}
}

func TestSignalsString(t *testing.T) {
	tests := []struct {
		s    Signals
		want string
	}{
		{0, "none"},
		{SignalCPUPressure, "cpu_pressure"},
		{SignalCPUPressure | SignalThrottled, "cpu_pressure,throttled"},
		{knownSignals, "cpu_pressure,pressure_cgroup,throttled,service_cpu,health_latency,in_flight"},
		{SignalServiceCPU | 1<<15, "service_cpu,0x8000"},
		{SignalInFlight, "in_flight"},
		{1 << 6, "0x40"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Signals(%#x).String() = %q, want %q", uint16(tt.s), got, tt.want)
		}
	}
}

func TestAppendSealKeepsPrefix(t *testing.T) {
	r := sample()
	prefix := []byte("prefix")
	b, err := r.AppendSeal(bytes.Clone(prefix), testKey)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("prefix lost: %q", b[:len(prefix)])
	}
	if !bytes.Equal(b[len(prefix):], seal(t, r)) {
		t.Fatal("sealing after a prefix gave different bytes (tag must cover only the report)")
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
		{"signals", func(r *Report) { r.Signals |= 1 << 6 }},
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

func TestAppendSealShortKey(t *testing.T) {
	r := sample()
	for _, key := range [][]byte{nil, []byte("fifteen-bytes!!")} {
		if _, err := r.AppendSeal(nil, key); err == nil || !strings.Contains(err.Error(), "web-1") {
			t.Errorf("AppendSeal with %d-byte key: err = %v, want an error naming the backend", len(key), err)
		}
	}
}

// reseal recomputes the tag after a mutation, to reach the checks behind it.
func reseal(b []byte) []byte {
	body := b[:len(b)-TagSize]
	return hmacSHA256(bytes.Clone(body), testKey, body)
}

func put16(b []byte, off int, v uint16) { b[off], b[off+1] = byte(v>>8), byte(v) }
func put32(b []byte, off int, v uint32) {
	for i := range 4 {
		b[off+i] = byte(v >> (24 - 8*i))
	}
}
func put64(b []byte, off int, v uint64) {
	for i := range 8 {
		b[off+i] = byte(v >> (56 - 8*i))
	}
}

func TestOpenRejects(t *testing.T) {
	good := seal(t, sample())
	tests := []struct {
		name   string
		make   func() []byte
		keyFor func(string) ([]byte, bool)
		want   Reason
		id     string // BackendID expected in the *Error
	}{
		{"empty", func() []byte { return nil }, nil, ReasonTruncated, ""},
		{"header minus one", func() []byte { return good[:HeaderSize-1] }, nil, ReasonTruncated, ""},
		{"header only", func() []byte { return good[:HeaderSize] }, nil, ReasonTruncated, ""},
		{"tag cut", func() []byte { return good[:len(good)-1] }, nil, ReasonTruncated, ""},
		{"oversized", func() []byte { return append(bytes.Clone(good), make([]byte, MaxDatagram+1-len(good))...) }, nil, ReasonOversized, ""},
		{"trailing byte", func() []byte { return append(bytes.Clone(good), 0) }, nil, ReasonMalformed, ""},
		{"bad magic", func() []byte { b := bytes.Clone(good); b[0] = 'G'; return b }, nil, ReasonMalformed, ""},
		{"garbage", func() []byte { return bytes.Repeat([]byte{0xa5}, 200) }, nil, ReasonMalformed, ""},
		{"version 0", func() []byte { b := bytes.Clone(good); b[offVersion] = 0; return b }, nil, ReasonVersion, ""},
		{"version 3", func() []byte { b := bytes.Clone(good); b[offVersion] = 3; return b }, nil, ReasonVersion, ""},
		{"version 1 with an extension", func() []byte { b := bytes.Clone(good); b[offVersion] = Version1; return b }, nil, ReasonMalformed, ""},
		{"version 2 without an extension", func() []byte { b := seal(t, sampleV1()); b[offVersion] = Version2; return b }, nil, ReasonTruncated, ""},
		{"version 2 header only", func() []byte { return good[:HeaderSizeV2] }, nil, ReasonTruncated, ""},
		{"version 1 tag cut", func() []byte { b := seal(t, sampleV1()); return b[:len(b)-1] }, nil, ReasonTruncated, ""},
		{"version 1 bad id byte", func() []byte { b := seal(t, sampleV1()); b[HeaderSize] = ' '; return b }, nil, ReasonMalformed, ""},
		{"version 1 tag flipped", func() []byte { b := seal(t, sampleV1()); b[len(b)-1] ^= 1; return b }, nil, ReasonBadMAC, "web-1"},
		{"version 1 reserved word", func() []byte { b := seal(t, sampleV1()); b[offReserved2+1] = 1; return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"id length 0", func() []byte { b := bytes.Clone(good); b[offIDLen] = 0; return b }, nil, ReasonMalformed, ""},
		{"id length 65", func() []byte { b := bytes.Clone(good); b[offIDLen] = MaxIDLen + 1; return b }, nil, ReasonMalformed, ""},
		{"error length 129", func() []byte { b := bytes.Clone(good); b[offErrLen] = MaxHealthErrorLen + 1; return b }, nil, ReasonMalformed, ""},
		{"lengths longer than datagram", func() []byte { b := bytes.Clone(good); b[offErrLen] = 1; return b }, nil, ReasonTruncated, ""},
		{"bad id byte", func() []byte { b := bytes.Clone(good); b[HeaderSizeV2] = ' '; return b }, nil, ReasonMalformed, ""},
		{"unknown backend", func() []byte { r := sample(); r.BackendID = "web-9"; return seal(t, r) }, nil, ReasonUnknownBackend, "web-9"},
		{"short configured key", func() []byte { r := sample(); r.BackendID = "short-key"; return seal(t, r) }, nil, ReasonUnknownBackend, "short-key"},
		{"no key lookup", func() []byte { return good }, func(string) ([]byte, bool) { return nil, false }, ReasonUnknownBackend, "web-1"},
		{"wrong key", func() []byte { r := sample(); b, _ := r.AppendSeal(nil, otherKey); return b }, nil, ReasonBadMAC, "web-1"},
		{"tag flipped", func() []byte { b := bytes.Clone(good); b[len(b)-1] ^= 1; return b }, nil, ReasonBadMAC, "web-1"},
		{"id swapped", func() []byte { b := bytes.Clone(good); copy(b[HeaderSizeV2:], "web-2"); return b }, nil, ReasonBadMAC, "web-2"},
		{"reserved byte", func() []byte { b := bytes.Clone(good); b[offReserved] = 1; return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"reserved word", func() []byte { b := bytes.Clone(good); b[offReserved2+1] = 1; return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"unknown flag", func() []byte { b := bytes.Clone(good); put16(b, offFlags, 1<<15); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"seq 0", func() []byte { b := bytes.Clone(good); put64(b, offSeq, 0); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"time 0", func() []byte { b := bytes.Clone(good); put64(b, offTime, 0); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"time negative", func() []byte { b := bytes.Clone(good); put64(b, offTime, 1<<63); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"interval 0", func() []byte { b := bytes.Clone(good); put64(b, offInterval, 0); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"interval negative", func() []byte { b := bytes.Clone(good); put64(b, offInterval, math.MaxUint64); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"cpu_util over 1", func() []byte { b := bytes.Clone(good); put32(b, offCPUUtil, utilScale+1); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"cpu_count 0", func() []byte { b := bytes.Clone(good); put32(b, offCPUCount, 0); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"mem_util over 1", func() []byte { b := bytes.Clone(good); put32(b, offMemUtil, math.MaxUint32); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"net_util over 1", func() []byte { b := bytes.Clone(good); put32(b, offNetUtil, utilScale+1); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"mem_bytes 0", func() []byte { b := bytes.Clone(good); put64(b, offMemBytes, 0); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"latency negative", func() []byte { b := bytes.Clone(good); put64(b, offLatency, 1<<63); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"status 99", func() []byte { b := bytes.Clone(good); put16(b, offStatus, 99); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"status 600", func() []byte { b := bytes.Clone(good); put16(b, offStatus, 600); return reseal(b) }, nil, ReasonMalformed, "web-1"},
		{"health error not utf-8", func() []byte {
			r := sample()
			r.HealthError = "xx"
			b := seal(t, r)
			b[len(b)-TagSize-1] = 0xff
			return reseal(b)
		}, nil, ReasonMalformed, "web-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keyFor := tt.keyFor
			if keyFor == nil {
				keyFor = keys
			}
			before := sample()
			before.BackendID, before.Seq = "previous", 7
			r := before
			err := Open(tt.make(), keyFor, &r)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Open: err = %v (%T), want *Error", err, err)
			}
			if e.Reason != tt.want {
				t.Errorf("reason = %s, want %s (%v)", e.Reason, tt.want, err)
			}
			if e.BackendID != tt.id {
				t.Errorf("backend = %q, want %q", e.BackendID, tt.id)
			}
			if e.Unwrap() == nil || !strings.Contains(err.Error(), string(tt.want)) {
				t.Errorf("error %q: want a cause and the reason in the text", err)
			}
			if r != before {
				t.Errorf("r changed on error: %+v", r)
			}
		})
	}
}

// TestOpenRejectsExtension: each bad version-2 extension, behind a valid tag, is malformed
// with an error naming the field at fault.
func TestOpenRejectsExtension(t *testing.T) {
	tests := []struct {
		name  string
		field string // must appear in the error
		mod   func(b []byte)
	}{
		{"reserved", "reserved bytes of the version-2 extension", func(b []byte) { b[offReserved3+1] = 1 }},
		{"unknown signal", "signals", func(b []byte) { put16(b, offSignals, uint16(knownSignals)+1<<5) }},
		{"pressure_cgroup alone", "pressure_cgroup without cpu_pressure", func(b []byte) {
			put16(b, offSignals, uint16(SignalPressureCgroup))
			put32(b, offCPUPressure, 0)
			put32(b, offThrottled, 0)
			put32(b, offServiceCPU, 0)
		}},
		{"cpu_pressure without its bit", "cpu_pressure 125000000 ppb without signal", func(b []byte) {
			put16(b, offSignals, uint16(SignalThrottled|SignalServiceCPU))
		}},
		{"throttled without its bit", "throttled 250000000 ppb without signal", func(b []byte) {
			put16(b, offSignals, uint16(SignalCPUPressure|SignalServiceCPU))
		}},
		{"service_cpu without its bit", "service_cpu 300000000 ppb without signal", func(b []byte) {
			put16(b, offSignals, uint16(SignalCPUPressure|SignalThrottled))
		}},
		{"cpu_pressure over 1", "cpu_pressure", func(b []byte) { put32(b, offCPUPressure, utilScale+1) }},
		{"throttled over 1", "throttled", func(b []byte) { put32(b, offThrottled, math.MaxUint32) }},
		{"service_cpu over 1", "service_cpu", func(b []byte) { put32(b, offServiceCPU, utilScale+1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := seal(t, sample())
			tt.mod(b)
			var r Report
			err := Open(reseal(b), keys, &r)
			if ReasonOf(err) != ReasonMalformed {
				t.Fatalf("Open: %v, want reason %s", err, ReasonMalformed)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %q", err, tt.field)
			}
			if r != (Report{}) {
				t.Errorf("r changed on error: %+v", r)
			}
		})
	}
}

// TestTamperAnyByte flips every bit of every byte of a sealed report: each
// must be rejected, whatever the reason.
func TestTamperAnyByte(t *testing.T) {
	for _, r := range []Report{sample(), sampleV1()} {
		r.HealthError = "timeout"
		tamper(t, seal(t, r))
	}
}

func tamper(t *testing.T, good []byte) {
	t.Helper()
	for i := range good {
		for bit := range 8 {
			b := bytes.Clone(good)
			b[i] ^= 1 << bit
			var out Report
			if err := Open(b, keys, &out); err == nil {
				t.Errorf("version %d, byte %d bit %d flipped: accepted as %+v", good[offVersion], i, bit, out)
			}
		}
	}
}

func TestHMACMatchesStdlib(t *testing.T) {
	for _, keyLen := range []int{16, 32, 63, 64, 65, 200} {
		for _, msgLen := range []int{0, 1, 55, 64, 111, 300} {
			key := bytes.Repeat([]byte{byte(keyLen)}, keyLen)
			msg := bytes.Repeat([]byte{byte(msgLen) ^ 0x5a}, msgLen)
			m := hmac.New(sha256.New, key)
			m.Write(msg)
			want := m.Sum(nil)
			// Twice: the pooled state must come back clean.
			for range 2 {
				if got := hmacSHA256([]byte("x"), key, msg); !bytes.Equal(got[1:], want) || got[0] != 'x' {
					t.Fatalf("key %d msg %d: got %x, want %x", keyLen, msgLen, got[1:], want)
				}
			}
		}
	}
}

func TestOpenerCache(t *testing.T) {
	const n = 3
	var dgrams [][]byte
	for i := range n {
		r := sample()
		r.BackendID = fmt.Sprintf("b%d", i)
		dgrams = append(dgrams, seal(t, r))
	}
	keyFor := func(id string) ([]byte, bool) { return testKey, true }
	var o Opener
	var r Report
	for _, d := range dgrams {
		if err := o.Open(d, keyFor, &r); err != nil {
			t.Fatal(err)
		}
	}
	if len(o.ids) != n {
		t.Fatalf("cache holds %d ids, want %d", len(o.ids), n)
	}
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		if err := o.Open(dgrams[i%n], keyFor, &r); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("Opener.Open over %d known backends: %v allocs/op, want 0", n, allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		if err := Open(dgrams[i%n], keyFor, &r); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs > 1 {
		t.Errorf("Open across backends: %v allocs/op, want <= 1", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		if err := Open(dgrams[0], keyFor, &r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Open of the id r already holds: %v allocs/op, want 0", allocs)
	}

	// Unauthenticated ids never enter the cache.
	bad := bytes.Clone(dgrams[0])
	copy(bad[HeaderSizeV2:], "zz")
	if err := o.Open(bad, keyFor, &r); ReasonOf(err) != ReasonBadMAC {
		t.Fatalf("forged id: %v, want bad_mac", err)
	}
	if _, ok := o.ids["zz"]; ok || len(o.ids) != n {
		t.Errorf("forged id entered the cache: %v", o.ids)
	}
}

func TestOpenerBounded(t *testing.T) {
	keyFor := func(id string) ([]byte, bool) { return testKey, true }
	var o Opener
	var r Report
	for i := range MaxInterned + 10 {
		in := sample()
		in.BackendID = fmt.Sprintf("b%d", i)
		if err := o.Open(seal(t, in), keyFor, &r); err != nil {
			t.Fatal(err)
		}
		if len(o.ids) > MaxInterned {
			t.Fatalf("after %d ids the cache holds %d, bound %d", i+1, len(o.ids), MaxInterned)
		}
	}
}

func TestReasonOf(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &Error{Reason: ReasonReplay, BackendID: "a", Err: errors.New("x")})
	if got := ReasonOf(err); got != ReasonReplay {
		t.Errorf("ReasonOf = %q", got)
	}
	if got := ReasonOf(errors.New("plain")); got != "" {
		t.Errorf("ReasonOf(plain) = %q", got)
	}
	if len(Reasons) != 8 {
		t.Errorf("Reasons has %d entries", len(Reasons))
	}
}

// TestBriefOpenerNoAllocs: a flood of forged datagrams (unknown ids, bad
// tags, junk) costs a Brief Opener no allocation, so it cannot buy garbage
// collection work with unauthenticated bytes.
func TestBriefOpenerNoAllocs(t *testing.T) {
	good := seal(t, sample())
	forged := bytes.Clone(good)
	forged[len(forged)-1] ^= 1
	unknown := sample()
	unknown.BackendID = "unknown"
	unknownB := seal(t, unknown)
	o := &Opener{Brief: true}
	for _, tt := range []struct {
		name string
		d    []byte
		want Reason
	}{
		{"bad tag", forged, ReasonBadMAC},
		{"unknown id", unknownB, ReasonUnknownBackend},
		{"junk", bytes.Repeat([]byte("j"), 200), ReasonMalformed},
	} {
		var r Report
		allocs := testing.AllocsPerRun(100, func() {
			if e, _ := o.Open(tt.d, fuzzKeyFor, &r).(*Error); e == nil || e.Reason != tt.want {
				t.Fatalf("%s: %v, want %s", tt.name, e, tt.want)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per datagram, want 0", tt.name, allocs)
		}
	}
	// A plain Opener still names the (copied) id in its error.
	var r Report
	err := (&Opener{}).Open(forged, fuzzKeyFor, &r)
	var e *Error
	if !errors.As(err, &e) || e.BackendID != "web-1" {
		t.Fatalf("plain Opener: %v, want an error naming web-1", err)
	}
	forged[HeaderSizeV2] = 'X' // the id's bytes are reused: the error's copy must not change
	if e.BackendID != "web-1" {
		t.Errorf("the error's backend id shares the datagram's memory: now %q", e.BackendID)
	}
}
