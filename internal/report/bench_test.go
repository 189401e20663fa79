package report

import (
	"fmt"
	"testing"
)

// benchBackends is how many backends the benchmarks rotate through, so the
// id cache and the Guard's map are exercised as in a real pool.
const benchBackends = 32

func benchKeyFor(id string) ([]byte, bool) { return testKey, true }

func benchDatagrams(b *testing.B, perBackend int) [][]byte {
	b.Helper()
	var out [][]byte
	for seq := 1; seq <= perBackend; seq++ {
		for i := range benchBackends {
			r := sample()
			r.BackendID = fmt.Sprintf("backend-%02d", i)
			r.Seq = uint64(seq)
			out = append(out, seal(b, r))
		}
	}
	return out
}

// BenchmarkOpen measures verify + decode of one datagram. "package" is the
// package-level Open across backends (one id allocation), "opener" the
// Opener the collector uses (none).
func BenchmarkOpen(b *testing.B) {
	dgrams := benchDatagrams(b, 1)
	b.Run("package", func(b *testing.B) {
		var r Report
		b.ReportAllocs()
		b.SetBytes(int64(len(dgrams[0])))
		for i := 0; b.Loop(); i++ {
			if err := Open(dgrams[i%len(dgrams)], benchKeyFor, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("opener", func(b *testing.B) {
		var o Opener
		var r Report
		b.ReportAllocs()
		b.SetBytes(int64(len(dgrams[0])))
		for i := 0; b.Loop(); i++ {
			if err := o.Open(dgrams[i%len(dgrams)], benchKeyFor, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOpenAndGuard adds the replay check. The datagrams carry
// increasing sequence numbers per backend; when they run out, the Guard is
// replaced outside the timer.
func BenchmarkOpenAndGuard(b *testing.B) {
	dgrams := benchDatagrams(b, 256)
	var o Opener
	var r Report
	g := NewGuard(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(dgrams)
		if j == 0 && i > 0 {
			b.StopTimer()
			g = NewGuard(0)
			b.StartTimer()
		}
		if err := o.Open(dgrams[j], benchKeyFor, &r); err != nil {
			b.Fatal(err)
		}
		if err := g.Check(&r, testEpoch); err != nil {
			b.Fatal(err)
		}
	}
}
