package balancer

import (
	"log/slog"
	"time"

	"flowweight/weights"

	"github.com/prometheus/client_golang/prometheus"
)

// clampLogEvery bounds how often one backend may log that its capacity claim was clamped: a
// backend flapping around the bound must not log every update.
const clampLogEvery = time.Minute

// clampState is one backend's clamping as last seen, for logging transitions.
type clampState struct {
	clamp      weights.Clamp
	logged     time.Time           // last "clamped" line logged for this backend
	suppressed int                 // transitions into clamping not logged since
	loggedIn   [2]bool             // per resource (cpu, mem): its entry into clamping was logged, so its exit is too
	gauge      [2]prometheus.Gauge // per resource: flowweight_backend_capacity_clamped, looked up once
}

// noteClamps logs and counts the backends of s whose self-reported capacity weights.Compute
// clamped, once per transition into clamping, at most once per clampLogEvery per backend, and
// the exit from each logged entry. The update calls it after s.compute, with its lock held.
func (s *service) noteClamps(now time.Time, log *slog.Logger, m *Metrics) {
	if s.clamps == nil {
		s.clamps = map[string]*clampState{}
	}
	for j, e := range s.result.Backends {
		name := s.cfg.Backends[j].Name
		st := s.clamps[name]
		if st == nil {
			st = &clampState{}
			s.clamps[name] = st
		}
		c := e.Clamp
		for k, r := range []struct {
			resource  string
			was, is   bool
			got, used float64
		}{
			{"cpu", st.clamp.CPU(), c.CPU(), c.CPUCount, c.CPUUsed},
			{"mem", st.clamp.Mem(), c.Mem(), c.MemBytes, c.MemUsed},
		} {
			v := 0.0
			if r.is {
				v = 1
			}
			if st.gauge[k] == nil {
				st.gauge[k] = m.clamped.WithLabelValues(s.cfg.Name, name, r.resource)
			}
			st.gauge[k].Set(v)
			if r.was == r.is {
				continue
			}
			if !r.is {
				if st.loggedIn[k] {
					log.Info("backend's reported capacity no longer clamped", "service", s.cfg.Name, "backend", name, "resource", r.resource)
				}
				st.loggedIn[k] = false
				continue
			}
			m.clamps.WithLabelValues(r.resource).Inc()
			if !st.logged.IsZero() && now.Sub(st.logged) < clampLogEvery {
				st.suppressed++
				continue
			}
			log.Warn("backend's reported capacity clamped", "service", s.cfg.Name, "backend", name, "resource", r.resource,
				"reported", r.got, "used", r.used, "max_capacity_ratio", s.tuning.MaxCapacityRatio, "suppressed", st.suppressed)
			st.logged, st.suppressed, st.loggedIn[k] = now, 0, true
		}
		st.clamp = c
	}
}
