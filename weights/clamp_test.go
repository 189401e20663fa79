package weights

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCapacityClaimsBounded: a backend's own CPU count or memory counts for at most
// max_capacity_ratio × the pool's lower median per declared capacity unit, and a clamped
// backend is weighed exactly as if it had reported the bound.
func TestCapacityClaimsBounded(t *testing.T) {
	const gib = 1 << 30
	be := func(name string, cores, mem, factor float64) Backend {
		return Backend{Name: name, Status: StatusUp, HasMetrics: true, CPU: .5, Mem: .5, CPUCount: cores, MemBytes: mem, Factor: factor}
	}
	cases := []struct {
		name    string
		in      []Backend
		ratio   float64
		cpuUsed []float64 // per backend: the CPU count used when clamped, 0 when not
		memUsed []float64
	}{
		{"identical pool, one claims 200,000 cores",
			[]Backend{be("a", 4, 8*gib, 1), be("b", 4, 8*gib, 1), be("c", 4, 8*gib, 1), be("liar", 200_000, 8*gib, 1)}, 4,
			[]float64{0, 0, 0, 16}, []float64{0, 0, 0, 0}},
		{"two backends: the honest one is the reference",
			[]Backend{be("a", 4, 8*gib, 1), be("liar", 200_000, 8*gib, 1)}, 4,
			[]float64{0, 16}, []float64{0, 0}},
		{"two of five lying cannot move the reference",
			[]Backend{be("a", 4, 8*gib, 1), be("b", 4, 8*gib, 1), be("c", 4, 8*gib, 1), be("l1", 1e5, 8*gib, 1), be("l2", 1e6, 8*gib, 1)}, 4,
			[]float64{0, 0, 0, 16, 16}, []float64{0, 0, 0, 0, 0}},
		{"memory claim of a petabyte",
			[]Backend{be("a", 4, 8*gib, 1), be("b", 4, 8*gib, 1), be("liar", 4, 1<<50, 1)}, 4,
			[]float64{0, 0, 0}, []float64{0, 0, 32 * gib}},
		{"heterogeneous declared capacity, honest",
			[]Backend{be("s", 4, 8*gib, 1), be("m", 16, 32*gib, 4), be("l", 64, 128*gib, 16)}, 4,
			[]float64{0, 0, 0}, []float64{0, 0, 0}},
		{"big declared backend may report in proportion",
			[]Backend{be("a", 4, 8*gib, 1), be("b", 4, 8*gib, 1), be("big", 32, 64*gib, 8)}, 4,
			[]float64{0, 0, 0}, []float64{0, 0, 0}},
		{"big declared backend bounded in proportion",
			[]Backend{be("a", 4, 8*gib, 1), be("b", 4, 8*gib, 1), be("big", 1000, 64*gib, 8)}, 4,
			[]float64{0, 0, 128}, []float64{0, 0, 0}},
		{"undeclared heterogeneous within the ratio",
			[]Backend{be("a", 2, 2*gib, 0), be("b", 4, 4*gib, 0), be("c", 8, 8*gib, 0)}, 4,
			[]float64{0, 0, 0}, []float64{0, 0, 0}},
		{"under-claiming is not bounded",
			[]Backend{be("a", 4, 8*gib, 1), be("b", 4, 8*gib, 1), be("tiny", 0.01, 1<<20, 1)}, 4,
			[]float64{0, 0, 0}, []float64{0, 0, 0}},
		{"a wide ratio still bounds an absurd claim",
			[]Backend{be("a", 4, 8*gib, 1), be("b", 4, 8*gib, 1), be("liar", 200_000, 8*gib, 1)}, 1000,
			[]float64{0, 0, 4000}, []float64{0, 0, 0}},
		{"ratio 1 holds everyone to the reference",
			[]Backend{be("a", 4, 8*gib, 1), be("b", 5, 8*gib, 1), be("c", 6, 8*gib, 1)}, 1,
			[]float64{0, 0, 5}, []float64{0, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tun := DefaultTuning()
			tun.Learn.Enabled = false
			tun.MaxCapacityRatio = c.ratio
			// Memory counted too, so that a memory claim's bound shows in the weights (the
			// default counts the CPUs alone).
			tun.Capacity = Capacity{CPU: 0.7, Mem: 0.3}
			r := compute(c.in, tun)
			// What the pool would get had every clamped backend reported the bound itself.
			honest := append([]Backend(nil), c.in...)
			for i := range honest {
				if c.cpuUsed[i] > 0 {
					honest[i].CPUCount = c.cpuUsed[i]
				}
				if c.memUsed[i] > 0 {
					honest[i].MemBytes = c.memUsed[i]
				}
			}
			want := compute(honest, tun)
			for i, e := range r.Backends {
				if e.Clamp.CPUUsed != c.cpuUsed[i] || e.Clamp.MemUsed != c.memUsed[i] {
					t.Errorf("%s: clamp %+v, want cpu %v mem %v", e.Name, e.Clamp, c.cpuUsed[i], c.memUsed[i])
				}
				clamped := c.cpuUsed[i] > 0 || c.memUsed[i] > 0
				if clamped && (e.Note != notes[noteClamped] || (c.cpuUsed[i] > 0 && e.Clamp.CPUCount != c.in[i].CPUCount) ||
					(c.memUsed[i] > 0 && e.Clamp.MemBytes != c.in[i].MemBytes)) {
					t.Errorf("%s: explanation %+v does not say what was claimed and clamped", e.Name, e)
				}
				if e.Weight != want.Backends[i].Weight || math.Abs(e.C-want.Backends[i].C) > 1e-12 {
					t.Errorf("%s: weight %d C %v; reporting the bound gives %d C %v", e.Name, e.Weight, e.C, want.Backends[i].Weight, want.Backends[i].C)
				}
			}
		})
	}
}

// TestLiarShareBounded is the review's case: with the bound the liar of a four-server pool
// gets at most the share of a backend four times as big on CPU, not most of the 1,000 units.
func TestLiarShareBounded(t *testing.T) {
	in := []Backend{up("a", .5, 4), up("b", .5, 4), up("c", .5, 4), up("liar", .5, 200_000)}
	tun := DefaultTuning()
	tun.Learn.Enabled = false
	tun.MaxStep = 1
	r := compute(in, tun)
	// Bound 16 cores against 4 each (capacity by CPUs alone): liar : honest = 16 : 4.
	limit := 1000 * 16.0 / (16 + 3*4)
	if w := float64(r.Backends[3].Weight); w > limit+1 {
		t.Fatalf("liar got %v of 1000 units, want at most %.0f", w, limit)
	}
	tun.MaxCapacityRatio = math.Inf(1)                     // what the code did before the bound (Validate refuses this)
	if w := compute(in, tun).Backends[3].Weight; w < 900 { // nearly all: nothing holds it back
		t.Fatalf("unbounded, the liar got only %d: the test no longer shows the attack", w)
	}
}

// TestClampIgnoresNonLive: a down backend's claim is not part of the reference.
func TestClampIgnoresNonLive(t *testing.T) {
	in := []Backend{up("a", .5, 4), up("b", .5, 4), up("liar", .5, 200_000), up("down", .5, 1e9)}
	in[3].Status = StatusDown
	r := compute(in, DefaultTuning())
	if r.Backends[2].Clamp.CPUUsed != 16 || r.Backends[3].Clamp != (Clamp{}) {
		t.Fatalf("clamps %+v / %+v", r.Backends[2].Clamp, r.Backends[3].Clamp)
	}
}

func TestNth(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 2000 {
		n := 1 + rng.IntN(60)
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(rng.IntN(1 + iter%7)) // many ties
		}
		sorted := slices.Clone(v)
		slices.Sort(sorted)
		k := rng.IntN(n)
		if got := Nth(v, k); got != sorted[k] {
			t.Fatalf("Nth(%v, %d) = %v, want %v", sorted, k, got, sorted[k])
		}
	}
}

// BenchmarkCapacityBound10000 is the bound's cost on a pool whose claims spread past the
// ratio (so the median is taken), for one resource.
func BenchmarkCapacityBound10000(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	in := randomPool(rng, 10000)
	in[0].CPUCount = 1e6
	var r Result
	w := make([]work, len(in))
	for i := range w {
		w[i].live = in[i].Status.Live()
	}
	b.ReportAllocs()
	for b.Loop() {
		r.capacityBound(in, w, 4, cpuCount)
	}
}
