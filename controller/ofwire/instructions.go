package ofwire

import (
	"encoding/binary"
	"fmt"

	"github.com/netrack/openflow/ofp"
)

// Instruction types read back (OFPIT_*).
const (
	InstrGotoTable    = 1
	InstrWriteActions = 3
	InstrApplyActions = 4
	InstrClearActions = 5
)

// Instruction is one decoded ofp_instruction: its type, goto table, and actions.
type Instruction struct {
	Type    uint16
	Table   uint8       // InstrGotoTable
	Actions ofp.Actions // InstrApplyActions, InstrWriteActions
}

// ParseInstructions decodes an instruction list; unknown instruction types are an error, as
// flowweight never plans them and a switch would only return them if someone else wrote the
// flow.
func ParseInstructions(b []byte) ([]Instruction, error) {
	var out []Instruction
	for off := 0; off < len(b); {
		if len(b)-off < 8 {
			return nil, fmt.Errorf("%w: instruction at offset %d: %d bytes left", ErrMalformed, off, len(b)-off)
		}
		typ := binary.BigEndian.Uint16(b[off:])
		n := int(binary.BigEndian.Uint16(b[off+2:]))
		if n < 8 || n%8 != 0 || off+n > len(b) {
			return nil, fmt.Errorf("%w: instruction type %d at offset %d has length %d, %d bytes left", ErrMalformed, typ, off, n, len(b)-off)
		}
		in := Instruction{Type: typ}
		switch typ {
		case InstrGotoTable:
			if n != 8 {
				return nil, fmt.Errorf("%w: goto_table instruction is %d bytes", ErrMalformed, n)
			}
			in.Table = b[off+4]
		case InstrApplyActions, InstrWriteActions:
			a, err := ParseActions(b[off+8 : off+n])
			if err != nil {
				return nil, fmt.Errorf("%w: instruction type %d: %w", ErrMalformed, typ, err)
			}
			in.Actions = a
		case InstrClearActions:
		default:
			return nil, fmt.Errorf("%w: unsupported instruction type %d at offset %d", ErrMalformed, typ, off)
		}
		out = append(out, in)
		off += n
	}
	return out, nil
}
