package switchsync

import (
	"maps"
	"slices"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
)

// The syncer's side of the share correction (correct.go is the computation): after each
// reading it moves the correction of every service that asks for one (intent.Service's
// CorrectShare, with client affinity) and, when one moved, plans again at once; every plan
// lays the corrected services' groups out with the correction's weights. A switch corrects
// from its own counters: what pins connections past one switch's groups says nothing of
// another's traffic.

// correct moves each correction on the window just measured, and asks for a plan when one
// moved. Called at the end of measure, from Run's goroutine.
func (s *Syncer) correct(in *intent.Intent) {
	if s.cfg.Lead != nil && s.master == 0 {
		// A standby writes nothing: it would log and show corrections no switch holds.
		if len(s.corr) > 0 {
			s.corr, s.st.Corrections = nil, nil
		}
		return
	}
	base := make(map[string]dataplane.Service, len(s.base))
	for _, svc := range s.base {
		base[svc.Name] = svc
	}
	next := make(map[string]Correction)
	for _, is := range in.On(s.cfg.Conn.DatapathID()) {
		svc, ok := base[is.Name]
		m, measured := s.st.Measured[is.Name]
		if !ok || !measured || !correctable(is) {
			continue
		}
		prev, had := s.corr[is.Name]
		if had && !m.To.After(prev.At) {
			next[is.Name] = prev // no new counts since: each step is one reading's news
			continue
		}
		c := Correct(prev, s.meas.windows[is.Name].Recent(correctCounts).Measure(m.Unit), Computed(svc))
		c.At = m.To
		next[is.Name] = c
		if c.Active != prev.Active {
			if c.Active {
				s.cfg.Logger.Info("measured share: correcting the slots for pinned connections", "dpid", s.cfg.Conn.String(),
					"service", is.Name, "reason", c.Why)
			} else {
				s.cfg.Logger.Info("measured share: correction ended", "dpid", s.cfg.Conn.String(), "service", is.Name, "reason", c.Why)
			}
		}
		if c.Active != prev.Active || (c.Active && !maps.Equal(c.Group, prev.Group)) {
			s.replan = true
		}
	}
	for name, prev := range s.corr {
		if _, ok := next[name]; !ok && prev.Active {
			s.replan = true // no longer corrected: plan the computed shares
		}
	}
	s.corr = next
	s.st.Corrections = next
	if s.replan {
		// Rebase right after the rewrite: the delta across it is discarded, and the next
		// one should start at once.
		s.meas.rebase = true
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// correctable says the switch may correct is's share: it asks to, its new connections are
// partly pinned past the group (countsPinned), and its group is not held as the switch has it.
func correctable(is *intent.Service) bool {
	return is.CorrectShare && countsPinned(is.Service) && !is.Held
}

// applyCorrections is base with each corrected service's weights replaced by its
// correction's (Correction.Apply), and whether any was; base is not modified.
func (s *Syncer) applyCorrections(in *intent.Intent, base []dataplane.Service) ([]dataplane.Service, bool) {
	if !slices.ContainsFunc(slices.Collect(maps.Values(s.corr)), func(c Correction) bool { return c.Active }) {
		return base, false
	}
	ask := make(map[string]bool, len(in.Services))
	for i := range in.Services {
		ask[in.Services[i].Name] = correctable(&in.Services[i])
	}
	out := make([]dataplane.Service, len(base))
	corrected := false
	for i, svc := range base {
		if c, ok := s.corr[svc.Name]; ok && ask[svc.Name] {
			if a := c.Apply(svc); !slices.EqualFunc(a.Backends, svc.Backends, func(x, y dataplane.Backend) bool { return x.Weight == y.Weight }) {
				svc, corrected = a, true
			}
		}
		out[i] = svc
	}
	return out, corrected
}
