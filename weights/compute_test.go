package weights

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func up(name string, cpu, cores float64) Backend {
	return Backend{Name: name, Status: StatusUp, HasMetrics: true, CPU: cpu, CPUCount: cores, MemBytes: 1 << 30}
}

func compute(in []Backend, t Tuning) *Result {
	var r Result
	Compute(in, t, &r)
	return &r
}

func sumLive(r *Result) int {
	s := 0
	for _, e := range r.Backends {
		s += int(e.Weight)
	}
	return s
}

func cpuOnly() Tuning {
	t := DefaultTuning()
	t.Load = Load{CPU: 1}
	t.Capacity = Capacity{CPU: 1}
	t.Floor = 0
	return t
}

func TestComputeTable(t *testing.T) {
	def := DefaultTuning()
	cases := []struct {
		name string
		t    Tuning
		in   []Backend
		want []uint16
	}{
		{"equal load equal capacity", def, []Backend{up("a", .5, 2), up("b", .5, 2)}, []uint16{500, 500}},
		{"equal load, capacity 1:3 by cpu", cpuOnly(), []Backend{up("a", .5, 1), up("b", .5, 3)}, []uint16{250, 750}},
		{"load 1:3 equal capacity", cpuOnly(), []Backend{up("a", .2, 1), up("b", .6, 1)}, []uint16{750, 250}},
		{"down gets zero", def, []Backend{up("a", .5, 1), {Name: "b", Status: StatusDown}, up("c", .5, 1)}, []uint16{500, 0, 500}},
		{"stale, drained, unknown get zero", def, []Backend{up("a", .5, 1), {Name: "b", Status: StatusStale}, {Name: "c", Status: StatusDrained}, {Name: "d", Status: StatusUnknown}}, []uint16{1000, 0, 0, 0}},
		{"equal policy ignores load", func() Tuning { t := def; t.Policy = PolicyEqual; return t }(), []Backend{up("a", .9, 1), up("b", .1, 8), up("c", .5, 2)}, []uint16{334, 333, 333}},
		{"static policy ignores load", func() Tuning { t := cpuOnly(); t.Policy = PolicyStatic; return t }(), []Backend{up("a", .9, 1), up("b", .1, 3)}, []uint16{250, 750}},
		{"least_conn", func() Tuning { t := cpuOnly(); t.Policy = PolicyLeastConn; return t }(), []Backend{{Name: "a", Status: StatusUp, HasMetrics: true, Conns: 0, CPUCount: 1}, {Name: "b", Status: StatusUp, HasMetrics: true, Conns: 3, CPUCount: 1}}, []uint16{800, 200}},
		{"idle pool splits by capacity (min_load)", cpuOnly(), []Backend{up("a", 0, 1), up("b", 0, 4)}, []uint16{200, 800}},
		{"operator factor", cpuOnly(), []Backend{func() Backend { b := up("a", .5, 1); b.Factor = 3; return b }(), up("b", .5, 1)}, []uint16{750, 250}},
		{"floor keeps a saturated backend alive", func() Tuning { t := cpuOnly(); t.Floor = 0.05; return t }(), []Backend{up("a", 1, 1), up("b", 0, 100)}, []uint16{50, 950}},
		{"no metrics counts as pool mean", cpuOnly(), []Backend{up("a", .4, 1), {Name: "b", Status: StatusUp, CPUCount: 1}}, []uint16{500, 500}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := compute(c.in, c.t)
			got := r.Weights(nil)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("weights %v, want %v\n%+v", got, c.want, r.Backends)
			}
			if sumLive(r) != r.Total {
				t.Fatalf("sum %d != total %d", sumLive(r), r.Total)
			}
		})
	}
}

// randomPool makes a pool with varied health, load and capacity.
func randomPool(rng *rand.Rand, n int) []Backend {
	in := make([]Backend, n)
	for i := range in {
		st := StatusUp
		switch rng.IntN(8) {
		case 0:
			st = StatusDown
		case 1:
			st = StatusWarming
		case 2:
			st = StatusDrained
		}
		in[i] = Backend{Name: fmt.Sprint("b", i), Status: st, HasMetrics: rng.IntN(10) > 0,
			CPU: rng.Float64(), Mem: rng.Float64(), Conns: float64(rng.IntN(2000)), Net: rng.Float64(),
			CPUCount: float64(1 + rng.IntN(16)), MemBytes: float64(1+rng.IntN(64)) * (1 << 30),
			WarmupElapsed: time.Duration(rng.IntN(120)) * time.Second, Throughput: rng.Float64() * 100,
		}
		if rng.IntN(2) == 0 {
			in[i].PrevShare = rng.Float64() / float64(n)
		}
		if rng.IntN(3) == 0 { // a carried watched ramp, not always a sane one
			in[i].PrevWarmup = rng.Float64()*1.2 - 0.1
			in[i].PrevWarmupElapsed = time.Duration(rng.IntN(240)-10) * time.Second
			in[i].Slow = rng.IntN(4) == 0
			in[i].HasPressure, in[i].CPUPressure = rng.IntN(2) == 0, rng.Float64()
		}
		if rng.IntN(2) == 0 {
			in[i].PrevWeight = uint16(rng.IntN(1000))
		}
	}
	return in
}

func TestPropertySumAndNoStarvation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		tun := DefaultTuning()
		tun.Policy = []PolicyName{PolicyDynamic, PolicyStatic, PolicyEqual, PolicyLeastConn}[rng.IntN(4)]
		tun.Total = 1 + rng.IntN(65535)
		in := randomPool(rng, 1+rng.IntN(40))
		r := compute(in, tun)
		live := 0
		for i, e := range r.Backends {
			if in[i].Status.Live() {
				live++
				if e.Weight == 0 && r.Total >= len(in) {
					t.Fatalf("iter %d: live backend %s got weight 0 (total %d)", iter, e.Name, r.Total)
				}
			} else if !r.Panic && e.Weight != 0 {
				t.Fatalf("iter %d: %s in status %s got weight %d", iter, e.Name, e.Status, e.Weight)
			}
		}
		if got := sumLive(r); got != r.Total {
			t.Fatalf("iter %d: weights sum to %d, want total %d (live %d, panic %v)", iter, got, r.Total, live, r.Panic)
		}
		for _, e := range r.Backends {
			if e.WarmupTimer > 0 && !(e.Warmup <= e.WarmupTimer && e.Warmup >= min(watchFloor, e.WarmupTimer)) {
				t.Fatalf("iter %d: %s ramp %v outside [%v, timer %v]", iter, e.Name, e.Warmup, min(watchFloor, e.WarmupTimer), e.WarmupTimer)
			}
		}
	}
}

func TestPropertyMoreLoadNeverMoreWeight(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 2000; iter++ {
		tun := DefaultTuning()
		tun.MaxStep = 1 // the step limit is studied separately (see docs/weights.md)
		// Without a ramp: a warming backend's weight is spread over the others in proportion
		// to theirs, and its watched ramp compares it with the pool's CPU, this backend's
		// included, so with a backend warming more load can move this one's weight by a unit
		// (a backend held at the floor went 14 -> 15 while its share fell from 0.0097 to
		// 0.0080). Warm-up is tested on its own (TestWarmup).
		tun.Warmup = 0
		in := randomPool(rng, 2+rng.IntN(20))
		for i := range in {
			in[i].HasMetrics = true
		}
		j := rng.IntN(len(in))
		if !in[j].Status.Live() {
			continue
		}
		in[j].CPU = rng.Float64() * 0.9
		before := compute(in, tun).Backends[j].Weight
		in[j].CPU += rng.Float64() * (1 - in[j].CPU)
		in[j].Conns += float64(rng.IntN(100))
		after := compute(in, tun).Backends[j].Weight
		if after > before {
			t.Fatalf("iter %d: more load raised %s's weight %d -> %d", iter, in[j].Name, before, after)
		}
	}
}

func TestEqualUtilisationGivesCapacityShares(t *testing.T) {
	tun := DefaultTuning()
	tun.Floor = 0
	tun.Learn.Enabled = false
	in := []Backend{up("a", .5, 2), up("b", .5, 4), up("c", .5, 8)}
	in[0].MemBytes, in[1].MemBytes, in[2].MemBytes = 2<<30, 4<<30, 8<<30
	r := compute(in, tun)
	w := r.Weights(nil)
	for i, want := range []float64{1000.0 / 7, 2000.0 / 7, 4000.0 / 7} {
		if math.Abs(float64(w[i])-want) > 1 {
			t.Fatalf("weights %v, want proportional to capacity 1:2:4", w)
		}
	}
}

// pool simulates backends whose true speeds differ; the load each one sees follows the
// weights it was given, the way the switch splits new connections.
type pool struct {
	speed  []float64
	lambda float64
}

func (p pool) observe(r *Result, in []Backend) {
	for i := range in {
		share := float64(r.Backends[i].Weight) / float64(r.Total)
		tput := p.lambda * share
		util := tput / p.speed[i]
		if util > 1 {
			util, tput = 1, p.speed[i]
		}
		in[i].CPU = util
		in[i].Throughput = tput
		in[i].Learned = r.Backends[i].Learned
		in[i].PrevShare = r.Backends[i].Full
		in[i].PrevWeight = r.Backends[i].Weight
	}
}

func TestLearnedCapacityConvergesToTrueShares(t *testing.T) {
	for _, c := range []struct {
		name     string
		declared []float64
	}{
		{"declared equal, true 1:2:4", []float64{1, 1, 1}},
		{"declared inverted, true 1:2:4", []float64{4, 2, 1}},
		{"declared right", []float64{1, 2, 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tun := cpuOnly()
			p := pool{speed: []float64{1, 2, 4}, lambda: 0.7 * 7}
			in := make([]Backend, 3)
			for i := range in {
				in[i] = up(fmt.Sprint("b", i), 0.5, c.declared[i])
			}
			var r Result
			for step := 0; step < 200; step++ {
				Compute(in, tun, &r)
				p.observe(&r, in)
			}
			for i, want := range []float64{1.0 / 7, 2.0 / 7, 4.0 / 7} {
				got := float64(r.Backends[i].Weight) / float64(r.Total)
				if math.Abs(got-want) > 0.02 {
					t.Fatalf("backend %d share %.3f, want %.3f (%+v)", i, got, want, r.Backends)
				}
			}
		})
	}
}

func TestWithoutLearningWrongCapacityMisses(t *testing.T) {
	// The counterpart of the convergence test: it shows the learning is what finds the true
	// shares (docs/design.md: plain 1/AL converges to shares ∝ √(C·speed)).
	tun := cpuOnly()
	tun.Learn.Enabled = false
	p := pool{speed: []float64{1, 2, 4}, lambda: 0.7 * 7}
	in := []Backend{up("a", .5, 1), up("b", .5, 1), up("c", .5, 1)}
	var r Result
	for step := 0; step < 200; step++ {
		Compute(in, tun, &r)
		p.observe(&r, in)
	}
	got := float64(r.Backends[2].Weight) / float64(r.Total)
	want := 2.0 / (1 + math.Sqrt2 + 2) // √4 / (√1+√2+√4)
	if math.Abs(got-want) > 0.02 {
		t.Fatalf("fastest backend share %.3f, want √-rule %.3f", got, want)
	}
}

func TestWarmup(t *testing.T) {
	tun := DefaultTuning()
	tun.WarmupMode = WarmupTimer // the watched ramp: warmwatch_test.go
	tun.Warmup = 60 * time.Second
	tun.WarmupStart = 0.5
	in := []Backend{up("a", .5, 2), up("b", .5, 2), up("c", .5, 2)}
	full := compute(in, tun).Backends[2].Weight
	for _, c := range []struct {
		elapsed time.Duration
		frac    float64
	}{{0, 0.5}, {15 * time.Second, 0.625}, {30 * time.Second, 0.75}, {59 * time.Second, 0.5 + 0.5*59.0/60}, {60 * time.Second, 1}, {10 * time.Minute, 1}} {
		in[2].Status, in[2].WarmupElapsed = StatusWarming, c.elapsed
		r := compute(in, tun)
		got := r.Backends[2].Weight
		want := c.frac * float64(full)
		if math.Abs(float64(got)-want) > 1 {
			t.Fatalf("warming %v: weight %d, want %.1f (full %d)", c.elapsed, got, want, full)
		}
		if sumLive(r) != r.Total {
			t.Fatalf("warming %v: sum %d", c.elapsed, sumLive(r))
		}
		if c.elapsed >= tun.Warmup && got != full {
			t.Fatalf("at %v weight %d, want exactly full %d", c.elapsed, got, full)
		}
	}
	t.Run("all warming keeps shares", func(t *testing.T) {
		all := []Backend{up("a", .5, 1), up("b", .5, 3)}
		for i := range all {
			all[i].Status = StatusWarming
		}
		r := compute(all, tun)
		if w := r.Weights(nil); w[0]+w[1] != 1000 || w[1] <= w[0] {
			t.Fatalf("weights %v", w)
		}
	})
}

func TestDeadBand(t *testing.T) {
	tun := DefaultTuning()
	tun.DeadBand = 0.02 // 20 of 1000
	next := &Result{Total: 1000, Backends: []Explanation{{Weight: 500}, {Weight: 500}}}
	for _, c := range []struct {
		prev []uint16
		want bool
	}{
		{[]uint16{500, 500}, false},
		{[]uint16{480, 520}, false}, // exactly at the threshold: not above it
		{[]uint16{479, 521}, true},
		{[]uint16{0, 1000}, true}, // a backend joins
		{[]uint16{500}, true},     // membership differs
	} {
		if got := Worth(c.prev, next, tun); got != c.want {
			t.Errorf("Worth(%v) = %v, want %v", c.prev, got, c.want)
		}
	}
	for _, p := range []PolicyName{PolicyStatic, PolicyEqual} {
		exact := tun
		exact.Policy = p
		if !Worth([]uint16{499, 501}, next, exact) {
			t.Errorf("policy %s: a 1-unit step toward its exact target was held back by the dead-band", p)
		}
		if Worth([]uint16{500, 500}, next, exact) {
			t.Errorf("policy %s: no change was worth a rewrite", p)
		}
	}
	leave := &Result{Total: 1000, Backends: []Explanation{{Weight: 1000}, {Weight: 0}}}
	if !Worth([]uint16{999, 1}, leave, tun) {
		t.Error("a backend losing all weight must be worth a rewrite even below the dead-band")
	}
}

func TestStepLimit(t *testing.T) {
	tun := cpuOnly()
	tun.MaxStep = 0.1
	tun.Gain = 1
	in := []Backend{up("a", .9, 1), up("b", .1, 1)}
	in[0].PrevShare, in[1].PrevShare = 0.5, 0.5
	r := compute(in, tun)
	if !r.Stepped {
		t.Fatal("step limit did not engage")
	}
	if d := math.Abs(r.Backends[0].Full - 0.5); math.Abs(d-0.1) > 1e-9 {
		t.Fatalf("share moved by %.4f, want exactly max_step 0.1", d)
	}
	// An eviction is never delayed by the step limit.
	in[1].Status = StatusDown
	r = compute(in, tun)
	if r.Backends[1].Weight != 0 || r.Backends[0].Weight != 1000 {
		t.Fatalf("eviction delayed: %v", r.Weights(nil))
	}
}

func TestDampingSettlesInsteadOfAlternating(t *testing.T) {
	// With gain 1 the 1/AL feedback alternates between two vectors; the default gain settles.
	p := pool{speed: []float64{1, 2, 4}, lambda: 0.6 * 7}
	run := func(gain float64) (last, prev float64) {
		tun := cpuOnly()
		tun.Gain, tun.MaxStep, tun.Learn.Enabled = gain, 1, false
		in := []Backend{up("a", .9, 1), up("b", .5, 2), up("c", .1, 4)} // start away from the fixed point
		var r Result
		for step := 0; step < 40; step++ {
			prev = float64(r.Total)
			if len(r.Backends) > 0 {
				prev = r.Backends[2].Full
			}
			Compute(in, tun, &r)
			p.observe(&r, in)
		}
		return r.Backends[2].Full, prev
	}
	if last, prev := run(0.5); math.Abs(last-prev) > 0.01 || math.Abs(last-4.0/7) > 0.02 {
		t.Fatalf("gain 0.5: share %.3f then %.3f, want settled at %.3f", prev, last, 4.0/7)
	}
	if last, prev := run(1); math.Abs(last-prev) < 0.05 {
		t.Fatalf("gain 1: expected alternation, got %.3f then %.3f", prev, last)
	}
}

func TestPanic(t *testing.T) {
	for _, c := range []struct {
		name string
		mode PanicMode
		in   []Backend
		want []uint16
	}{
		{"last_good", PanicLastGood, []Backend{{Name: "a", Status: StatusDown, PrevWeight: 700}, {Name: "b", Status: StatusDown}, {Name: "c", Status: StatusStale, PrevWeight: 300}}, []uint16{500, 0, 500}},
		{"last_good without history falls back to all", PanicLastGood, []Backend{{Name: "a", Status: StatusDown}, {Name: "b", Status: StatusUnknown}, {Name: "c", Status: StatusDrained}}, []uint16{500, 500, 0}},
		{"all", PanicAll, []Backend{{Name: "a", Status: StatusDown, PrevWeight: 700}, {Name: "b", Status: StatusDown}, {Name: "c", Status: StatusStale}}, []uint16{334, 333, 333}},
		{"all drained", PanicAll, []Backend{{Name: "a", Status: StatusDrained}, {Name: "b", Status: StatusDrained}}, []uint16{500, 500}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tun := DefaultTuning()
			tun.Panic = c.mode
			r := compute(c.in, tun)
			if !r.Panic || fmt.Sprint(r.Weights(nil)) != fmt.Sprint(c.want) {
				t.Fatalf("panic=%v weights %v, want %v", r.Panic, r.Weights(nil), c.want)
			}
		})
	}
	// Property: never all-zero while any backend is configured.
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 1000; iter++ {
		in := randomPool(rng, 1+rng.IntN(10))
		for i := range in {
			if rng.IntN(2) == 0 {
				in[i].Status = Status(3 + rng.IntN(3))
			}
		}
		if sumLive(compute(in, DefaultTuning())) == 0 {
			t.Fatalf("iter %d: all-zero weights for %+v", iter, in)
		}
	}
}

func TestComputeDoesNotAllocateWhenReused(t *testing.T) {
	in := randomPool(rand.New(rand.NewPCG(7, 8)), 1000)
	tun := DefaultTuning()
	tun.Total = 65535
	var r Result
	Compute(in, tun, &r)
	if a := testing.AllocsPerRun(20, func() { Compute(in, tun, &r) }); a != 0 {
		t.Fatalf("Compute allocated %.1f times per call with a reused Result", a)
	}
}

func TestEWMA(t *testing.T) {
	e := NewEWMA(0.5)
	if _, ok := e.Value(); ok {
		t.Fatal("new EWMA has a value")
	}
	for _, c := range []struct{ in, want float64 }{{4, 4}, {0, 2}, {math.NaN(), 2}, {2, 2}, {math.Inf(1), 2}, {6, 4}} {
		if got := e.Add(c.in); got != c.want {
			t.Fatalf("Add(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	e.Reset()
	if v := e.Add(9); v != 9 {
		t.Fatalf("after Reset the first sample should initialise, got %v", v)
	}
	if a := AlphaForHalfLife(10*time.Second, 10*time.Second); math.Abs(a-0.5) > 1e-12 {
		t.Fatalf("one sample per half-life: alpha %v, want 0.5", a)
	}
}

func TestTuningValidate(t *testing.T) {
	if errs := DefaultTuning().Validate(); len(errs) != 0 {
		t.Fatalf("defaults invalid: %v", errs)
	}
	for _, c := range []struct {
		key string
		mod func(*Tuning)
	}{
		{"load", func(t *Tuning) { t.Load.CPU = 0.5 }},
		{"capacity", func(t *Tuning) { t.Capacity.Mem = 0.5 }},
		{"load.net", func(t *Tuning) { t.Load.Net = -0.1; t.Load.CPU = 0.7 }},
		{"alpha", func(t *Tuning) { t.Alpha = 0 }},
		{"alpha", func(t *Tuning) { t.Alpha = 1.5 }},
		{"gain", func(t *Tuning) { t.Gain = 2 }},
		{"total", func(t *Tuning) { t.Total = 70000 }},
		{"floor", func(t *Tuning) { t.Floor = 1 }},
		{"warmup_start", func(t *Tuning) { t.WarmupStart = 0 }},
		{"warmup", func(t *Tuning) { t.Warmup = -time.Second }},
		{"policy", func(t *Tuning) { t.Policy = "fastest" }},
		{"panic", func(t *Tuning) { t.Panic = "drop" }},
		{"learn.rate", func(t *Tuning) { t.Learn.Rate = 0 }},
		{"max_conns", func(t *Tuning) { t.MaxConns = 0 }},
		{"dead_band", func(t *Tuning) { t.DeadBand = 1 }},
		{"max_capacity_ratio", func(t *Tuning) { t.MaxCapacityRatio = 0.5 }},
		{"max_capacity_ratio", func(t *Tuning) { t.MaxCapacityRatio = math.NaN() }},
		{"max_capacity_ratio", func(t *Tuning) { t.MaxCapacityRatio = 1e6 }},
		{"in_flight_reference", func(t *Tuning) { t.InFlightReference = "Own" }},
		{"in_flight_reference", func(t *Tuning) { t.InFlightReference = "" }},
	} {
		tun := DefaultTuning()
		c.mod(&tun)
		errs := tun.Validate()
		if len(errs) == 0 {
			t.Errorf("%s: no error", c.key)
			continue
		}
		if got := errs[0].Error(); len(got) < len(c.key) || got[:len(c.key)+1] != c.key+":" {
			t.Errorf("error %q does not name key %q", got, c.key)
		}
	}
}

func benchCompute(b *testing.B, n int) {
	in := randomPool(rand.New(rand.NewPCG(9, 10)), n)
	tun := DefaultTuning()
	tun.Total = 65535
	var r Result
	Compute(in, tun, &r)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Compute(in, tun, &r)
	}
}

func BenchmarkCompute1000(b *testing.B)  { benchCompute(b, 1000) }
func BenchmarkCompute10000(b *testing.B) { benchCompute(b, 10000) }

func FuzzCompute(f *testing.F) {
	f.Add(uint64(1), uint8(3), 0.5, 0.2, uint16(1000))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, cpu, mem float64, total uint16) {
		rng := rand.New(rand.NewPCG(seed, 1))
		in := randomPool(rng, int(n))
		if n > 0 {
			in[0].CPU, in[0].Mem = cpu, mem
		}
		tun := DefaultTuning()
		tun.Total = max(1, int(total))
		r := compute(in, tun)
		if n > 0 && sumLive(r) != r.Total {
			t.Fatalf("sum %d != total %d", sumLive(r), r.Total)
		}
	})
}

// Under headroom, a move inside the dead-band is a rewrite when it changes a backend's spare
// CPU by more than half of what it has, and not otherwise.
func TestDeadBandSpareCapacity(t *testing.T) {
	tun := DefaultTuning() // headroom
	tun.DeadBand = 0.02    // 20 of 1000: the 12-unit moves below are inside it
	be := func(w uint16, own, avail float64) Explanation {
		return Explanation{Weight: w, Own: own, Avail: avail}
	}
	for _, c := range []struct {
		name string
		next []Explanation
		prev []uint16
		fall int
		want bool
	}{
		{"saturated backend relieved by 12 units", []Explanation{be(581, 0.988, 1), be(419, 0.9, 1)}, []uint16{593, 407}, 0, true},
		{"the same move on backends with room", []Explanation{be(581, 0.6, 1), be(419, 0.5, 1)}, []uint16{593, 407}, 0, false},
		{"room left by a neighbour's share counts as taken", []Explanation{be(581, 0.5, 0.52), be(419, 0.5, 1)}, []uint16{593, 407}, 0, true},
		{"one unit on a saturated backend", []Explanation{be(592, 1, 1), be(408, 0.5, 1)}, []uint16{593, 407}, 0, false},
		{"ran as 1/AL: the dead-band alone", []Explanation{be(581, 0.988, 1), be(419, 0.9, 1)}, []uint16{593, 407}, 2, false},
	} {
		next := &Result{Total: 1000, Backends: c.next, Fallback: c.fall}
		if got := Worth(c.prev, next, tun); got != c.want {
			t.Errorf("%s: Worth = %v, want %v", c.name, got, c.want)
		}
	}
	dyn := tun
	dyn.Policy = PolicyDynamic
	next := &Result{Total: 1000, Backends: []Explanation{be(581, 0.988, 1), be(419, 0.9, 1)}}
	if Worth([]uint16{593, 407}, next, dyn) {
		t.Error("1/AL rewrote inside the dead-band")
	}
}
