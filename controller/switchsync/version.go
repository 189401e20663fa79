package switchsync

import (
	"log/slog"

	"flowweight/controller/dataplane"
	"flowweight/controller/ofswitch"
)

// VersionOf reads a switch's Open vSwitch version from its DESC reply and logs, once per
// connection, which slot table its groups are laid out for (docs/dataplane.md, "Exact
// shares"): 256 slots from 2.17, otherwise the 64-slot layout every Open vSwitch accepts.
func VersionOf(log *slog.Logger, dpid string, d ofswitch.Desc) dataplane.OVSVersion {
	v, err := dataplane.SwitchVersion(d.Hardware, d.Software)
	if err != nil {
		log.Warn("switch version unknown; select groups use the 64-slot layout (shares to 1/64)",
			"dpid", dpid, "hardware", d.Hardware, "software", d.Software, "err", err)
		return v
	}
	log.Info("switch version", "dpid", dpid, "ovs", v.String(), "slots", dataplane.LayoutSlots(v))
	return v
}
