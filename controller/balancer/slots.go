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
