// Package fraction holds the one clamp of the project: utilisations, loads and shares are
// fractions in [0,1], measured by the probe, smoothed by the collector and weighed by weights,
// and all three must treat a reading outside that range the same way.
package fraction

// Clamp returns x bounded to [0,1], and 0 for NaN: a reading that is not a number says nothing
// about load, and 0 is what an absent reading counts as nowhere else, so callers that must tell
// absent from idle carry that separately (collector.Signals, weights.Backend.HasServiceCPU).
func Clamp(x float64) float64 {
	if !(x > 0) { // also NaN, and -0 becomes 0
		return 0
	}
	return min(x, 1)
}
