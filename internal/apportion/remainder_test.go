package apportion

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// reference is the method by its definition: a stable sort by remainder, largest first.
func reference(rem []Remainder, k int) []int32 {
	order := slices.Clone(rem)
	slices.SortStableFunc(order, func(a, b Remainder) int { return cmp.Compare(b.Frac, a.Frac) })
	var out []int32
	for j := 0; j < k && j < len(order); j++ {
		out = append(out, order[j].Index)
	}
	slices.Sort(out)
	return out
}

func TestLargest(t *testing.T) {
	cases := []struct {
		name string
		frac []float64
		k    int
		want []int32
	}{
		{"none left", []float64{.5, .9}, 0, []int32{}},
		{"largest first", []float64{.1, .9, .5}, 2, []int32{1, 2}},
		{"ties to the lower index", []float64{.5, .5, .5}, 2, []int32{0, 1}},
		{"ties inside one bucket", []float64{.30001, .30002, .30001}, 2, []int32{0, 1}},
		{"zero remainders last", []float64{0, .2, 0}, 2, []int32{0, 1}},
		{"more asked than parts", []float64{.4, .6}, 5, []int32{0, 1}},
	}
	var r Ranker
	for _, c := range cases {
		rem := make([]Remainder, len(c.frac))
		for i, f := range c.frac {
			rem[i] = Remainder{Frac: f, Index: int32(i)}
		}
		got := slices.Clone(r.Largest(rem, c.k))
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: Largest(%v, %d) = %v, want %v", c.name, c.frac, c.k, got, c.want)
		}
	}
}

// TestLargestMatchesSort: the bucketed selection is the sort's, for remainders that crowd one
// bucket, spread over all, or repeat.
func TestLargestMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r Ranker
	for range 2000 {
		n := 1 + rng.IntN(300)
		rem := make([]Remainder, n)
		for i := range rem {
			f := rng.Float64()
			switch rng.IntN(3) {
			case 0:
				f = 0.5 + f/1e6 // one bucket
			case 1:
				f = float64(rng.IntN(4)) / 4 // repeats
			}
			rem[i] = Remainder{Frac: f, Index: int32(i)}
		}
		k := rng.IntN(n + 1)
		got := slices.Clone(r.Largest(rem, k))
		slices.Sort(got)
		if want := reference(rem, k); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("Largest(k=%d) over %d remainders = %v, want %v", k, n, got, want)
		}
	}
}

func BenchmarkLargest10000(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	rem := make([]Remainder, 10000)
	for i := range rem {
		rem[i] = Remainder{Frac: rng.Float64(), Index: int32(i)}
	}
	var r Ranker
	b.ReportAllocs()
	for b.Loop() {
		r.Largest(rem, 5000)
	}
}
