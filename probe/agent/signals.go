package agent

import (
	"flowweight/internal/report"
	"flowweight/probe/sample"
)

// fillSignals copies this interval's version-2 signals from v into r and sets their bits; r's
// CPU count must be filled in already (held.fill).
// A signal not measured in the last sample is absent, which the collector can tell from zero
// load: unlike the utilisations (see held) it is never carried over from an earlier sample nor
// given a policy value; reports between samples repeat the last sample's (held.signals). A value
// outside [0,1] (a sampler bug) is left absent and logged rather than sent, because
// AppendSeal would refuse the whole report for it.
func (a *Agent) fillSignals(r *report.Report, v sample.Values) {
	r.Version = report.Version
	r.Signals &= report.SignalConnsStale // held.fill's, about Conns
	r.CPUPressure, r.Throttled, r.ServiceCPU = 0, 0, 0
	for _, s := range [...]struct {
		field sample.Field
		bit   report.Signals
		val   float64
		dst   *float64
	}{
		{sample.FieldCPUPressure, report.SignalCPUPressure, v.CPUPressure, &r.CPUPressure},
		{sample.FieldThrottled, report.SignalThrottled, v.Throttled, &r.Throttled},
	} {
		if !v.Has(s.field) {
			continue
		}
		if !(s.val >= 0 && s.val <= 1) {
			a.logLimited("signal:"+s.field.String(), "signal out of range, reported as absent", "signal", s.field, "value", s.val)
			continue
		}
		r.Signals |= s.bit
		*s.dst = s.val
	}
	if r.Signals&report.SignalCPUPressure != 0 && v.PressureScope == sample.ScopeCgroup {
		r.Signals |= report.SignalPressureCgroup
	}
	// The agent merges FieldHealthLatency only for a check the service answered.
	if v.Has(sample.FieldHealthLatency) {
		r.Signals |= report.SignalHealthLatency
	}
	// The service's CPU travels as a fraction of the CPU count this report gives (held
	// when this interval's reading failed), so it compares directly with cpu_util.
	if v.Has(sample.FieldServiceCPU) {
		if f, ok := sample.ServiceCPUFraction(v.ServiceCores, r.CPUCount); ok {
			r.Signals |= report.SignalServiceCPU
			r.ServiceCPU = f
		} else {
			a.logLimited("signal:service_cpu", "signal out of range, reported as absent", "signal", "service_cpu",
				"cores", v.ServiceCores, "cpu_count", r.CPUCount)
		}
	}
}
