package sample

import (
	"context"
	"testing"
)

// BenchmarkSampleHost is one full host-scope sample as the agent takes it every interval:
// CPU times and count, memory, CPU pressure, and the connections on two service ports through
// sock_diag (BenchmarkSampleHostProc: through the /proc tables, as before sock_diag).
// Run: go test -run XXX -bench SampleHost -benchmem -benchtime 2000x ./probe/sample
func BenchmarkSampleHost(b *testing.B) {
	benchmarkSampleHost(b, NewConns(NewPortSet(80, 443)))
}

func BenchmarkSampleHostProc(b *testing.B) {
	benchmarkSampleHost(b, &Conns{Ports: NewPortSet(80, 443)})
}

func benchmarkSampleHost(b *testing.B, conns *Conns) {
	ctx := context.Background()
	samplers := []Sampler{NewHostCPU(), NewHostMem(), &Pressure{File: HostPressureFile, Scope: ScopeHost}, conns}
	for _, s := range samplers {
		_, _ = s.Sample(ctx)
	}
	b.ReportAllocs()
	start := cpuTime(b)
	n := 0
	defer func() { b.ReportMetric(float64(cpuTime(b)-start)/float64(n), "cpu-ns/op") }()
	for b.Loop() {
		n++
		var v Values
		for _, s := range samplers {
			// Back-to-back reads of /proc/stat see the same 10 ms ticks, so the CPU rate may be
			// missing; a sampler that measured nothing at all is a failure.
			r, err := s.Sample(ctx)
			if r.Known == 0 {
				b.Fatal(err)
			}
			v.Merge(r)
		}
	}
}
