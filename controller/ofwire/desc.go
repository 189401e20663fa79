package ofwire

import (
	"bytes"
	"fmt"
	"unicode/utf8"
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
	// DescLen is the one size of an OFPMP_DESC reply body.
	DescLen = 4*descStrLen + descSerialLen
)

// ParseDesc decodes an OFPMP_DESC reply body (after the ofp_multipart_reply header). Each
// field is cut at its first NUL; a field that is not UTF-8 is an error naming it, so a garbled
// reply is reported rather than mistaken for a version.
func ParseDesc(b []byte) (Desc, error) {
	if len(b) != DescLen {
		return Desc{}, fmt.Errorf("%w: DESC reply is %d bytes, want %d", ErrMalformed, len(b), DescLen)
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

// DescBody encodes d as an OFPMP_DESC reply body, as a switch would (each field NUL-padded,
// cut at its width): what fake switches answer.
func DescBody(d Desc) []byte {
	b := make([]byte, DescLen)
	off := 0
	for _, f := range []struct {
		s string
		n int
	}{{d.Manufacturer, descStrLen}, {d.Hardware, descStrLen}, {d.Software, descStrLen}, {d.Serial, descSerialLen}, {d.Datapath, descStrLen}} {
		copy(b[off:off+f.n], f.s)
		off += f.n
	}
	return b
}
