package weights

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestFollowInFlight(t *testing.T) {
	static := func() Tuning { t := cpuOnly(); t.Policy = PolicyStatic; return t }()
	base := compute([]Backend{up("a", .5, 1), up("b", .5, 2), up("c", .5, 4), {Name: "d", Status: StatusDown}}, static)
	baseW := base.Weights(nil) // 143 286 571 0
	in := func(ns ...float64) []InFlight {
		out := make([]InFlight, len(ns))
		for i, n := range ns {
			out[i] = InFlight{N: n, OK: !math.IsNaN(n)}
		}
		return out
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		n    []InFlight
		want []uint16
	}{
		{"no readings: the slow weights", nil, baseW},
		{"idle pool: the slow weights", in(0, 0, 0, 0), baseW},
		{"equal queues: the slow weights", in(5, 5, 5, 5), baseW},
		{"the big backend queued: it gives some up", in(1, 1, 7, 0), []uint16{250, 500, 250, 0}},
		{"one unknown keeps its share", in(nan, 3, 0, 0), []uint16{143, 95, 762, 0}},
		// A hostile or broken count cannot take a backend to 0 or to all of it: its factor
		// is at most 4 either way, so against another backend its share moves at most 16x.
		{"a huge count: a quarter, not 0", in(4e9, 0, 0, 0), []uint16{35, 322, 643, 0}},
		{"an empty queue among long ones: bounded", in(0, 1000, 1000, 0), []uint16{727, 91, 182, 0}},
		{"negative counts count as 0", in(-5, 0, 0, 0), baseW},
		{"a failing backend's empty queue draws no more than its base", func() []InFlight {
			n := in(0, 1000, 1000, 0)
			n[0].Failing = true
			return n
		}(), baseW},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out Result
			FollowInFlight(baseW, tc.n, &out)
			got := out.Weights(nil)
			sum := 0
			for i, w := range got {
				sum += int(w)
				if (baseW[i] == 0) != (w == 0) {
					t.Fatalf("liveness changed: %v from %v", got, baseW)
				}
			}
			if sum != base.Total {
				t.Fatalf("sum %d, want %d: %v", sum, base.Total, got)
			}
			for i := range got {
				if d := int(got[i]) - int(tc.want[i]); d < -1 || d > 1 {
					t.Fatalf("weights %v, want %v (±1)", got, tc.want)
				}
			}
			if base.Weights(nil)[0] != baseW[0] || baseW[0] != 143 {
				t.Fatal("base changed")
			}
		})
	}
}

func TestFollowInFlightDoesNotAllocateWhenReused(t *testing.T) {
	base := []uint16{143, 286, 571}
	n := []InFlight{{N: 3, OK: true}, {N: 1, OK: true}, {N: 9, OK: true}}
	var out Result
	FollowInFlight(base, n, &out)
	if a := testing.AllocsPerRun(100, func() { FollowInFlight(base, n, &out) }); a != 0 {
		t.Fatalf("%v allocations per call", a)
	}
}

func TestMovedBeyond(t *testing.T) {
	tests := []struct {
		name       string
		prev, next []uint16
		band       float64
		want       bool
	}{
		{"same", []uint16{100, 300, 600}, []uint16{100, 300, 600}, 0, false},
		{"any change with no band", []uint16{100, 300, 600}, []uint16{101, 299, 600}, 0, true},
		{"inside the band", []uint16{100, 300, 600}, []uint16{120, 290, 590}, 0.02, false},
		{"at the band's edge", []uint16{100, 300, 600}, []uint16{120, 280, 600}, 0.02, false},
		{"beyond the band", []uint16{100, 300, 600}, []uint16{121, 279, 600}, 0.02, true},
		{"losing all weight", []uint16{1, 399, 600}, []uint16{0, 400, 600}, 0.2, true},
		{"gaining weight from 0", []uint16{0, 400, 600}, []uint16{1, 399, 600}, 0.2, true},
		{"another length", []uint16{500, 500}, []uint16{300, 300, 400}, 0.5, true},
	}
	for _, tt := range tests {
		if got := MovedBeyond(tt.prev, tt.next, tt.band); got != tt.want {
			t.Errorf("%s: MovedBeyond = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestInFlightOwnReference: against their own averages, steady queues of different lengths
// give the base weights, a queue above its average loses share, one below gains, and counts
// that are not numbers stay bounded.
func TestInFlightOwnReference(t *testing.T) {
	base := []uint16{250, 250, 500}
	for _, tt := range []struct {
		name string
		n    []InFlight
		want func(w []uint16) bool
	}{
		{"each at its average", []InFlight{{N: 1, OK: true, Mean: 1, HasMean: true}, {N: 3, OK: true, Mean: 3, HasMean: true}, {N: 9, OK: true, Mean: 9, HasMean: true}},
			func(w []uint16) bool { return slices.Equal(w, base) }},
		{"the third's queue doubled", []InFlight{{N: 1, OK: true, Mean: 1, HasMean: true}, {N: 3, OK: true, Mean: 3, HasMean: true}, {N: 19, OK: true, Mean: 9, HasMean: true}},
			func(w []uint16) bool { return w[2] < 500 && w[0] > 250 && w[1] > 250 }},
		{"the first below its average", []InFlight{{N: 0, OK: true, Mean: 3, HasMean: true}, {N: 3, OK: true, Mean: 3, HasMean: true}, {N: 9, OK: true, Mean: 9, HasMean: true}},
			func(w []uint16) bool { return w[0] > 250 && w[0] <= 4*250*1000/(4*250+750) }},
		{"infinite and NaN counts", []InFlight{{N: math.Inf(1), OK: true, Mean: 1, HasMean: true}, {N: math.NaN(), OK: true, Mean: math.NaN(), HasMean: true}, {N: 9, OK: true, Mean: math.Inf(1), HasMean: true}},
			func(w []uint16) bool { return w[0] >= 1 && w[0] < 250 && int(w[0])+int(w[1])+int(w[2]) == 1000 }},
	} {
		var out Result
		FollowInFlight(base, tt.n, &out)
		if w := out.Weights(nil); !tt.want(w) {
			t.Errorf("%s: %v from %v", tt.name, w, base)
		}
	}
}

// TestInFlightTracker: a backend's first count is its average; later ones pull it by
// 1 − e^(−dt/τ); a count without OK leaves it; a change in the number of backends restarts.
func TestInFlightTracker(t *testing.T) {
	var tr InFlightTracker
	t0 := time.Unix(1000, 0)
	n := []InFlight{{N: 4, OK: true}, {}}
	tr.Apply(n, t0)
	if !n[0].HasMean || n[0].Mean != 4 || n[1].HasMean {
		t.Fatalf("first: %+v", n)
	}
	n = []InFlight{{N: 14, OK: true}, {N: 2, OK: true}}
	tr.Apply(n, t0.Add(InFlightMeanTau))
	if want := 4 + 10*(1-math.Exp(-1)); math.Abs(n[0].Mean-want) > 1e-9 || n[1].Mean != 2 {
		t.Fatalf("after one τ: %+v, want %v", n, want)
	}
	n = []InFlight{{N: 1, OK: true}}
	tr.Apply(n, t0.Add(2*InFlightMeanTau))
	if n[0].Mean != 1 {
		t.Fatalf("one backend fewer: %+v, want a fresh average", n)
	}
	tr.Reset()
	n = []InFlight{{N: 7, OK: true}}
	tr.Apply(n, t0)
	if n[0].Mean != 7 {
		t.Fatalf("after Reset: %+v", n)
	}
}
