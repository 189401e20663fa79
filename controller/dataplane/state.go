package dataplane

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"flowweight/controller/ofwire"
)

// Flow is one flow entry in wire form (ofwire.Flow: Table, Priority, Cookie, IdleTimeout,
// HardTimeout, the canonical Match TLVs and the raw Instructions). It is comparable with ==.
// A flow's identity on the switch is (Table, Priority, Match); Cookie, IdleTimeout,
// HardTimeout and Instructions are what an OFPFC_ADD with the same identity overwrites. Every
// flow planned here has zero timeouts (never cut connections), but reactive dispatch's flow
// to the controller, which holds a lease (dispatch.go); they are kept so drift shows.
//
// It is a type of its own over the codec's, not an alias, because its String names the cookie
// by this package's layout (cookie.go); ofwire.Flow(f) and Flow(w) convert.
type Flow ofwire.Flow

// flowKey is a flow's identity on the switch.
type flowKey struct {
	Table    uint8
	Priority uint16
	Match    string
}

func (f Flow) key() flowKey { return flowKey{f.Table, f.Priority, f.Match} }

// String renders the flow for logs and test failures (fields as OXM hex; ovs-ofctl prints
// the real meaning).
func (f Flow) String() string {
	return fmt.Sprintf("table=%d priority=%d %s idle=%d hard=%d match=%x instructions=%x",
		f.Table, f.Priority, describeCookie(f.Cookie), f.IdleTimeout, f.HardTimeout, f.Match, f.Instructions)
}

// Bucket is one select-group bucket: its weight and raw action list.
type Bucket = ofwire.Bucket

// Group is one group entry (ofwire.Group). Buckets keep their order (it is part of the
// group's identity on the switch: OVS maps hash slots to buckets in order).
type Group = ofwire.Group

// State is the set of flows and groups we own on one switch, in canonical order (flows by
// table, priority, match, cookie; groups by id), so two States compare with Equal.
type State struct {
	Flows  []Flow
	Groups []Group
}

// Equal reports whether two canonical states are identical.
func (s State) Equal(o State) bool {
	return slices.Equal(s.Flows, o.Flows) && slices.EqualFunc(s.Groups, o.Groups, Group.Equal)
}

// Canonical returns s sorted into canonical order (it does not dedupe).
func (s State) Canonical() State {
	out := State{Flows: slices.Clone(s.Flows), Groups: slices.Clone(s.Groups)}
	slices.SortFunc(out.Flows, compareFlows)
	slices.SortFunc(out.Groups, func(a, b Group) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// FilterGroups keeps the groups for which keep returns true. Group desc replies list every
// group on the switch and groups carry no cookie, so the controller passes Plan only the ids
// it owns (those of its configured services, past and present) lest Plan delete others' groups.
func (s State) FilterGroups(keep func(id uint32) bool) State {
	out := State{Flows: s.Flows}
	for _, g := range s.Groups {
		if keep(g.ID) {
			out.Groups = append(out.Groups, g)
		}
	}
	return out
}

func compareFlows(a, b Flow) int {
	return cmp.Or(
		cmp.Compare(a.Table, b.Table),
		cmp.Compare(b.Priority, a.Priority), // higher priority first, as dump-flows shows
		strings.Compare(a.Match, b.Match),
		cmp.Compare(a.Cookie, b.Cookie),
		strings.Compare(a.Instructions, b.Instructions),
		cmp.Compare(a.IdleTimeout, b.IdleTimeout),
		cmp.Compare(a.HardTimeout, b.HardTimeout),
	)
}
