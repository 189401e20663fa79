package collector

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/internal/report"
)

// BenchmarkPoolAccept is the pool's share of a push report's cost: Accept, the sink the push
// server calls with each verified report, in process (no socket, no HMAC), so a change to the
// per-report apply path shows here before it shows, diluted, in the loopback benchmarks of
// collector/push. The reports are those a healthy probe sends (a full report: health OK, the
// health-check latency; or an in-flight report between full ones), the backends take turns,
// each with its own increasing sequence numbers, and the clock is the real one, as in the
// controller (Config.Now left to time.Now). "parallel" has GOMAXPROCS goroutines, each with
// backends of its own (the server never hands one backend's reports over concurrently), all
// through the pool's one lock, as the push server's readers are.
func BenchmarkPoolAccept(b *testing.B) {
	for _, tc := range []struct {
		name     string
		backends int
		inFlight bool
		parallel bool
	}{
		{name: "full/backends=64", backends: 64},
		{name: "inflight/backends=64", backends: 64, inFlight: true},
		{name: "full/backends=64/parallel", backends: 64, parallel: true},
		{name: "full/backends=10000", backends: 10000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			names := make([]string, tc.backends)
			for i := range names {
				names[i] = fmt.Sprintf("bench-%06d", i)
			}
			p := NewPool(Config{FailThreshold: 3, RiseThreshold: 2, StaleAfter: time.Minute, Warmup: time.Second, Alpha: 0.3})
			p.SetBackends(names)
			mk := func(id string) report.Report {
				r := report.Report{BackendID: id, BootNonce: 0xfeed, Interval: time.Second, Flags: report.FlagHealthOK,
					CPUUtil: 0.25, CPUCount: 4, MemUtil: 0.5, MemBytes: 1 << 30, Conns: 3, HealthStatus: 200,
					HealthLatency: time.Millisecond, Version: report.Version2, Signals: report.SignalHealthLatency}
				if tc.inFlight {
					r.Signals |= report.SignalInFlight
				}
				return r
			}
			if tc.parallel {
				acceptParallel(b, p, names, mk)
			} else {
				reps := make([]report.Report, len(names))
				for i, n := range names {
					reps[i] = mk(n)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					r := &reps[i%len(reps)]
					r.Seq++
					p.Accept(r, from)
				}
			}
			b.StopTimer()
			var reports uint64
			for _, st := range p.Snapshot(nil) {
				reports += st.Reports
			}
			if reports != uint64(b.N) {
				b.Fatalf("the pool counted %d reports of %d", reports, b.N)
			}
		})
	}
}

// acceptParallel feeds p from GOMAXPROCS goroutines (RunParallel's, no SetParallelism):
// goroutine g of G takes backends g, g+G, ..., so one backend's reports stay in one goroutine.
func acceptParallel(b *testing.B, p *Pool, names []string, mk func(string) report.Report) {
	G := runtime.GOMAXPROCS(0)
	if G > len(names) {
		b.Skip("fewer backends than goroutines")
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var reps []report.Report
		for k := int(next.Add(1) - 1); k < len(names); k += G {
			reps = append(reps, mk(names[k]))
		}
		for i := 0; pb.Next(); i++ {
			r := &reps[i%len(reps)]
			r.Seq++
			p.Accept(r, from)
		}
	})
}
