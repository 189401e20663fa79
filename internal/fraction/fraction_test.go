package fraction

import (
	"math"
	"testing"
)

func TestClamp(t *testing.T) {
	for _, tt := range []struct{ in, want float64 }{
		{0.5, 0.5}, {0, 0}, {1, 1}, {-0.1, 0}, {1.2, 1}, {math.NaN(), 0}, {math.Inf(1), 1}, {math.Inf(-1), 0}, {math.Copysign(0, -1), 0},
	} {
		if got := Clamp(tt.in); got != tt.want || math.Signbit(got) {
			t.Errorf("Clamp(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
