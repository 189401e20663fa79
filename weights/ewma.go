package weights

import (
	"math"
	"time"
)

// EWMA is an exponentially weighted moving average. The collector keeps one per backend and
// metric, because raw samples taken every few seconds are noisy and weights computed from
// them oscillate (the seeds' main complaint about dynamic weighting).
//
// The zero value is not usable; make one with NewEWMA. The first sample initialises the
// average, so a new backend is not dragged toward zero.
type EWMA struct {
	alpha float64
	value float64
	ok    bool
}

// NewEWMA returns an average that gives each new sample the weight alpha, in (0, 1].
func NewEWMA(alpha float64) EWMA { return EWMA{alpha: alpha} }

// AlphaForHalfLife converts a half-life into the alpha for samples arriving every interval:
// after one half-life an old sample's influence has halved. Operators think in time, the
// arithmetic wants alpha.
func AlphaForHalfLife(halfLife, interval time.Duration) float64 {
	if halfLife <= 0 || interval <= 0 {
		return 1
	}
	return 1 - math.Exp2(-float64(interval)/float64(halfLife))
}

// Add folds x into the average and returns the new value. NaN and infinities are ignored,
// so one bad sample cannot poison the average for ever.
func (e *EWMA) Add(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return e.value
	}
	if !e.ok {
		e.value, e.ok = x, true
		return x
	}
	e.value += e.alpha * (x - e.value)
	return e.value
}

// Value returns the current average and whether any sample has been added.
func (e EWMA) Value() (float64, bool) { return e.value, e.ok }

// Reset forgets every sample, for a backend that comes back after an eviction: its old load
// says nothing about the new process.
func (e *EWMA) Reset() { e.value, e.ok = 0, false }
