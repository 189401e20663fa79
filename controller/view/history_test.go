package view

import (
	"testing"
	"time"
)

func TestHistoryRing(t *testing.T) {
	h := NewHistory(3)
	t0 := time.Unix(1000, 0)
	for i := 0; i < 5; i++ {
		h.Add("s/a", Point{Time: t0.Add(time.Duration(i) * time.Second), Weight: uint16(i), AL: float64(i) / 10})
	}
	pts := h.series["s/a"].points()
	if len(pts) != 3 || pts[0].Weight != 2 || pts[2].Weight != 4 || !pts[2].Time.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("ring kept %+v, want the last three oldest first", pts)
	}
	if cap(h.series["s/a"].pts) != 3 {
		t.Fatal("ring grew beyond its size")
	}
	h.Keep(map[string]bool{})
	if len(h.series) != 0 {
		t.Fatal("removed backend's history kept")
	}
}
