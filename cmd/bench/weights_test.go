package main

import (
	"math"
	"testing"
)

func TestShares(t *testing.T) {
	for _, c := range []struct {
		name string
		w    map[string]uint16
		ns   []string
		want []float64
	}{
		{"pinned", map[string]uint16{"be1": 700, "be2": 200, "be3": 100}, []string{"be1", "be2", "be3"}, []float64{0.7, 0.2, 0.1}},
		{"missing bucket reads 0", map[string]uint16{"be1": 1, "be3": 3}, []string{"be1", "be2", "be3"}, []float64{0.25, 0, 0.75}},
		{"all zero", map[string]uint16{}, []string{"be1", "be2"}, []float64{0, 0}},
		{"order of names", map[string]uint16{"a": 3, "b": 1}, []string{"b", "a"}, []float64{0.25, 0.75}},
	} {
		got := Shares(c.w, c.ns)
		if MaxDiff(got, c.want) > 1e-12 {
			t.Errorf("%s: Shares = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestNormalizeMaxDiff(t *testing.T) {
	for _, c := range []struct {
		in, want []float64
	}{
		{[]float64{1, 2, 4}, []float64{1.0 / 7, 2.0 / 7, 4.0 / 7}},
		{[]float64{60, 40}, []float64{0.6, 0.4}},
		{[]float64{0, 0}, []float64{0, 0}},
	} {
		if d := MaxDiff(Normalize(c.in), c.want); d > 1e-12 {
			t.Errorf("Normalize(%v) = %v, want %v", c.in, Normalize(c.in), c.want)
		}
	}
	if d := MaxDiff([]float64{0.5, 0.5}, []float64{0.6, 0.4}); math.Abs(d-0.1) > 1e-12 {
		t.Errorf("MaxDiff = %v, want 0.1", d)
	}
}
