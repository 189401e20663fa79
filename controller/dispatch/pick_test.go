package dispatch

import "testing"

func TestLeastLoaded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w, n  []float64
		start int
		want  int
	}{
		{"fewest in flight at equal weights", []float64{1, 1, 1}, []float64{3, 1, 2}, 0, 1},
		{"weight scales the queue it may hold", []float64{1, 3}, []float64{1, 4}, 0, 1}, // 2/1 against 5/3
		{"weight scales the queue it may hold, the other way", []float64{1, 3}, []float64{1, 6}, 0, 0},
		{"zero weight never chosen", []float64{0, 1}, []float64{0, 50}, 0, 1},
		{"nothing with weight", []float64{0, 0}, []float64{0, 0}, 0, -1},
		{"no candidates", nil, nil, 0, -1},
		{"tie goes to the first from start", []float64{1, 1, 1}, []float64{2, 2, 2}, 2, 2},
		{"tie wraps around", []float64{1, 1, 1}, []float64{2, 0, 0}, 2, 2},
		{"negative count reads as none", []float64{1, 1}, []float64{-5, 0}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := leastLoaded(tc.w, tc.n, tc.start); got != tc.want {
				t.Errorf("leastLoaded(%v, %v, %d) = %d, want %d", tc.w, tc.n, tc.start, got, tc.want)
			}
		})
	}
}

// TestSmoothRR: over each cycle of Σw choices every candidate is chosen exactly its weight's
// times, and at no point of the cycle is a count more than one from its weight's share.
func TestSmoothRR(t *testing.T) {
	for _, w := range [][]float64{{1, 2, 3}, {5, 1, 1}, {167, 333, 500}, {1, 0, 1}, {7}} {
		credit := make([]float64, len(w))
		var sum float64
		for _, x := range w {
			sum += x
		}
		got := make([]float64, len(w))
		for k := 1; k <= int(sum); k++ {
			i := smoothRR(w, credit)
			if i < 0 || w[i] == 0 {
				t.Fatalf("weights %v: choice %d went to %d", w, k, i)
			}
			got[i]++
			for j := range w {
				if d := got[j] - float64(k)*w[j]/sum; d > 1 || d < -1 {
					t.Fatalf("weights %v: after %d choices candidate %d has %v, its share is %.2f", w, k, j, got[j], float64(k)*w[j]/sum)
				}
			}
		}
		for j := range w {
			if got[j] != w[j] {
				t.Errorf("weights %v: one cycle gave %v", w, got)
			}
		}
	}
	if i := smoothRR([]float64{0, 0}, make([]float64, 2)); i != -1 {
		t.Errorf("no weight: chose %d", i)
	}
}
