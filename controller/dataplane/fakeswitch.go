package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"flowweight/controller/ofswitch"
	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// OpenFlow error types and codes the fake switch answers with, the ones Open vSwitch sends
// for the same mistakes.
const (
	ErrTypeBadRequest     uint16 = 1
	ErrTypeBadAction      uint16 = 2
	ErrTypeBadInstruction uint16 = 3
	ErrTypeFlowModFailed  uint16 = 5
	ErrTypeGroupModFailed uint16 = 6

	CodeBadType       uint16 = 1 // BAD_REQUEST
	CodeBadOutGroup   uint16 = 9 // BAD_ACTION
	CodeBadTableID    uint16 = 2 // BAD_INSTRUCTION
	CodeBadCommand    uint16 = 6 // FLOW_MOD_FAILED (and GROUP_MOD_FAILED BAD_COMMAND is 6 too)
	CodeGroupExists   uint16 = 0 // GROUP_MOD_FAILED
	CodeInvalidGroup  uint16 = 1 // GROUP_MOD_FAILED
	CodeUnknownGroup  uint16 = 8 // GROUP_MOD_FAILED
	CodeBadGroupType  uint16 = 7 // GROUP_MOD_FAILED: OFPGMFC_BAD_TYPE
	codeBadRequestLen uint16 = 6 // BAD_REQUEST: OFPBRC_BAD_LEN
)

// OFError is the fake switch's OFPT_ERROR: the type and code a real switch would send, and
// the Desc of the Message it rejected.
type OFError struct {
	Type, Code uint16
	Desc       string
	Err        error
}

func (e *OFError) Error() string {
	return fmt.Sprintf("switch rejected %q: error type %d code %d: %v", e.Desc, e.Type, e.Code, e.Err)
}

func (e *OFError) Unwrap() error { return e.Err }

// FakeSwitch is a software flow and group table for unit tests. It decodes each Message's
// bytes (so it tests the encoders, not the planner's structs), applies OpenFlow 1.3
// semantics for the commands the planner uses, and rejects what Open vSwitch rejects:
// ADD of an existing group, MODIFY of a missing one, a flow naming a missing group, a
// goto_table that does not go forward. Like a real switch it keeps applying the messages after
// a rejected one.
type FakeSwitch struct {
	flows  map[flowKey]Flow
	groups map[uint32]Group
	// counters are the groups' bucket counters (fakestats.go).
	counters
	// Applied counts messages applied without error, for tests of plan sizes.
	Applied int
}

// NewFakeSwitch returns an empty switch.
func NewFakeSwitch() *FakeSwitch {
	return &FakeSwitch{flows: map[flowKey]Flow{}, groups: map[uint32]Group{}}
}

// ApplyPlan applies every stage in order and returns the errors of all rejected messages.
func (f *FakeSwitch) ApplyPlan(stages [][]ofswitch.Message) error {
	var errs []error
	for _, s := range stages {
		errs = append(errs, f.Apply(s))
	}
	return errors.Join(errs...)
}

// Apply applies messages in order and returns the errors (*OFError) of those rejected.
func (f *FakeSwitch) Apply(msgs []ofswitch.Message) error {
	var errs []error
	for _, m := range msgs {
		if err := f.apply(m); err != nil {
			errs = append(errs, err)
		} else {
			f.Applied++
		}
	}
	return errors.Join(errs...)
}

func (f *FakeSwitch) apply(m ofswitch.Message) error {
	reject := func(typ, code uint16, format string, a ...any) error {
		return &OFError{Type: typ, Code: code, Desc: m.Desc, Err: fmt.Errorf(format, a...)}
	}
	var body bytes.Buffer
	if m.Body != nil {
		if _, err := m.Body.WriteTo(&body); err != nil {
			return reject(ErrTypeBadRequest, codeBadRequestLen, "encoding: %w", err)
		}
	}
	switch m.Type {
	case of.TypeGroupMod:
		gm, err := ofwire.DecodeGroupMod(body.Bytes())
		if err != nil {
			return reject(ErrTypeBadRequest, codeBadRequestLen, "%w", err)
		}
		return f.groupMod(gm, reject)
	case of.TypeFlowMod:
		fm, err := ofwire.DecodeFlowMod(body.Bytes())
		if err != nil {
			return reject(ErrTypeBadRequest, codeBadRequestLen, "%w", err)
		}
		return f.flowMod(fm, reject)
	default:
		return reject(ErrTypeBadRequest, CodeBadType, "fake switch does not model message type %v", m.Type)
	}
}

type rejectFunc func(typ, code uint16, format string, a ...any) error

func (f *FakeSwitch) groupMod(gm ofwire.GroupMod, reject rejectFunc) error {
	g := gm.Group
	if g.ID > uint32(ofp.GroupMax) {
		return reject(ErrTypeGroupModFailed, CodeInvalidGroup, "group id %d is reserved", g.ID)
	}
	switch gm.Command {
	case ofp.GroupAdd, ofp.GroupModify:
		if g.Type > ofp.GroupTypeFastFailover {
			return reject(ErrTypeGroupModFailed, CodeBadGroupType, "group %d type %d", g.ID, g.Type)
		}
		_, exists := f.groups[g.ID]
		if gm.Command == ofp.GroupAdd && exists {
			return reject(ErrTypeGroupModFailed, CodeGroupExists, "group %d exists", g.ID)
		}
		if gm.Command == ofp.GroupModify && !exists {
			return reject(ErrTypeGroupModFailed, CodeUnknownGroup, "group %d does not exist", g.ID)
		}
		f.groups[g.ID] = g
		f.born(g.ID, len(g.Buckets))
	case ofp.GroupDelete:
		f.died(g.ID)
		// Deleting a group also deletes the flows that output to it, as in Open vSwitch.
		delete(f.groups, g.ID)
		for k, fl := range f.flows {
			if usesGroup(fl, g.ID) {
				delete(f.flows, k)
				delete(f.flowStats, k)
			}
		}
	default:
		return reject(ErrTypeGroupModFailed, CodeBadCommand, "group command %d", gm.Command)
	}
	return nil
}

func (f *FakeSwitch) flowMod(fm ofwire.FlowMod, reject rejectFunc) error {
	fl := Flow(fm.Flow)
	switch fm.Command {
	case ofp.FlowAdd:
		ins, _ := ofwire.ParseInstructions([]byte(fl.Instructions)) // DecodeFlowMod checked them
		for _, in := range ins {
			if in.Type == ofwire.InstrGotoTable && in.Table <= fl.Table {
				return reject(ErrTypeBadInstruction, CodeBadTableID, "table %d: goto_table %d does not go forward", fl.Table, in.Table)
			}
			for _, g := range groupsIn(in.Actions) {
				if _, ok := f.groups[g]; !ok {
					return reject(ErrTypeBadAction, CodeBadOutGroup, "table %d: group %d does not exist", fl.Table, g)
				}
			}
		}
		f.flows[fl.key()] = fl
		f.flowBorn(fl.key())
	case ofp.FlowDeleteStrict:
		if cur, ok := f.flows[fl.key()]; ok && cur.Cookie&fm.CookieMask == fl.Cookie&fm.CookieMask {
			delete(f.flows, fl.key())
			delete(f.flowStats, fl.key())
		}
	case ofp.FlowDelete:
		if fl.Match != "" {
			return reject(ErrTypeFlowModFailed, CodeBadCommand, "fake switch models non-strict delete only with an empty match")
		}
		for k, cur := range f.flows {
			if (fl.Table == uint8(ofp.TableAll) || fl.Table == cur.Table) && cur.Cookie&fm.CookieMask == fl.Cookie&fm.CookieMask {
				delete(f.flows, k)
				delete(f.flowStats, k)
			}
		}
	default:
		return reject(ErrTypeFlowModFailed, CodeBadCommand, "fake switch does not model flow command %d", fm.Command)
	}
	return nil
}

// groupsIn returns the groups named by group actions, nested ones included.
func groupsIn(actions ofp.Actions) []uint32 {
	var out []uint32
	for _, a := range actions {
		switch a := a.(type) {
		case *ofp.ActionGroup:
			out = append(out, uint32(a.Group))
		case *ofwire.CT:
			out = append(out, groupsIn(a.Actions)...)
		}
	}
	return out
}

func usesGroup(f Flow, id uint32) bool {
	ins, _ := ofwire.ParseInstructions([]byte(f.Instructions))
	for _, in := range ins {
		if slices.Contains(groupsIn(in.Actions), id) {
			return true
		}
	}
	return false
}

// State returns everything the switch holds, in canonical order.
func (f *FakeSwitch) State() State {
	s := State{Flows: slices.Collect(maps.Values(f.flows)), Groups: slices.Collect(maps.Values(f.groups))}
	return s.Canonical()
}

// GroupDescReply is the OFPMP_GROUP_DESC reply body the switch would send.
func (f *FakeSwitch) GroupDescReply() ([]byte, error) { return EncodeGroupDesc(f.State().Groups) }

// FlowStatsReply is the OFPMP_FLOW reply body for flows whose cookie matches under mask,
// with their packet counters (HitFlow) and durations.
func (f *FakeSwitch) FlowStatsReply(cookie, mask uint64) ([]byte, error) {
	var out []byte
	for _, x := range f.State().Flows {
		if x.Cookie&mask != cookie&mask {
			continue
		}
		e, err := EncodeFlowStats([]Flow{x})
		if err != nil {
			return nil, err
		}
		if c := f.flowStats[x.key()]; c != nil {
			// ofp_flow_stats: duration_sec at 4, packet_count at 32.
			binary.BigEndian.PutUint32(e[4:], f.clock-c.born)
			binary.BigEndian.PutUint64(e[32:], c.packets)
			binary.BigEndian.PutUint64(e[40:], 60*c.packets)
		}
		out = append(out, e...)
	}
	return out, nil
}
