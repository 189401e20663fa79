package view

import (
	"fmt"
	"net/netip"

	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"

	"github.com/prometheus/client_golang/prometheus"
)

// layoutsOn returns each service's slot layout (by name) on the switch dpid: as its syncer
// last planned it (what the switch holds), or, before its first plan, as planned from the
// latest intent with the backends located as that switch taught us.
func (b *Board) layoutsOn(dpid uint64) map[string]dataplane.GroupLayout {
	var ovs dataplane.OVSVersion
	var svcs []dataplane.Service
	if r := b.switches.Load(); r != nil {
		if sy, ok := (*r)[dpid]; ok {
			ovs = sy.OVS()
			svcs = sy.Status().Planned
		}
	}
	in := b.Latest().Intent
	if in == nil {
		return nil
	}
	if svcs == nil {
		locate := switchsync.Locator(func(netip.Addr) (dataplane.Location, bool) { return dataplane.Location{}, false })
		if l := b.sources().Locate; l != nil {
			locate = l(dpid)
		}
		svcs = switchsync.Located(in, dpid, locate)
	}
	opt := dataplane.Options{Normal: in.Normal, OVS: ovs}
	out := make(map[string]dataplane.GroupLayout, len(svcs))
	for _, s := range svcs {
		out[s.Name] = dataplane.Layout(s, opt)
	}
	return out
}

// realisedView fills the share fields of the services' views: computed share from the
// applied weights, realised share from the slot table of the first connected switch (lowest
// datapath id; the fields stay zero while none is connected).
func (b *Board) realisedView(views []ServiceView) {
	for i := range views {
		total := 0
		for _, bv := range views[i].Backends {
			total += int(bv.AppliedWeight)
		}
		for j := range views[i].Backends {
			if total > 0 {
				views[i].Backends[j].Share = float64(views[i].Backends[j].AppliedWeight) / float64(total)
			}
		}
	}
	sws := b.Switches()
	if len(sws) == 0 {
		return
	}
	layouts := b.layoutsOn(sws[0])
	for i := range views {
		l, ok := layouts[views[i].Name]
		if !ok {
			continue
		}
		views[i].SlotTable = l.Table.NHash
		views[i].SlotFallback = l.Table.Fallback
		views[i].UDPHash = string(l.UDPHash)
		for k, lb := range l.Backends {
			if j := int(lb.Index); j < len(views[i].Backends) {
				views[i].Backends[j].Slots = lb.Slots
				views[i].Backends[j].RealisedShare = l.Realised(k)
			}
		}
	}
}

var (
	shareDesc = prometheus.NewDesc("flowweight_backend_share_ratio",
		"Share of new connections the applied weights give a backend (its weight over the service's total), 0..1.",
		[]string{"service", "backend"}, nil)
	realisedDesc = prometheus.NewDesc("flowweight_backend_realised_share_ratio",
		"Share of new connections the switch's select-group slot table gives a backend (its slots over the table), 0..1.",
		[]string{"service", "backend", "dpid"}, nil)
	slotsDesc = prometheus.NewDesc("flowweight_group_slots",
		"Slots of a service's select-group table on a switch (0: the switch falls back to a non-proportional hash).",
		[]string{"service", "dpid"}, nil)
)

// shareCollector reports computed and realised shares at scrape time, from the board.
type shareCollector struct{ b *Board }

func (c shareCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shareDesc
	ch <- realisedDesc
	ch <- slotsDesc
}

func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.b.Latest().Services {
		total := 0
		for _, w := range s.Out {
			total += int(w)
		}
		for j, be := range s.Base.Backends {
			share := 0.0
			if total > 0 && j < len(s.Out) {
				share = float64(s.Out[j]) / float64(total)
			}
			ch <- prometheus.MustNewConstMetric(shareDesc, prometheus.GaugeValue, share, s.Base.Name, be.Name)
		}
	}
	for _, dpid := range c.b.Switches() {
		id := fmt.Sprintf("%016x", dpid)
		for name, l := range c.b.layoutsOn(dpid) {
			ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(l.Table.NHash), name, id)
			for k, lb := range l.Backends {
				ch <- prometheus.MustNewConstMetric(realisedDesc, prometheus.GaugeValue, l.Realised(k), name, lb.Name, id)
			}
		}
	}
}
