package view

import (
	"encoding/json"
	"math"
	"testing"

	"flowweight/controller/switchsync"
)

// TestMeasuredViewFiniteAtRoundingEdges: a planned share a rounding outside [0,1] (a sum of
// count-weighted shares) gives a finite sampling error, so the API's JSON still encodes.
func TestMeasuredViewFiniteAtRoundingEdges(t *testing.T) {
	for _, planned := range []float64{1 + 1e-12, -1e-12, 0, 1, 0.5} {
		m := switchsync.Measured{Unit: switchsync.UnitConnections, Total: 400}
		v := measuredOf("0000000000000001", m, switchsync.MeasuredBackend{Count: 400, Share: 1, Planned: planned})
		if math.IsNaN(v.SamplingError) || math.IsInf(v.SamplingError, 0) {
			t.Fatalf("planned %v: sampling error %v", planned, v.SamplingError)
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("planned %v: %v", planned, err)
		}
	}
}
