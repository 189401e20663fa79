package ofswitch

import (
	"context"
	"fmt"
	"log/slog"

	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

// Desc is the switch's OFPMP_DESC reply (ofwire.Desc): Open vSwitch answers Manufacturer
// "Nicira, Inc.", Hardware "Open vSwitch" and Software its version ("3.1.0"); the planner
// needs the version because the slot table a select group gets depends on it.
type Desc = ofwire.Desc

// fetchDesc asks the switch for its OFPMP_DESC. The session calls it once, after the
// handshake and before Connected, so Desc is fixed for the session's life. The reply is bounded
// to the one part of the one size a DESC reply has. It waits at most Config.BarrierTimeout of
// wall time rather than on the server's clock: a test clock then sees only the timers of the
// requests it drives.
func (sw *Switch) fetchDesc() (Desc, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sw.cfg.BarrierTimeout)
	defer cancel()
	payload, err := sw.multipart(ctx, ofp.MultipartTypeDescription, nil, Limit{MaxBytes: ofwire.DescLen, MaxParts: 1}, false)
	if err != nil {
		return Desc{}, fmt.Errorf("DESC request: %w", err)
	}
	return ofwire.ParseDesc(payload)
}

// loadDesc fills sw.desc, or logs why it stays empty (an empty Desc means "unknown switch":
// the planner then uses the layout every Open vSwitch accepts).
func (sw *Switch) loadDesc() {
	d, err := sw.fetchDesc()
	if err != nil {
		sw.logf(slog.LevelWarn, "desc_unavailable", "switch description unavailable; treating the switch as unknown", "err", err)
		return
	}
	sw.desc = d
	sw.logf(slog.LevelInfo, "desc", "switch description", "manufacturer", d.Manufacturer, "hardware", d.Hardware, "software", d.Software)
}

// Desc is the switch's OFPMP_DESC reply, read once at connect; empty if the switch did not
// answer it.
func (sw *Switch) Desc() Desc { return sw.desc }
