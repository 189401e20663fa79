package balancer

import (
	"fmt"
	"slices"

	"flowweight/controller/intent"
	"flowweight/controller/view"
)

// snapshotOf is what the views and metrics see of the services after an update: every
// slice the update reuses is copied, so the snapshot stays as published while the next
// update runs. Called with b.mu held.
func snapshotOf(services []*service, in *intent.Intent) *view.Snapshot {
	snap := &view.Snapshot{Intent: in, Services: make([]view.Service, len(services))}
	for i, s := range services {
		vs := &snap.Services[i]
		vs.Base = s.baseView()
		vs.Policy, vs.Fallback, vs.Panic, vs.Total = string(s.tuning.Policy), s.result.FallbackReason(), s.result.Panic, s.result.Total
		vs.Result = slices.Clone(s.result.Backends)
		vs.Applied = slices.Clone(s.applied)
		vs.Out = slices.Clone(s.out())
		vs.Throughput = make([]float64, len(s.books))
		for j := range s.books {
			vs.Throughput[j] = s.books[j].throughput
		}
		if s.followed != nil {
			vs.Followed, vs.InFlight = true, slices.Clone(s.inflight)
		}
		if s.shadow != nil {
			vs.Shadow, vs.ShadowWeights = string(s.shadow.tuning.Policy), slices.Clone(s.shadow.held)
		}
	}
	return snap
}

// baseView is the part of the service's view only a reload changes, built once per service
// (a reload builds new services) and shared by every snapshot.
func (s *service) baseView() *view.ServiceView {
	if s.base != nil {
		return s.base
	}
	v := &view.ServiceView{Name: s.cfg.Name, VIP: s.cfg.VIP, Port: s.cfg.Port, Mode: s.cfg.Mode, Dispatch: s.cfg.Dispatch, GroupID: s.cfg.GroupID,
		Backends: make([]view.BackendView, len(s.cfg.Backends))}
	for j, be := range s.cfg.Backends {
		v.Backends[j] = view.BackendView{Name: be.Name, IP: be.IP, Port: be.Port, Source: be.Source}
	}
	for _, id := range s.cfg.ParsedCanary() {
		v.CanaryDatapaths = append(v.CanaryDatapaths, fmt.Sprintf("%016x", id))
	}
	s.base = v
	return v
}
