package weights

import (
	"math"
	"strings"
	"testing"
	"time"
)

// rampRun drives Compute once a second for a newcomer c beside a and b (CPU 0.6 each, 2
// cores), carrying the ramp and the applied weights from each Result to the next as the
// controller does. c's CPU comes from cpu(second, its applied share), so a model of what its
// requests cost drives it. It returns c's ramp fraction and verdict per second.
func rampRun(t *testing.T, tun Tuning, secs int, cpu func(sec int, share float64) float64, slow func(sec int) bool) ([]float64, []string) {
	t.Helper()
	in := []Backend{up("a", .6, 2), up("b", .6, 2), up("c", .02, 2)}
	var r Result
	var warms []float64
	var verdicts []string
	for s := range secs {
		c := &in[2]
		c.WarmupElapsed = time.Duration(s) * time.Second
		c.Status = StatusWarming
		if c.WarmupElapsed >= tun.Warmup {
			c.Status = StatusUp
		}
		c.CPU = cpu(s, float64(c.PrevWeight)/1000)
		c.Slow = slow != nil && slow(s)
		Compute(in, tun, &r)
		e := r.Backends[2]
		if e.Warmup < 0 || e.Warmup > 1 || math.IsNaN(e.Warmup) {
			t.Fatalf("second %d: ramp %v outside [0,1]", s, e.Warmup)
		}
		if e.WarmupTimer > 0 && e.Warmup > e.WarmupTimer+1e-12 {
			t.Fatalf("second %d: ramp %v ahead of the timer's %v", s, e.Warmup, e.WarmupTimer)
		}
		if sumLive(&r) != r.Total {
			t.Fatalf("second %d: weights sum to %d, want %d", s, sumLive(&r), r.Total)
		}
		warms = append(warms, e.Warmup)
		verdicts = append(verdicts, e.WarmupWatch)
		c.PrevWarmup, c.PrevWarmupElapsed = 0, 0
		if e.WarmupTimer > 0 {
			c.PrevWarmup, c.PrevWarmupElapsed = e.Warmup, c.WarmupElapsed
		}
		for i := range in {
			in[i].PrevShare, in[i].PrevWeight = r.Backends[i].Full, r.Backends[i].Weight
		}
	}
	return warms, verdicts
}

// costing is c's CPU when each of its requests costs factor(sec) times the pool's: a and b
// use 0.6 of 2 cores at a third of the traffic each.
func costing(factor func(sec int) float64) func(int, float64) float64 {
	return func(s int, share float64) float64 { return min(1, 0.02+factor(s)*0.6*3*share) }
}

func TestWatchedWarmup(t *testing.T) {
	tun := DefaultTuning()
	tun.Policy = PolicyStatic
	tun.Warmup, tun.WarmupStart = 60*time.Second, 0.5
	const secs = 200
	timer := func(s int) float64 { return min(0.5+0.5*float64(s)/60, 1) }
	fast := costing(func(int) float64 { return 1 })
	done := func(t *testing.T, warm []float64, by int) {
		t.Helper()
		for s := by; s < len(warm); s++ {
			if warm[s] != 1 {
				t.Fatalf("second %d: ramp %v, want done by %d", s, warm[s], by)
			}
		}
	}
	for _, c := range []struct {
		name  string
		cpu   func(int, float64) float64
		slow  func(int) bool
		check func(t *testing.T, warm []float64, verdict []string)
	}{
		{"fast from the start: a few connections, up to the timer's line, done with it", fast, nil,
			func(t *testing.T, warm []float64, verdict []string) {
				if warm[0] != watchFloor {
					t.Fatalf("starts at %v, want %v", warm[0], watchFloor)
				}
				for s := 15; s <= 60; s++ {
					if math.Abs(warm[s]-timer(s)) > 1e-9 {
						t.Fatalf("second %d: ramp %v, timer %v", s, warm[s], timer(s))
					}
				}
				for s := range 60 {
					if verdict[s] != "ramp" {
						t.Fatalf("second %d: %q", s, verdict[s])
					}
				}
				done(t, warm, 60)
			}},
		{"5x per request for 30 s: held by its cost, then ramps, done with the timer", costing(func(s int) float64 {
			if s < 30 {
				return 5
			}
			return 1
		}), nil, func(t *testing.T, warm []float64, verdict []string) {
			held := false
			for s := range 30 {
				if warm[s] > 0.1 {
					t.Fatalf("second %d: ramp %v while each request costs 5x", s, warm[s])
				}
				held = held || verdict[s] == watchNames[watchHoldCost]
			}
			if !held {
				t.Fatalf("never held for its cost: %q", verdict[:30])
			}
			done(t, warm, 60)
		}},
		{"a neighbour saturates it for 30 s: backs off, then climbs back", func(s int, share float64) float64 {
			if s < 30 {
				return 1
			}
			return fast(s, share)
		}, nil, func(t *testing.T, warm []float64, verdict []string) {
			for s := 1; s < 30; s++ {
				if warm[s] != watchFloor || verdict[s] != watchNames[watchBackOffSaturated] {
					t.Fatalf("second %d: ramp %v (%s), want backing off at the floor", s, warm[s], verdict[s])
				}
			}
			for s := 31; s < len(warm); s++ {
				if warm[s] < warm[s-1] {
					t.Fatalf("second %d: ramp fell %v -> %v while fast", s, warm[s-1], warm[s])
				}
			}
			done(t, warm, 60)
		}},
		{"busier than the pool from 20 s: holds where it got to, ramps on at 3 warm-ups", func(s int, share float64) float64 {
			if s < 20 {
				return fast(s, share)
			}
			return 0.8
		}, nil, func(t *testing.T, warm []float64, verdict []string) {
			for s := 21; s < 180; s++ {
				if warm[s] != warm[20] || !strings.HasPrefix(verdict[s], "hold") {
					t.Fatalf("second %d: ramp %v (%s), want held at %v", s, warm[s], verdict[s], warm[20])
				}
			}
			if verdict[180] != watchNames[watchPastLimit] {
				t.Fatalf("at 3 warm-ups: %q, want past the limit", verdict[180])
			}
			// From 0.67 by ×1.25 a second, not in one step.
			if warm[180] > warm[179]*watchRecover+1e-9 {
				t.Fatalf("at the limit the ramp jumped %v -> %v", warm[179], warm[180])
			}
			done(t, warm, 185)
		}},
		{"late health answers at 20-24 s: backs off, then ramps again", fast, func(s int) bool { return s >= 20 && s < 25 },
			func(t *testing.T, warm []float64, verdict []string) {
				if verdict[22] != watchNames[watchBackOffSlow] || warm[24] >= warm[19]/4 {
					t.Fatalf("second 22: %q; ramp %v at 19, %v at 24", verdict[22], warm[19], warm[24])
				}
				done(t, warm, 60)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			warm, verdict := rampRun(t, tun, secs, c.cpu, c.slow)
			c.check(t, warm, verdict)
		})
	}
	t.Run("timer mode ignores the signals", func(t *testing.T) {
		tt := tun
		tt.WarmupMode = WarmupTimer
		warm, _ := rampRun(t, tt, 70, func(int, float64) float64 { return 1 }, nil)
		for s := range warm {
			if math.Abs(warm[s]-timer(s)) > 1e-9 {
				t.Fatalf("second %d: ramp %v, timer %v", s, warm[s], timer(s))
			}
		}
	})
}

// TestWatchedWarmupBounds: whatever is carried and whatever the signals say (fast, late
// health answers, saturated, busy, costly), a watched ramp stays within [min(floor, timer),
// timer], and a long gap moves it by at most watchMaxGap's worth.
func TestWatchedWarmupBounds(t *testing.T) {
	tun := DefaultTuning()
	signals := map[string]func(b *Backend){
		"fast":      func(b *Backend) {},
		"slow":      func(b *Backend) { b.Slow = true },
		"saturated": func(b *Backend) { b.CPU = 1 },
		"busy":      func(b *Backend) { b.CPU = 0.8 },
		"costly":    func(b *Backend) { b.CPU, b.PrevWeight = 0.5, 10 },
	}
	for _, start := range []float64{0.01, 0.5} {
		tun.WarmupStart = start
		for name, signal := range signals {
			for _, prev := range []float64{0, 1e-9, 0.03, 0.3, 0.9, 1, 2, math.NaN(), math.Inf(1)} {
				for _, at := range [][2]time.Duration{{29 * time.Second, 30 * time.Second}, {29900 * time.Millisecond, 30 * time.Second},
					{time.Second, 50 * time.Second}, {50 * time.Second, 30 * time.Second}, {70 * time.Second, 200 * time.Second}} {
					b := up("c", 0.1, 2)
					b.Status, b.PrevWarmup, b.PrevWarmupElapsed, b.WarmupElapsed = StatusWarming, prev, at[0], at[1]
					if at[1] >= tun.Warmup {
						b.Status = StatusUp
					}
					signal(&b)
					a1, a2 := up("a", .6, 2), up("b", .6, 2)
					a1.PrevWeight, a2.PrevWeight = 400, 400
					r := compute([]Backend{a1, a2, b}, tun)
					e := r.Backends[2]
					if e.WarmupTimer == 0 {
						continue // not ramping (up, nothing carried)
					}
					lo := min(watchFloor, e.WarmupTimer)
					if !(e.Warmup >= lo && e.Warmup <= e.WarmupTimer) {
						t.Errorf("start %v, %s, carry %v at %v, now %v: ramp %v outside [%v, %v] (%s)", start, name, prev, at[0], at[1],
							e.Warmup, lo, e.WarmupTimer, e.WarmupWatch)
					}
					if prev > 0 && prev <= 1 && at[0] <= at[1] && e.Warmup > max(prev, lo)*math.Pow(climb(tun), watchMaxGap.Seconds())+
						(1-start)*watchMaxGap.Seconds()/tun.Warmup.Seconds()+1e-9 {
						t.Errorf("start %v, %s, carry %v at %v, now %v: ramp %v moved by more than a gap's worth", start, name, prev, at[0], at[1], e.Warmup)
					}
				}
			}
		}
	}
}

// TestWatchedWarmupSlowPool: late health answers back a newcomer off only when the slow rule
// cuts it (a minority of the pool slow), not when the whole pool is slow (its load).
func TestWatchedWarmupSlowPool(t *testing.T) {
	tun := DefaultTuning()
	for _, c := range []struct {
		name       string
		othersSlow bool
		want       string
	}{{"only the newcomer slow", false, watchNames[watchBackOffSlow]}, {"the whole pool slow", true, watchNames[watchRamp]}} {
		a, b, n := up("a", .5, 2), up("b", .5, 2), up("c", .3, 2)
		a.Slow, b.Slow, n.Slow = c.othersSlow, c.othersSlow, true
		n.Status, n.PrevWarmup, n.PrevWarmupElapsed, n.WarmupElapsed = StatusWarming, 0.3, 9*time.Second, 10*time.Second
		if got := compute([]Backend{a, b, n}, tun).Backends[2].WarmupWatch; got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestWorthWritesAMovingRamp: a watched ramp that moved is written however little; a held
// one waits for the dead-band like any other backend.
func TestWorthWritesAMovingRamp(t *testing.T) {
	tun := DefaultTuning()
	tun.DeadBand = 0.01
	for _, c := range []struct {
		name    string
		verdict uint8
		want    bool
	}{{"ramping", watchRamp, true}, {"backing off", watchBackOffSaturated, true}, {"holding", watchHoldCost, false}} {
		next := &Result{Total: 1000, Backends: []Explanation{{Weight: 17, WarmupTimer: 0.6, WarmupWatch: watchNames[c.verdict]}, {Weight: 983}}}
		next.Backends[0].rampMoved = c.verdict != watchHoldCost
		if got := Worth([]uint16{16, 984}, next, tun); got != c.want {
			t.Errorf("%s: Worth = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWatchedWarmupBadCarry: whatever the carried ramp says (garbage, a clock that went back,
// a ramp that began again), the fraction stays in [watchFloor, 1] and never passes the timer.
func TestWatchedWarmupBadCarry(t *testing.T) {
	tun := DefaultTuning()
	for _, c := range []struct {
		name       string
		prev       float64
		prevAt, at time.Duration
		want       float64
	}{
		{"none", 0, 0, 30 * time.Second, watchFloor},
		{"NaN", math.NaN(), 0, 30 * time.Second, watchFloor},
		{"above 1", 7, 0, 30 * time.Second, watchFloor},
		{"negative", -1, 0, 30 * time.Second, watchFloor},
		{"began again", 0.9, 50 * time.Second, 30 * time.Second, watchFloor},
		{"negative elapsed", 0.9, -time.Second, 30 * time.Second, watchFloor},
		{"below the floor", 1e-9, 29 * time.Second, 30 * time.Second, watchFloor * watchRecover},
		{"ahead of the timer", 1, 29 * time.Second, 30 * time.Second, 0.75},
	} {
		b := up("c", 0.1, 2)
		b.Status, b.WarmupElapsed = StatusWarming, c.at
		b.PrevWarmup, b.PrevWarmupElapsed = c.prev, c.prevAt
		r := compute([]Backend{up("a", .6, 2), b}, tun)
		if got := r.Backends[1].Warmup; math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: ramp %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWatchedWarmupShortTimer: with a short warm-up a newcomer that is fast from the start
// still meets the timer's line and finishes with the timer, however short.
func TestWatchedWarmupShortTimer(t *testing.T) {
	for _, w := range []time.Duration{4 * time.Second, 10 * time.Second, 20 * time.Second, 60 * time.Second, 5 * time.Minute} {
		tun := DefaultTuning()
		tun.Policy = PolicyStatic
		tun.Warmup = w
		secs := int(w.Seconds()) + 3
		warm, verdict := rampRun(t, tun, secs, costing(func(int) float64 { return 1 }), nil)
		at := int(w.Seconds())
		if warm[at] != 1 {
			t.Errorf("warm-up %v: ramp %v at its end (%q), want 1", w, warm[at], verdict[at])
		}
		if half := at / 2; warm[half] < 0.5 {
			t.Errorf("warm-up %v: ramp %v half-way, want on the timer's line by then", w, warm[half])
		}
	}
}
