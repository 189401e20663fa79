package agent

import (
	"flowweight/internal/report"
	"flowweight/probe/sample"
)

// held carries the last measured value of each field across failed samples; see StaleAfter.
type held struct {
	v   sample.Values
	age [6]int // intervals since each field (by bit index) was last measured
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
