package sim

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/weights"
)

func TestSameSeedSameResult(t *testing.T) {
	for _, p := range Policies {
		t.Run(string(p), func(t *testing.T) {
			cfg := Config{Backends: Pool(ScenarioEqual), Load: 0.8, Jobs: 50_000, Warmup: time.Minute, Seed: 7, Policy: p, Trace: true}
			a, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("two runs with seed 7 differ:\n%+v\n%+v", a, b)
			}
			cfg.Seed = 8
			c, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.Mean == a.Mean {
				t.Fatalf("seeds 7 and 8 gave the same mean %v: the seed is not used", a.Mean)
			}
		})
	}
}

// TestQueueingMaths checks single-backend runs against closed forms. Mean size 0.1 on speed 1
// is a service rate μ = 10/s per unit of speed.
func TestQueueingMaths(t *testing.T) {
	cases := []struct {
		name     string
		b        Backend
		size     SizeKind
		rho      float64
		wantMean float64
		wantP99  float64 // 0: no closed form checked
	}{
		// M/M/1: response time is exponential with rate μ−λ.
		{"M/M/1 rho 0.5", Backend{Speed: 1, Declared: 1}, SizeExp, 0.5, 1 / (10.0 - 5), math.Log(100) / (10.0 - 5)},
		{"M/M/1 rho 0.8", Backend{Speed: 1, Declared: 1}, SizeExp, 0.8, 1 / (10.0 - 8), math.Log(100) / (10.0 - 8)},
		// M/M/2, each server μ = 10, λ = 10: Erlang C = 1/3, W = C/(2μ−λ) + 1/μ.
		{"M/M/2 rho 0.5", Backend{Speed: 2, Declared: 2, Servers: 2}, SizeExp, 0.5, 1.0/3/(20-10) + 0.1, 0},
		// M/D/1 (Pollaczek–Khinchine): W = 1/μ + ρ/(2μ(1−ρ)).
		{"M/D/1 rho 0.5", Backend{Speed: 1, Declared: 1}, SizeFixed, 0.5, 0.1 + 0.5/(2*10*0.5), 0},
		// M/H2/1 with SCV 4: W = 1/μ + λ·E[S²]/(2(1−ρ)), E[S²] = (1+4)·0.1².
		{"M/H2/1 rho 0.5", Backend{Speed: 1, Declared: 1}, SizeH2, 0.5, 0.1 + 5*0.05/(2*0.5), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Run(Config{Backends: []Backend{c.b}, Load: c.rho, Size: c.size, Jobs: 1_000_000, Seed: 3, Policy: RoundRobin})
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(r.Mean-c.wantMean) / c.wantMean; d > 0.04 {
				t.Errorf("mean response %.4fs, want %.4fs (off by %.1f%%)", r.Mean, c.wantMean, 100*d)
			}
			if c.wantP99 > 0 {
				if d := math.Abs(r.P99-c.wantP99) / c.wantP99; d > 0.05 {
					t.Errorf("p99 %.4fs, want %.4fs (off by %.1f%%)", r.P99, c.wantP99, 100*d)
				}
			}
			if math.Abs(r.Util[0]-c.rho) > 0.01 {
				t.Errorf("utilisation %.4f, want %.2f", r.Util[0], c.rho)
			}
			lambda := c.rho * c.b.Speed / 0.1
			if d := math.Abs(r.Throughput-lambda) / lambda; d > 0.01 {
				t.Errorf("throughput %.3f jobs/s, want %.3f", r.Throughput, lambda)
			}
		})
	}
}

func TestPolicyOrderScenarioB(t *testing.T) {
	run := func(p Policy) Result {
		r, err := Run(Config{Backends: Pool(ScenarioEqual), Load: 0.8, Jobs: 300_000, Seed: 11, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	oracle, rr, static, dyn := run(Oracle), run(RoundRobin), run(Static), run(Dynamic)
	if !(oracle.P99 < rr.P99) {
		t.Errorf("oracle p99 %.3fs does not beat round robin's %.3fs", oracle.P99, rr.P99)
	}
	if !(dyn.P99 < static.P99) {
		t.Errorf("dynamic p99 %.3fs does not beat static capacity weights' %.3fs", dyn.P99, static.P99)
	}
	// The dynamic weights learn the true speeds 1:2:4 although all three are declared equal.
	want := []float64{1.0 / 7, 2.0 / 7, 4.0 / 7}
	for i, s := range dyn.FinalShares {
		if math.Abs(s-want[i]) > 0.03 {
			t.Errorf("dynamic final share of %s = %.3f, want %.3f ± 0.03", Pool(ScenarioEqual)[i].Name, s, want[i])
		}
	}
	for i, s := range dyn.MeanShares {
		if math.Abs(s-want[i]) > 0.01 {
			t.Errorf("dynamic mean share of %s = %.3f, want %.3f ± 0.01", Pool(ScenarioEqual)[i].Name, s, want[i])
		}
	}
	if dyn.Rewrites == 0 || dyn.Rewrites > dyn.Updates {
		t.Errorf("dynamic rewrote %d times in %d updates", dyn.Rewrites, dyn.Updates)
	}
}

// TestLeastConnUsesQueueLengths: with equal speeds least connections gives each backend the
// same utilisation and a shorter mean than random (static) dispatch, which only balances on
// average.
func TestLeastConnUsesQueueLengths(t *testing.T) {
	pool := []Backend{{Speed: 1, Declared: 1}, {Speed: 1, Declared: 1}}
	lc, err := Run(Config{Backends: pool, Load: 0.8, Jobs: 200_000, Seed: 5, Policy: LeastConn})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(Config{Backends: pool, Load: 0.8, Jobs: 200_000, Seed: 5, Policy: Static})
	if err != nil {
		t.Fatal(err)
	}
	// Random splitting of Poisson arrivals gives two M/M/1 queues at 0.8: mean 0.5 s.
	if !(lc.Mean < 0.8*st.Mean) {
		t.Errorf("least connections mean %.3fs is not clearly below random dispatch's %.3fs", lc.Mean, st.Mean)
	}
}

func TestDeadBandLimitsRewrites(t *testing.T) {
	tu := weights.DefaultTuning()
	tu.DeadBand = 0.99 // nothing short of a backend gaining or losing all weight is worth it
	r, err := Run(Config{Backends: Pool(ScenarioEqual), Load: 0.5, Jobs: 100_000, Seed: 1, Policy: Dynamic, Tuning: tu})
	if err != nil {
		t.Fatal(err)
	}
	if r.RewritesTotal != 1 {
		t.Errorf("rewrites = %d with dead_band 0.99, want only the first write", r.RewritesTotal)
	}
	// With the first weights (capacity declared equal) kept, the split stays equal.
	for i, s := range r.FinalShares {
		if math.Abs(s-1.0/3) > 0.002 {
			t.Errorf("share %d = %.4f, want 1/3", i, s)
		}
	}
}

func TestFinishAcrossSpeedSteps(t *testing.T) {
	b := Backend{Speed: 2, Declared: 1}
	steps := []Step{{At: 10 * time.Second, Backend: 0, Factor: 0.5}, {At: 20 * time.Second, Backend: 0, Factor: 4},
		{At: 5 * time.Second, Backend: 1, Factor: 9}} // another backend's step does not apply
	cases := []struct {
		start, size, want float64
	}{
		{0, 2, 1},       // speed 2 throughout
		{9, 4, 12},      // 1 s at speed 2 (2 units), then 2 units at speed 1
		{9, 20, 22},     // 2 units by 10, 10 units by 20, then 8 units at speed 4
		{25, 8, 27},     // after both steps
		{10, 1, 11},     // starts exactly at a step
		{19.5, 0.5, 20}, // ends exactly at a step
	}
	st := newStation(b, steps, 0, 5)
	for _, c := range cases {
		if got := st.finish(c.start, c.size); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("finish(start %v, size %v) = %v, want %v", c.start, c.size, got, c.want)
		}
	}
	for _, c := range []struct{ t, want float64 }{{0, 2}, {9.99, 2}, {10, 1}, {15, 1}, {20, 4}, {100, 4}} {
		if got := st.speedAt(c.t); got != c.want {
			t.Errorf("speedAt(%v) = %v, want %v", c.t, got, c.want)
		}
	}
	// Two servers: each runs at half the speed.
	st2 := newStation(Backend{Speed: 2, Declared: 2, Servers: 2}, nil, 0, 5)
	if got := st2.finish(0, 1); got != 1 {
		t.Errorf("two servers of speed 1: finish = %v, want 1", got)
	}
}

func TestBusyTimeAndQueueLength(t *testing.T) {
	st := newStation(Backend{Speed: 1, Declared: 1}, nil, 0, 5)
	// Queue lengths are read as the simulation does: never before a job already served arrives.
	inSys := func(at float64, want int) {
		t.Helper()
		if got := st.inSystem(at); got != want {
			t.Errorf("inSystem(%v) = %d, want %d", at, got, want)
		}
	}
	f1 := st.serve(1, 2) // busy 1..3
	f2 := st.serve(2, 4) // queued, busy 3..7
	inSys(2.5, 2)
	inSys(3, 1)
	inSys(8, 0)
	f3 := st.serve(9, 2) // busy 9..11
	inSys(10, 1)
	inSys(11, 0)
	if f1 != 3 || f2 != 7 || f3 != 11 {
		t.Fatalf("finish times %v %v %v, want 3 7 11", f1, f2, f3)
	}
	for _, c := range []struct {
		bin  int
		want float64
	}{{0, 4.0 / 5}, {1, 3.0 / 5}, {2, 1.0 / 5}, {3, 0}} {
		if got := st.util(c.bin); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("util(bin %d) = %v, want %v", c.bin, got, c.want)
		}
	}
	if got := st.workIn(0, 1); got != 2 {
		t.Errorf("work completed in [0,5) = %v, want 2", got)
	}
	if got := st.workIn(1, 3); got != 6 {
		t.Errorf("work completed in [5,15) = %v, want 6", got)
	}
}

// TestOVSSlots: the simulator's slot table is the controller's 256-slot layout through the
// exact Open vSwitch model (internal/slots), not the 16-slot steps of raw weights.
func TestOVSSlots(t *testing.T) {
	cases := []struct {
		name string
		w    []uint16
		want []int
	}{
		{"equal thirds: 86/85/85 of 256 (raw weights would give 6/5/5 of 16)", []uint16{334, 333, 333}, []int{86, 85, 85}},
		{"25:50:100", []uint16{25, 50, 100}, []int{37, 73, 146}},
		{"a zero bucket gets no slot", []uint16{0, 500, 500}, []int{0, 128, 128}},
		{"a share below one slot gets one", []uint16{1, 999}, []int{1, 255}},
		{"nothing live", []uint16{0, 0}, []int{0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ovsSlots(c.w); !reflect.DeepEqual(got, c.want) {
				t.Errorf("ovsSlots(%v) = %v, want %v", c.w, got, c.want)
			}
		})
	}
}

func FuzzOVSSlots(f *testing.F) {
	f.Add(uint16(334), uint16(333), uint16(333))
	f.Add(uint16(0), uint16(1), uint16(65535))
	f.Fuzz(func(t *testing.T, a, b, c uint16) {
		w := []uint16{a, b, c}
		s := ovsSlots(w)
		sum, pos := 0, 0
		for i, x := range s {
			sum += x
			if w[i] > 0 {
				pos++
				if x < 1 {
					t.Fatalf("ovsSlots(%v) = %v: bucket %d has weight but no slot", w, s, i)
				}
			} else if x != 0 {
				t.Fatalf("ovsSlots(%v) = %v: bucket %d has no weight but slots", w, s, i)
			}
		}
		if pos > 1 && sum != 256 {
			t.Fatalf("ovsSlots(%v) = %v: %d slots, want 256", w, s, sum)
		}
	})
}

// TestOVSSlotsDispatch: with the slot model on, equal weights give the slot split (86/85/85).
func TestOVSSlotsDispatch(t *testing.T) {
	pool := []Backend{{Speed: 1, Declared: 1}, {Speed: 1, Declared: 1}, {Speed: 1, Declared: 1}}
	r, err := Run(Config{Backends: pool, Load: 0.5, Jobs: 300_000, Seed: 2, Policy: WeightsEqual, OVSSlots: true})
	if err != nil {
		t.Fatal(err)
	}
	// Utilisation is proportional to the share of jobs: 86/256, 85/256, 85/256 of 1.5 units.
	want := []float64{1.5 * 86 / 256, 1.5 * 85 / 256, 1.5 * 85 / 256}
	for i, u := range r.Util {
		if math.Abs(u-want[i]) > 0.01 {
			t.Errorf("utilisation of backend %d = %.3f, want %.3f", i, u, want[i])
		}
	}
}

func TestSettle(t *testing.T) {
	mk := func(ts []float64, s [][]float64) []Point {
		var p []Point
		for i := range ts {
			p = append(p, Point{T: ts[i], Shares: s[i]})
		}
		return p
	}
	trace := mk([]float64{0, 10, 20, 30, 40, 50, 60, 70, 80},
		[][]float64{{.5, .5}, {.5, .5}, {.3, .7}, {.43, .57}, {.4, .6}, {.41, .59}, {.4, .6}, {.4, .6}, {.4, .6}})
	s := Settle(trace, 10*time.Second, 0.05, true)
	if !s.Settled || s.After != 30*time.Second {
		t.Errorf("settled %v after %v, want true after 30s (the update at 40 s)", s.Settled, s.After)
	}
	if s.RewritesToSettle != 3 || s.RewritesAfter != 5 {
		t.Errorf("rewrites to settle %d, after %d; want 3 and 5", s.RewritesToSettle, s.RewritesAfter)
	}
	abs := Settle(trace, 10*time.Second, 0.05, false)
	if !abs.Settled || abs.After != 20*time.Second {
		t.Errorf("±5 points: settled %v after %v, want true after 20s", abs.Settled, abs.After)
	}
	// Within tolerance only from the last quarter on (after 62.5 s) is not settled.
	late := mk([]float64{0, 10, 20, 30, 40, 50, 60, 70, 80},
		[][]float64{{.5, .5}, {.5, .5}, {.3, .7}, {.5, .5}, {.3, .7}, {.5, .5}, {.3, .7}, {.4, .6}, {.4, .6}})
	if s := Settle(late, 10*time.Second, 0.05, true); s.Settled {
		t.Errorf("a trace within tolerance only in its last quarter settled after %v", s.After)
	}
	// A trace that still jumps at the end has not settled.
	jump := mk([]float64{0, 10, 20, 30, 40}, [][]float64{{.5, .5}, {.3, .7}, {.5, .5}, {.3, .7}, {.5, .5}})
	if s := Settle(jump, 0, 0.05, true); s.Settled {
		t.Errorf("an alternating trace settled after %v", s.After)
	}
}

func TestValidate(t *testing.T) {
	good := Config{Backends: Pool(ScenarioRight), Load: 0.5, Jobs: 10, Policy: Dynamic}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no backends", func(c *Config) { c.Backends = nil }, "backends: none"},
		{"zero speed", func(c *Config) { c.Backends[0].Speed = 0 }, `backends[0] "slow": speed 0`},
		{"zero declared", func(c *Config) { c.Backends[1].Declared = 0 }, `backends[1] "mid": declared capacity 0`},
		{"load", func(c *Config) { c.Load = math.NaN() }, "load: NaN"},
		{"jobs", func(c *Config) { c.Jobs = 0 }, "jobs: 0"},
		{"policy", func(c *Config) { c.Policy = "fastest" }, `policy: "fastest"`},
		{"update not a multiple", func(c *Config) { c.Update = 7 * time.Second }, "update: 7s"},
		{"size", func(c *Config) { c.Size = "pareto" }, `size: "pareto"`},
		{"tuning", func(c *Config) { c.Tuning = weights.DefaultTuning(); c.Tuning.Alpha = 0 }, "tuning: alpha"},
		{"step backend", func(c *Config) { c.Steps = []Step{{Backend: 3, Factor: 1}} }, "steps[0]: backend 3"},
		{"step factor", func(c *Config) { c.Steps = []Step{{Backend: 0}} }, "steps[0]: factor 0"},
		{"health timeout", func(c *Config) { c.Health = LabHealth(0, true) }, "health: interval 100ms and timeout 0s"},
		{"health fails", func(c *Config) { c.Health = LabHealth(time.Second, true); c.Health.Fails = 0 }, "fails 0"},
		{"health without weights", func(c *Config) { c.Policy = LeastConn; c.Health = LabHealth(time.Second, false) }, "health: needs a weights policy"},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			cfg.Backends = Pool(ScenarioRight)
			c.mod(&cfg)
			_, err := Run(cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func BenchmarkRunDynamic(b *testing.B) {
	for b.Loop() {
		if _, err := Run(Config{Backends: Pool(ScenarioEqual), Load: 0.8, Jobs: 100_000, Seed: 1, Policy: Dynamic}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 17, 100, 1000, 12345} {
		for _, q := range []float64{0, 0.5, 0.99, 1} {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = math.Floor(rng.Float64() * 50) // many ties
			}
			sorted := slices.Clone(xs)
			slices.Sort(sorted)
			want := sorted[min(n-1, max(0, int(math.Ceil(q*float64(n)))-1))]
			if got := quantile(xs, q); got != want {
				t.Errorf("quantile(n=%d, q=%v) = %v, want %v", n, q, got, want)
			}
		}
	}
}
