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
