package report

import (
	"bytes"
	"math"
	"testing"
	"time"
)

func fuzzKeyFor(id string) ([]byte, bool) { return testKey, id != "unknown" }

// FuzzOpen feeds arbitrary datagrams to Open. Open must never panic, and
// anything it accepts must be canonical: sealing the decoded report again
// gives the same bytes. Each input is tried as it is (the fuzzer cannot
// forge a tag, so this exercises framing) and again with a valid tag
// appended, which reaches the field checks behind the MAC. The seeds hold
// datagrams of both versions, so both layouts are mutated.
func FuzzOpen(f *testing.F) {
	reports := []Report{sample(), sampleV1()}
	for _, g := range goldens {
		reports = append(reports, g.r)
	}
	for _, r := range reports {
		b, err := r.AppendSeal(nil, testKey)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-TagSize])
	}
	f.Add([]byte{})
	f.Add([]byte("FW\x01"))
	f.Add([]byte("FW\x02"))
	f.Add(bytes.Repeat([]byte{0xff}, MaxDatagram+1))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(d []byte) {
			var r Report
			err := Open(d, fuzzKeyFor, &r)
			// Frame agrees with Open on the framing, and a brief Opener
			// on the reason.
			idb, fr := Frame(d)
			switch or := ReasonOf(err); {
			case fr != "" && or != fr:
				t.Fatalf("Frame says %q, Open %v", fr, err)
			case fr == "" && (idb == nil || or == ReasonOversized || or == ReasonTruncated || or == ReasonVersion):
				t.Fatalf("Frame passed (id %q), Open %v", idb, err)
			}
			var rb Report
			if berr := (&Opener{Brief: true}).Open(d, fuzzKeyFor, &rb); ReasonOf(berr) != ReasonOf(err) || rb != r {
				t.Fatalf("brief Opener: %v, Open: %v", berr, err)
			}
			if err != nil {
				if ReasonOf(err) == "" {
					t.Fatalf("Open returned %T %v, want *Error", err, err)
				}
				if r != (Report{}) {
					t.Fatalf("r changed on error: %+v", r)
				}
				return
			}
			again, err := r.AppendSeal(nil, testKey)
			if err != nil {
				t.Fatalf("accepted report does not validate: %v\n%+v", err, r)
			}
			if !bytes.Equal(again, d) {
				t.Fatalf("accepted datagram is not canonical:\n in  %x\n out %x", d, again)
			}
		}
		check(data)
		if len(data) <= MaxDatagram-TagSize {
			check(hmacSHA256(bytes.Clone(data), testKey, data))
		}
	})
}

// FuzzRoundTrip builds reports of either version from arbitrary field
// values: AppendSeal either refuses them with ReasonMalformed or Open gives
// back the same report, up to the documented fixed-point resolution and the
// version defaults (Version 0 is sent as 2; a version-1 report comes back
// with health_latency exactly when it has a health status).
func FuzzRoundTrip(f *testing.F) {
	f.Add("web-1", uint64(1), uint64(42), int64(1_790_000_000_000_000_000), int64(5e9), uint16(1),
		0.375, 2.5, 0.5, uint64(4<<30), uint32(17), 0.01, int64(1.5e6), uint16(200), "",
		uint8(2), uint16(SignalCPUPressure|SignalPressureCgroup|SignalThrottled|SignalServiceCPU|SignalHealthLatency), 0.125, 0.25, 0.3)
	f.Add("web-1", uint64(1), uint64(42), int64(1_790_000_000_000_000_000), int64(5e9), uint16(1),
		0.375, 2.5, 0.5, uint64(4<<30), uint32(17), 0.01, int64(1.5e6), uint16(200), "",
		uint8(1), uint16(0), 0.0, 0.0, 0.0)
	f.Add("web-1", uint64(1), uint64(42), int64(1_790_000_000_000_000_000), int64(5e9), uint16(1),
		0.375, 2.5, 0.5, uint64(4<<30), uint32(17), 0.01, int64(1.5e6), uint16(0), "refused",
		uint8(0), uint16(SignalThrottled), 0.0, 1.0, 0.0)
	f.Add("a", uint64(0), uint64(0), int64(0), int64(0), uint16(0xffff),
		math.NaN(), math.Inf(1), -1.0, uint64(0), uint32(0), 2.0, int64(-1), uint16(600), "\xff",
		uint8(3), uint16(0xffff), math.NaN(), -1.0, 2.0)
	f.Fuzz(func(t *testing.T, id string, nonce, seq uint64, ns, interval int64, flags uint16,
		cpu, cpus, mem float64, memBytes uint64, conns uint32, netu float64, latency int64, status uint16, herr string,
		version uint8, signals uint16, pressure, throttled, serviceCPU float64) {
		in := Report{
			BackendID: id, BootNonce: nonce, Seq: seq, Time: time.Unix(0, ns).UTC(), Interval: time.Duration(interval),
			Flags: Flags(flags), CPUUtil: cpu, CPUCount: cpus, MemUtil: mem, MemBytes: memBytes, Conns: conns,
			NetUtil: netu, HealthLatency: time.Duration(latency), HealthStatus: status, HealthError: herr,
			Version: version, Signals: Signals(signals), CPUPressure: pressure, Throttled: throttled, ServiceCPU: serviceCPU,
		}
		b, err := in.AppendSeal(nil, testKey)
		if err != nil {
			if ReasonOf(err) != ReasonMalformed || b != nil {
				t.Fatalf("AppendSeal: %v (returned %x)", err, b)
			}
			return
		}
		var out Report
		if err := Open(b, func(string) ([]byte, bool) { return testKey, true }, &out); err != nil {
			t.Fatalf("Open(AppendSeal(%+v)): %v", in, err)
		}
		near := func(name string, a, b, res float64) {
			if math.Abs(a-b) > res/2+1e-15 {
				t.Fatalf("%s: sent %v, got %v (resolution %v)", name, a, b, res)
			}
		}
		near("cpu_util", in.CPUUtil, out.CPUUtil, 1/utilScale)
		near("mem_util", in.MemUtil, out.MemUtil, 1/utilScale)
		near("net_util", in.NetUtil, out.NetUtil, 1/utilScale)
		near("cpu_count", in.CPUCount, out.CPUCount, in.CPUCount*1e-15+1/cpuScale)
		near("cpu_pressure", in.CPUPressure, out.CPUPressure, 1/utilScale)
		near("throttled", in.Throttled, out.Throttled, 1/utilScale)
		near("service_cpu", in.ServiceCPU, out.ServiceCPU, 1/utilScale)
		if !out.Time.Equal(in.Time) {
			t.Fatalf("time: sent %v, got %v", in.Time, out.Time)
		}
		in.CPUUtil, in.MemUtil, in.NetUtil, in.CPUCount = out.CPUUtil, out.MemUtil, out.NetUtil, out.CPUCount
		in.CPUPressure, in.Throttled, in.ServiceCPU = out.CPUPressure, out.Throttled, out.ServiceCPU
		switch in.Version {
		case 0:
			in.Version = Version
		case Version1:
			in.Signals = 0
			if in.HealthStatus != 0 {
				in.Signals = SignalHealthLatency
			}
		}
		if out != in {
			t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
		}
	})
}
