package view

import (
	"fmt"
	"math"

	"flowweight/controller/switchsync"

	"github.com/prometheus/client_golang/prometheus"
)

// The measured shares beside the planned ones: what each switch's syncer published from its
// groups' bucket counters (switchsync.Status.Measured), read at view and scrape time.

// measuredView adds every connected switch's measurement to the backends' views, by
// service and backend name, switches in datapath id order.
func (b *Board) measuredView(views []ServiceView) {
	for _, st := range b.SwitchStatuses() {
		dpid := fmt.Sprintf("%016x", st.DPID)
		for i := range views {
			m, ok := st.Measured[views[i].Name]
			if !ok || m.To.IsZero() {
				continue
			}
			for j := range views[i].Backends {
				bv := &views[i].Backends[j]
				mb, ok := m.Backends[bv.Name]
				if !ok {
					continue
				}
				mv := measuredOf(dpid, m, mb)
				if c, ok := st.Corrections[views[i].Name]; ok {
					mv.Correction = correctionOf(c, bv.Name)
				}
				bv.Measured = append(bv.Measured, mv)
			}
		}
	}
}

func measuredOf(dpid string, m switchsync.Measured, mb switchsync.MeasuredBackend) MeasuredView {
	v := MeasuredView{DPID: dpid, Unit: m.Unit, PlannedShare: mb.Planned, Total: m.Total,
		WindowSeconds: m.To.Sub(m.From).Seconds(), SkippedDeltas: m.Skipped}
	n := mb.Count
	if m.Unit == switchsync.UnitPackets {
		v.MeasuredPackets = &n
	} else {
		v.MeasuredNewConnections = &n
	}
	if m.Pinned > 0 || mb.Pinned > 0 {
		p := mb.Pinned
		v.PinnedNewConnections = &p
	}
	if m.Total > 0 {
		share := mb.Share
		v.MeasuredShare = &share
	}
	// PlannedShare is of what the group placed: with affinity's pinned connections left out
	// (all of them without affinity), the group's own split and its sampling error.
	if g := m.Total - m.Pinned; g > 0 {
		if m.Pinned > 0 {
			gs := float64(mb.Count-mb.Pinned) / float64(g)
			v.MeasuredGroupShare = &gs
		}
		// max: a planned share a rounding above 1 must not make the error NaN (JSON has none).
		v.SamplingError = math.Sqrt(max(mb.Planned*(1-mb.Planned), 0) / float64(g))
	}
	return v
}

// correctionOf is backend name's part of c (nil when c does not know the backend: it has no
// bucket).
func correctionOf(c switchsync.Correction, name string) *CorrectionView {
	cb, ok := c.Backends[name]
	if !ok {
		return nil
	}
	state := "off"
	switch {
	case c.Active && c.Settled > 0:
		state = "settled"
	case c.Active:
		state = "correcting"
	}
	return &CorrectionView{State: state, ComputedShare: cb.Computed, PinnedShare: cb.PinnedShare, GroupShare: cb.Group,
		Bound: cb.Bound, Skew: c.Skew, Threshold: c.Threshold, Reason: c.Why, SettledReadings: c.Settled, Residual: c.Residual}
}

var (
	measuredShareDesc = prometheus.NewDesc("flowweight_backend_measured_share_ratio",
		"Share of a service's select-group hits on a switch that went to a backend over the last minute, from the group's bucket counters "+
			"(with client affinity, and the new connections pinned to it past the group): "+
			"of new connections in conntrack mode, of packets in stateless mode. Absent until something was counted.",
		[]string{"service", "backend", "dpid"}, nil)
	correctedShareDesc = prometheus.NewDesc("flowweight_backend_corrected_group_share_ratio",
		"Share of a service's select-group new connections a switch plans for a backend while it corrects the skew client affinity's pinned connections cause "+
			"(share_correction); absent while no correction is active.",
		[]string{"service", "backend", "dpid"}, nil)
	measuredConnsDesc = prometheus.NewDesc("flowweight_backend_measured_new_connections_total",
		"New connections a conntrack-mode service's select group on a switch sent to a backend, as its bucket counters measured them since the controller connected to the switch; "+
			"with client affinity, also those sent past the group to returning clients' learned backend (its table-8 flow's counter).",
		[]string{"service", "backend", "dpid"}, nil)
)

// measuredCollector exports the measured shares at scrape time, from the syncers' statuses.
type measuredCollector struct{ b *Board }

func (c measuredCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- measuredShareDesc
	ch <- measuredConnsDesc
	ch <- correctedShareDesc
}

func (c measuredCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.b.SwitchStatuses() {
		dpid := fmt.Sprintf("%016x", st.DPID)
		for svc, m := range st.Measured {
			for name, mb := range m.Backends {
				if m.Total > 0 {
					ch <- prometheus.MustNewConstMetric(measuredShareDesc, prometheus.GaugeValue, mb.Share, svc, name, dpid)
				}
			}
			if c, ok := st.Corrections[svc]; ok && c.Active {
				for name, x := range c.Group {
					ch <- prometheus.MustNewConstMetric(correctedShareDesc, prometheus.GaugeValue, x, svc, name, dpid)
				}
			}
			if m.Unit != switchsync.UnitConnections {
				continue
			}
			for name, n := range m.Cumulative {
				ch <- prometheus.MustNewConstMetric(measuredConnsDesc, prometheus.CounterValue, float64(n), svc, name, dpid)
			}
		}
	}
}
