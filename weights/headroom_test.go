package weights

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// headroomOnly is the headroom policy with the rules after the target switched off, so a
// test sees the target itself in the weights.
func headroomOnly() Tuning {
	t := cpuOnly()
	t.Policy = PolicyHeadroom
	t.Gain, t.MaxStep, t.Warmup = 1, 1, 0
	t.Learn.Enabled = false
	t.Total = 10000
	return t
}

func svc(name string, busy, own, cores float64) Backend {
	b := up(name, busy, cores)
	b.ServiceCPU, b.HasServiceCPU = own, true
	return b
}

func shares(r *Result) []float64 {
	s := make([]float64, len(r.Backends))
	for i, e := range r.Backends {
		s[i] = float64(e.Weight) / float64(r.Total)
	}
	return s
}

// The lab's failure: two backends half taken by a neighbour read as busy. Equal weights
// give each the same traffic, so the service's own CPU is the same on all three; the
// neighbours' CPU is not ours, and the backend without one must get the largest share.
func TestHeadroomSeesThroughNeighbours(t *testing.T) {
	in := []Backend{svc("a", 0.8, 0.3, 2), svc("b", 0.8, 0.3, 2), svc("c", 0.3, 0.3, 2)}
	tun := headroomOnly()
	r := compute(in, tun)
	// S = 0.5, 0.5, 1; measured demand 0.9, planned max(0.9 + 0.25·1.1, 0.8·2) = 1.6;
	// common headroom (2 − 1.6)/3; shares (S − h)/1.6.
	h := (2 - 1.6) / 3
	want := []float64{(0.5 - h) / 1.6, (0.5 - h) / 1.6, (1 - h) / 1.6}
	for i, got := range shares(r) {
		if math.Abs(got-want[i]) > 1e-3 {
			t.Fatalf("shares %.4f, want %.4f", shares(r), want)
		}
	}
	e := r.Backends[0]
	if e.Used != "service_cpu" || math.Abs(e.Own-0.3) > 1e-9 || math.Abs(e.Avail-0.5) > 1e-9 || math.Abs(e.Headroom-0.2) > 1e-9 {
		t.Fatalf("explanation of a: %+v, want used service_cpu, own 0.3, avail 0.5, headroom 0.2 (C = 1)", e)
	}
	// 1/AL reads the neighbours' CPU as load: it gives c more too, but here is why it failed
	// in the lab: learning from throughput per unit of that load shrinks a and b's capacity.
	dyn := tun
	dyn.Policy = PolicyDynamic
	if d := shares(compute(in, dyn)); !(d[2] > d[0]) {
		t.Fatalf("1/AL shares %.3f: the check of the premise is wrong", d)
	}
}

// Planned demand below the available capacity: every backend that gets load is left the same
// spare capacity, C·avail − planned demand, whatever the speeds and neighbours.
func TestHeadroomEqualisesSpareCapacity(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for k := range 200 {
		n := 2 + rng.IntN(8)
		in := make([]Backend, n)
		for i := range in {
			cores := 1 + float64(rng.IntN(8))
			own := rng.Float64() * 0.6
			in[i] = svc(fmt.Sprint("b", i), own+rng.Float64()*(1-own)*0.5, own, cores)
			if rng.IntN(2) == 0 { // half report a CPU pressure, which discounts what is available
				in[i].CPUPressure, in[i].HasPressure = rng.Float64()*0.5, true
			}
		}
		tun := headroomOnly()
		tun.PlanLoad, tun.PlanMargin = 0.9, 0.1
		tun.Total = 65535
		r := compute(in, tun)
		var sumS, sumD float64
		supply := func(e Explanation) float64 { return e.C * e.Avail * (1 - e.Pressure) }
		for _, e := range r.Backends {
			sumS += supply(e)
			sumD += e.C * e.Own
		}
		demand := max(sumD+tun.PlanMargin*(sumS-sumD), tun.PlanLoad*sumS)
		// A water-filled-out backend keeps minTarget, so the targets are normalised by
		// 1 + dropped·minTarget: undo that to get each one's planned demand.
		dropped := 0
		for _, e := range r.Backends {
			if e.Target <= minTarget*1.0001 {
				dropped++
			}
		}
		common := math.NaN()
		for i, e := range r.Backends {
			if e.Target <= minTarget*1.0001 {
				continue // water-filled out: its available capacity is below the common headroom
			}
			spare := supply(e) - e.Target*(1+float64(dropped)*minTarget)*demand
			if math.IsNaN(common) {
				common = spare
			} else if math.Abs(spare-common) > 1e-9 {
				t.Fatalf("pool %d backend %d: spare %.6f, another has %.6f (%+v)", k, i, spare, common, r.Backends)
			}
		}
		for i, e := range r.Backends {
			if e.Target <= minTarget*1.0001 && supply(e) > common+1e-9 {
				t.Fatalf("pool %d backend %d dropped with available %.4f above the common headroom %.4f", k, i, supply(e), common)
			}
		}
	}
}

// CPU pressure discounts the capacity counted as available, S = C·avail·(1 − κ·p): a backend
// whose CPU others queue for gets less; the same pressure everywhere moves the split from equal
// headroom toward shares proportional to S, and reaches them when so little is left that the
// demand exceeds it (the common headroom never goes below 0, which would move the split toward
// equal weights); κ = 0 and an absent pressure change nothing.
func TestHeadroomPressure(t *testing.T) {
	// S without pressure = 0.5, 0.5, 1 (two half-taken backends and a quiet one), own 0.3 each.
	base := func() []Backend {
		return []Backend{svc("a", 0.8, 0.3, 2), svc("b", 0.8, 0.3, 2), svc("c", 0.3, 0.3, 2)}
	}
	with := func(p ...float64) []Backend {
		in := base()
		for i := range in {
			if i < len(p) && p[i] >= 0 {
				in[i].CPUPressure, in[i].HasPressure = p[i], true
			}
		}
		return in
	}
	busier := func(in []Backend) []Backend {
		in[2].CPU, in[2].ServiceCPU = 0.45, 0.45
		return in
	}
	none := shares(compute(base(), headroomOnly()))
	proportional := []float64{0.25, 0.25, 0.5}
	tests := []struct {
		name     string
		in       []Backend
		pressure float64 // Tuning.Pressure
		want     []float64
		wantNote string
	}{
		{"absent is not zero", with(-1, -1, -1), 1, none, ""},
		{"measured zero", with(0, 0, 0), 1, none, ""},
		{"kappa 0 ignores it", with(0.9, 0.9, 0.9), 0, none, ""},
		// The quiet one busier (own 0.45): S = 0.25, 0.25, 0.5 against a demand of 0.3 + 0.3 +
		// 0.45 = 1.05, more than is left: proportional to S.
		{"uniform and high: proportional", busier(with(0.9, 0.9, 0.9)), 1, proportional, ""},
		// A saturated pool's PSI near 1 counts as 0.5: the split is the one at 0.5, not the
		// noise in 1 − p (the lab's 110 % overload).
		{"uniform and saturated: capped", with(0.999, 0.97, 1), 1, []float64{0.225 / 0.925, 0.225 / 0.925, 0.475 / 0.925}, ""},
		// S = 0.25, 0.25, 0.5 = 1 against a measured demand of 0.9 (planned max(0.9 + 0.25·0.1,
		// 0.8) = 0.925): h = 0.025, shares (S − h)/0.925.
		{"uniform and half", with(0.5, 0.5, 0.5), 1, []float64{0.225 / 0.925, 0.225 / 0.925, 0.475 / 0.925}, ""},
		// Only c is pressed: S = 0.5, 0.5, 0.5, all alike.
		{"one pressed backend loses its edge", with(-1, -1, 0.5), 1, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, ""},
		// κ = 0.5 on a pressure of 0.5 is a pressure of 0.25: S = 0.375, 0.375, 0.75 against a
		// demand planned at max(0.9 + 0.25·0.6, 0.8·1.5) = 1.2, h = 0.1.
		{"kappa scales", with(0.5, 0.5, 0.5), 0.5, []float64{0.275 / 1.2, 0.275 / 1.2, 0.65 / 1.2}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tun := headroomOnly()
			tun.Pressure = tt.pressure
			r := compute(tt.in, tun)
			got := shares(r)
			for i := range got {
				if math.Abs(got[i]-tt.want[i]) > 2e-3 {
					t.Fatalf("shares %.4f, want %.4f", got, tt.want)
				}
			}
			for i, e := range r.Backends {
				wantP := 0.0
				if tt.in[i].HasPressure {
					wantP = tt.pressure * min(tt.in[i].CPUPressure, maxPressure)
				}
				if math.Abs(e.Pressure-wantP) > 1e-12 || math.Abs(e.Headroom-e.C*max(e.Avail*(1-wantP)-e.Own, 0)) > 1e-12 {
					t.Fatalf("%s: explanation pressure %v headroom %v, want %v and C·(avail·(1 − p) − own)", e.Name, e.Pressure, e.Headroom, wantP)
				}
			}
		})
	}
}

// A backend whose available capacity is below the common headroom gets no planned load: the
// floor, not the formula, gives it its minimum.
func TestHeadroomWaterFilling(t *testing.T) {
	in := []Backend{svc("tiny", 0.95, 0.05, 1), svc("big", 0.1, 0.1, 8), svc("big2", 0.1, 0.1, 8)}
	tun := headroomOnly()
	tun.Floor = 0.01
	r := compute(in, tun)
	if e := r.Backends[0]; e.Target > 2*minTarget || e.Weight != uint16(math.Round(tun.Floor*float64(r.Total))) {
		t.Fatalf("tiny: target %v weight %d, want %v and the floor %d", e.Target, e.Weight, minTarget, int(tun.Floor*float64(r.Total)))
	}
	if r.Backends[1].Weight != r.Backends[2].Weight {
		t.Fatalf("equal big backends got %d and %d", r.Backends[1].Weight, r.Backends[2].Weight)
	}
}

// Absent is not zero: a backend that does not report the service's own CPU makes the pool
// fall back to 1/AL (a neighbour's use would read as the service's), and says so.
func TestHeadroomFallsBackWithoutServiceCPU(t *testing.T) {
	withZero := []Backend{svc("a", 0.8, 0, 2), svc("b", 0.5, 0.5, 2), svc("c", 0.3, 0.3, 2)}
	absent := []Backend{up("a", 0.8, 2), svc("b", 0.5, 0.5, 2), svc("c", 0.3, 0.3, 2)}
	tun := headroomOnly()
	rz, ra := compute(withZero, tun), compute(absent, tun)
	if rz.Fallback != 0 || rz.FallbackReason() != "" {
		t.Fatalf("a measured 0 is a signal, not an absence: fallback %d", rz.Fallback)
	}
	if ra.Fallback != 1 || !strings.Contains(ra.FallbackReason(), "1 of 3") {
		t.Fatalf("fallback %d %q, want 1 of 3", ra.Fallback, ra.FallbackReason())
	}
	dyn := tun
	dyn.Policy = PolicyDynamic
	rd := compute(absent, dyn)
	for i := range ra.Backends {
		if ra.Backends[i].Weight != rd.Backends[i].Weight {
			t.Fatalf("fallback weights %v, 1/AL gives %v", shares(ra), shares(rd))
		}
	}
	if ra.Backends[0].Used != "cpu" || ra.Backends[1].Used != "service_cpu" {
		t.Fatalf("used: %q, %q", ra.Backends[0].Used, ra.Backends[1].Used)
	}
	if shares(rz)[0] == shares(ra)[0] {
		t.Fatalf("a zero service CPU and an absent one gave the same share %.3f", shares(rz)[0])
	}
}

// Learning speed from throughput per unit of the service's own CPU keeps a backend's capacity
// where it is when a neighbour arrives; per unit of its whole CPU, the neighbour reads as
// slowness and the learned factor falls.
func TestHeadroomLearnsSpeedFromOwnCPU(t *testing.T) {
	for _, c := range []struct {
		policy  PolicyName
		keepsUp bool
	}{{PolicyHeadroom, true}, {PolicyDynamic, false}} {
		t.Run(string(c.policy), func(t *testing.T) {
			tun := cpuOnly()
			tun.Policy = c.policy
			nb := []float64{0.5, 0, 0} // a neighbour takes half of backend 0
			in := make([]Backend, 3)
			for i := range in {
				in[i] = up(fmt.Sprint("b", i), 0.3, 2)
			}
			var r Result
			const lambda, speed = 3.0, 2.0 // work per second offered; per backend at full CPU
			for range 100 {
				Compute(in, tun, &r)
				for i := range in {
					share := float64(r.Backends[i].Weight) / float64(r.Total)
					tput := min(lambda*share, speed*(1-nb[i]))
					own := tput / speed
					in[i].CPU, in[i].ServiceCPU, in[i].HasServiceCPU = own+nb[i], own, true
					in[i].Throughput = tput
					in[i].Learned, in[i].PrevShare, in[i].PrevWeight = r.Backends[i].Learned, r.Backends[i].Full, r.Backends[i].Weight
				}
			}
			l := r.Backends[0].Learned / r.Backends[1].Learned
			if c.keepsUp != (math.Abs(l-1) < 0.05) {
				t.Fatalf("learned factor of the neighboured backend relative to another: %.3f", l)
			}
		})
	}
}

func TestHeadroomDoesNotAllocateWhenReused(t *testing.T) {
	in := randomPool(rand.New(rand.NewPCG(7, 8)), 1000)
	for i := range in {
		in[i].ServiceCPU, in[i].HasServiceCPU = in[i].CPU/2, i%97 != 0 // some fall back
	}
	tun := DefaultTuning()
	tun.Policy = PolicyHeadroom
	var r Result
	for _, all := range []bool{false, true} {
		if all {
			for i := range in {
				in[i].HasServiceCPU = true
			}
		}
		Compute(in, tun, &r)
		if a := testing.AllocsPerRun(20, func() { Compute(in, tun, &r) }); a != 0 {
			t.Fatalf("Compute allocated %.1f times per call (every backend reports service CPU: %v)", a, all)
		}
	}
}
