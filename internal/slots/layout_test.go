package slots

import (
	"slices"
	"testing"
)

func TestFor(t *testing.T) {
	cases := []struct {
		w     []uint16
		v     Version
		slots []int
		n     int
	}{
		{[]uint16{700, 200, 100}, ovs310, []int{179, 51, 26}, 256},
		{[]uint16{334, 333, 333}, ovs310, []int{86, 85, 85}, 256},
		{[]uint16{0, 500, 500}, ovs310, []int{0, 128, 128}, 256},
		{[]uint16{1, 999}, ovs310, []int{1, 255}, 256},
		{[]uint16{700, 200, 100}, ovs216, []int{45, 13, 6}, 64},
		{[]uint16{5}, ovs310, []int{16}, 16}, // one bucket: the switch's smallest table, all to it
		{[]uint16{0, 0}, ovs310, []int{0, 0}, 0},
	}
	for _, c := range cases {
		slots, n := For(c.w, c.v)
		if !slices.Equal(slots, c.slots) || n != c.n {
			t.Errorf("For(%v, %v) = %v of %d, want %v of %d", c.w, c.v, slots, n, c.slots, c.n)
		}
	}
}

// TestWeighted: the bucket weights for slot counts, and the table the switch builds for them
// has exactly those counts.
func TestWeighted(t *testing.T) {
	cases := []struct {
		counts []int
		want   []Bucket
	}{
		{[]int{179, 51, 26}, []Bucket{{0, 178}, {1, 51}, {2, 26}, {0, 1}}},
		{[]int{255, 1}, []Bucket{{0, 255}, {1, 1}}}, // a count of 1 already sizes the table
		{[]int{0, 256}, []Bucket{{1, 256}}},         // one part: no extra bucket
		{[]int{0, 128, 0, 128}, []Bucket{{1, 127}, {3, 128}, {1, 1}}},
		{[]int{0, 0}, nil},
	}
	for _, c := range cases {
		got := Weighted(c.counts)
		if !slices.Equal(got, c.want) {
			t.Errorf("Weighted(%v) = %v, want %v", c.counts, got, c.want)
			continue
		}
		w := make([]uint16, len(got))
		for i, b := range got {
			w[i] = b.Weight
		}
		tab := OVS(w, ovs310)
		per := make([]int, len(c.counts))
		for i, h := range tab.Hits {
			per[got[i].Part] += h
		}
		if len(got) > 1 && !slices.Equal(per, c.counts) {
			t.Errorf("Weighted(%v): the switch builds %v", c.counts, per)
		}
	}
}
