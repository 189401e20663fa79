package slots

import (
	"reflect"
	"testing"
)

func TestApportion(t *testing.T) {
	cases := []struct {
		w    []uint16
		n    int
		want []int
	}{
		{[]uint16{700, 200, 100}, 256, []int{179, 51, 26}},
		{[]uint16{699, 199, 102}, 256, []int{179, 51, 26}},
		{[]uint16{600, 400}, 256, []int{154, 102}},
		{[]uint16{1, 1, 1}, 256, []int{86, 85, 85}},
		{[]uint16{970, 20, 10}, 256, []int{248, 5, 3}},
		{[]uint16{1000, 1}, 256, []int{255, 1}},           // lifted from 0.26 slots to 1
		{[]uint16{1000, 1, 1, 1}, 16, []int{13, 1, 1, 1}}, // three lifts
		{[]uint16{0, 5, 0}, 64, []int{0, 64, 0}},
		{[]uint16{1, 1, 1}, 2, []int{1, 1, 0}}, // more live than slots: no minimum
		{[]uint16{0, 0}, 64, []int{0, 0}},
		{nil, 64, []int{}},
	}
	for _, c := range cases {
		if got := Apportion(c.w, c.n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Apportion(%v, %d) = %v, want %v", c.w, c.n, got, c.want)
		}
	}
}

// TestNearest: the split without the one-slot minimum leaves a backend below half a slot
// without one, which is how a layout tells that Apportion lifted it.
func TestNearest(t *testing.T) {
	cases := []struct {
		w    []uint16
		n    int
		want []int
	}{
		{[]uint16{1000, 1}, 256, []int{256, 0}},
		{[]uint16{1000, 1, 1, 1}, 16, []int{16, 0, 0, 0}},
		{[]uint16{700, 200, 100}, 256, []int{179, 51, 26}},
		{[]uint16{1, 1, 1}, 2, []int{1, 1, 0}},
	}
	for _, c := range cases {
		if got := Nearest(c.w, c.n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Nearest(%v, %d) = %v, want %v", c.w, c.n, got, c.want)
		}
	}
}
