package ofswitch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"github.com/netrack/openflow/ofp"
)

// Desc is the switch's OFPMP_DESC reply. Open vSwitch answers Manufacturer "Nicira, Inc.",
// Hardware "Open vSwitch" and Software its version ("3.1.0"); the planner needs the version
// because the slot table a select group gets depends on it (dataplane.LayoutSlots).
type Desc struct {
	Manufacturer string
	Hardware     string
	Software     string
	Serial       string
	Datapath     string
}

// ofp_desc: four 256-byte strings and a 32-byte serial number, each NUL-padded.
const (
	descStrLen    = 256
	descSerialLen = 32
	descLen       = 4*descStrLen + descSerialLen
)

// ParseDesc decodes an OFPMP_DESC reply body (after the ofp_multipart_reply header). Each
// field is cut at its first NUL; a field that is not UTF-8 is an error naming it, so a garbled
// reply is reported rather than mistaken for a version.
func ParseDesc(b []byte) (Desc, error) {
	if len(b) != descLen {
		return Desc{}, fmt.Errorf("%w: DESC reply is %d bytes, want %d", ErrMalformed, len(b), descLen)
	}
	var d Desc
	fields := []struct {
		name string
		dst  *string
		n    int
	}{
		{"mfr_desc", &d.Manufacturer, descStrLen},
		{"hw_desc", &d.Hardware, descStrLen},
		{"sw_desc", &d.Software, descStrLen},
		{"serial_num", &d.Serial, descSerialLen},
		{"dp_desc", &d.Datapath, descStrLen},
	}
	off := 0
	for _, f := range fields {
		s := b[off : off+f.n]
		off += f.n
		if i := bytes.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		if !utf8.Valid(s) {
			return Desc{}, fmt.Errorf("%w: DESC reply %s is not UTF-8: %q", ErrMalformed, f.name, s)
		}
		*f.dst = string(s)
	}
	return d, nil
}

// fetchDesc asks the switch for its OFPMP_DESC. The session calls it once, after the
// handshake and before Connected, so Desc is fixed for the session's life. The reply is bounded
// to the one part of the one size a DESC reply has. It waits at most Config.BarrierTimeout of
// wall time rather than on the server's clock: a test clock then sees only the timers of the
// requests it drives.
func (sw *Switch) fetchDesc() (Desc, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sw.cfg.BarrierTimeout)
	defer cancel()
	payload, err := sw.multipart(ctx, ofp.MultipartTypeDescription, nil, Limit{MaxBytes: descLen, MaxParts: 1}, false)
	if err != nil {
		return Desc{}, fmt.Errorf("DESC request: %w", err)
	}
	return ParseDesc(payload)
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
