package agent

import (
	"flowweight/internal/report"
	"flowweight/probe/sample"
)

// held carries the last measured value of each field across failed samples (see StaleAfter),
// and the last sample's signals to the reports between two samples.
type held struct {
	v   sample.Values
	age [6]int // intervals since each field (by bit index) was last measured
	sig sample.Values
}

// heldSignalFields are the signals a sampler measures, which a report between two samples
// repeats; the health-check latency is the check's own.
const heldSignalFields = sample.FieldCPUPressure | sample.FieldThrottled | sample.FieldServiceCPU

// signals keeps a new sample's signals (aged), or adds the last sample's to a report between
// two samples: they are still the latest interval's measurement, as the utilisations fill
// repeats are. Left out, each of the fast pace's reports would restart the collector's
// averages of them and, without the service's CPU, turn the headroom policy's pool back to
// 1/AL, ten times a second while a busy backend's checks run late (docs/weights.md, "Busy is
// not dead"). A signal the last sample lacked stays absent.
func (h *held) signals(v *sample.Values, aged bool) {
	if aged {
		h.sig = *v
		h.sig.Known &= heldSignalFields
		h.sig.Unavailable = 0
		return
	}
	v.Merge(h.sig)
}

var fields = [...]sample.Field{
	sample.FieldCPUUtil, sample.FieldCPUCount, sample.FieldMemUtil,
	sample.FieldMemBytes, sample.FieldConns, sample.FieldNetUtil,
}

// fill writes the values for this interval into r, applying StaleAfter. aged says that now is
// a new sample, so each held field not in it is one interval older; a report between samples
// (the fast pace) passes false and ages nothing. It returns false when a capacity was never
// measured, so no report can be built.
func (h *held) fill(r *report.Report, now sample.Values, aged bool) bool {
	for i, f := range fields {
		if now.Has(f) {
			h.age[i] = 0
		} else if h.v.Has(f) && aged {
			h.age[i]++
		}
	}
	h.v.Merge(now)
	if !h.v.Has(sample.FieldCPUCount | sample.FieldMemBytes) {
		return false
	}
	stale := func(i int) bool { return !h.v.Has(fields[i]) || h.age[i] > StaleAfter }
	r.CPUCount, r.MemBytes = h.v.CPUCount, h.v.MemBytes
	r.CPUUtil, r.MemUtil, r.Conns, r.NetUtil = h.v.CPUUtil, h.v.MemUtil, h.v.Conns, h.v.NetUtil
	if stale(0) {
		r.CPUUtil = 1
	}
	if stale(2) {
		r.MemUtil = 1
	}
	if stale(4) {
		r.Conns = 0
		r.Signals |= report.SignalConnsStale // not a count: a drain must not read it as none
	}
	if stale(5) {
		r.NetUtil = 0
	}
	return true
}
