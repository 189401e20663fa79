package report

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

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
