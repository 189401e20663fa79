package balancer

import (
	"flowweight/controller/dataplane"
	"flowweight/controller/ofswitch"
)

// switchOVS reads the switch's Open vSwitch version from its DESC reply and logs, once per
// connection, which slot table its groups are laid out for (docs/dataplane.md, "Exact
// shares"): 256 slots from 2.17, otherwise the 64-slot layout every Open vSwitch accepts.
func (b *Balancer) switchOVS(sw *ofswitch.Switch) dataplane.OVSVersion {
	d := sw.Desc()
	v, err := dataplane.SwitchVersion(d.Hardware, d.Software)
	if err != nil {
		b.log.Warn("switch version unknown; select groups use the 64-slot layout (shares to 1/64)",
			"dpid", sw.String(), "hardware", d.Hardware, "software", d.Software, "err", err)
		return v
	}
	b.log.Info("switch version", "dpid", sw.String(), "ovs", v.String(), "slots", dataplane.LayoutSlots(v))
	return v
}

// optionsLocked are the planner's options for one switch. b.mu must be held.
func (b *Balancer) optionsLocked(dpid uint64) dataplane.Options {
	opt := dataplane.Options{Normal: b.cfg.Controller.Normal}
	if st, ok := b.switches[dpid]; ok {
		opt.OVS = st.ovs
	}
	return opt
}

// noteLayoutsLocked logs, once each, where a service's realised split differs from the
// computed one by more than rounding (a backend lifted to one slot, backends left without a
// slot). b.mu must be held.
func (b *Balancer) noteLayoutsLocked(svcs []dataplane.Service, opt dataplane.Options) {
	for _, s := range svcs {
		for _, n := range dataplane.Layout(s, opt).Notes {
			if b.layoutNoted == nil {
				b.layoutNoted = map[string]bool{}
			}
			if !b.layoutNoted[n] {
				b.layoutNoted[n] = true
				b.log.Warn("realised split differs from the computed one", "service", s.Name, "note", n)
			}
		}
	}
}
