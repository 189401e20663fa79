package sample

import (
	"context"
	"testing"
)

// BenchmarkSampleHost is one full host-scope sample as the agent takes it every interval:
// CPU times and count, memory, and the TCP tables on two service ports.
// Run: go test -run XXX -bench SampleHost -benchmem -benchtime 2000x ./probe/sample
func BenchmarkSampleHost(b *testing.B) {
	ctx := context.Background()
	samplers := []Sampler{NewHostCPU(), NewHostMem(), &Conns{Ports: NewPortSet(80, 443)}}
	for _, s := range samplers {
		_, _ = s.Sample(ctx)
	}
	b.ReportAllocs()
	for b.Loop() {
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
