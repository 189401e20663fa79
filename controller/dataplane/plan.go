package dataplane

import (
	"fmt"
	"slices"

	"flowweight/controller/ofswitch"
	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// Plan returns the messages that take a switch holding current to desired, in stages; the
// session sends each stage and waits for its Barrier reply before the next. Empty stages are
// left out, so an up-to-date switch yields no stages at all. Stages, in order:
//
//  1. OFPGC_ADD of missing groups — before any flow that names them (Open vSwitch rejects a
//     flow whose group does not exist with OFPBAC_BAD_OUT_GROUP);
//  2. OFPGC_MODIFY of changed groups, each with its whole bucket list (a weight-only change
//     is exactly one MODIFY);
//  3. OFPFC_ADD of missing or different slot flows of UDP services hashed per flow (table 7,
//     udpflow.go) — before the hash flow that leads to them, so a service that turns to
//     per-flow hashing never hashes a new flow into a slot the switch does not hold yet;
//  4. OFPFC_ADD of every other missing or different flow (an ADD with the same table,
//     priority and match replaces the entry in place, so traffic never sees a gap);
//  5. OFPFC_DELETE_STRICT of our flows that are no longer wanted, by table, priority, match
//     and exact cookie — never a flow whose cookie lacks CookieMagic, nor a learned one;
//  6. OFPGC_DELETE of groups no longer wanted, after the flows that used them are gone.
//
// current should come from DecodeFlowStats of an OwnFlowsRequest and from DecodeGroupDesc
// filtered to the group ids the controller owns (State.FilterGroups): group ids carry no
// cookie, so Plan deletes every group in current that desired lacks.
func Plan(desired, current State) [][]ofswitch.Message {
	curGroups := make(map[uint32]Group, len(current.Groups))
	for _, g := range current.Groups {
		curGroups[g.ID] = g
	}
	wantGroups := make(map[uint32]bool, len(desired.Groups))
	var addGroups, modGroups, delGroups []ofswitch.Message
	for _, g := range desired.Groups {
		wantGroups[g.ID] = true
		cur, ok := curGroups[g.ID]
		switch {
		case !ok:
			addGroups = append(addGroups, groupMessage(ofp.GroupAdd, g))
		case !cur.Equal(g):
			modGroups = append(modGroups, groupMessage(ofp.GroupModify, g))
		}
	}
	for _, g := range current.Groups {
		if !wantGroups[g.ID] {
			delGroups = append(delGroups, groupMessage(ofp.GroupDelete, Group{ID: g.ID, Type: g.Type}))
			wantGroups[g.ID] = true // a duplicate in current is deleted once
		}
	}

	// One map, sized up front: Plan runs per switch per change, and growing maps of flow
	// keys was most of a fleet's planning time (docs/benchmarks.md, "Fleet").
	curFlows := make(map[flowKey]int, len(current.Flows)) // key -> index of its last entry
	for i, f := range current.Flows {
		curFlows[f.key()] = i
	}
	wanted := make([]bool, len(current.Flows))
	var addSlots, addFlows, delFlows []ofswitch.Message
	for _, f := range desired.Flows {
		i, ok := curFlows[f.key()]
		if ok {
			wanted[i] = true
		}
		if !ok || current.Flows[i] != f {
			if f.Table == TableUDPSlot || f.Table == TableAffinityCount {
				// Flows others lead to go first: a table-5 flow recirculating to table 8
				// must find table 8's flows there (an upgrade adds both at once).
				addSlots = append(addSlots, flowMessage(ofp.FlowAdd, f))
			} else {
				addFlows = append(addFlows, flowMessage(ofp.FlowAdd, f))
			}
		}
	}
	for _, f := range current.Flows {
		// A duplicate of a wanted key is not deleted: a strict delete would remove the wanted
		// flow with it (the add above replaces both).
		if wanted[curFlows[f.key()]] {
			continue
		}
		if _, _, _, ours := ParseCookie(f.Cookie); !ours || IsLearned(f) {
			continue // another's flow, or one the switch learned (affinity.go)
		}
		delFlows = append(delFlows, flowMessage(ofp.FlowDeleteStrict, f))
	}

	var stages [][]ofswitch.Message
	for _, s := range [][]ofswitch.Message{addGroups, modGroups, addSlots, addFlows, delFlows, delGroups} {
		if len(s) > 0 {
			stages = append(stages, s)
		}
	}
	return stages
}

// Renewals returns the OFPFC_ADD of every leased flow of ours in current (reactive
// dispatch's flow to the controller, KindDispatch with its hard timeout), which renews it on
// the switch; nil when there is none. It is sent by the switch's leading syncer every
// LeaseRefresh, as one stage with its barrier, and changes nothing else: the add replaces the
// flow with itself. Chosen by kind, not by any hard timeout, so a flow someone else gave a
// timeout is never renewed as a lease.
func Renewals(current State) []ofswitch.Message {
	var out []ofswitch.Message
	for _, f := range current.Flows {
		if _, _, kind, ours := ParseCookie(f.Cookie); ours && kind == KindDispatch && f.HardTimeout == DispatchLease {
			out = append(out, flowMessage(ofp.FlowAdd, f))
		}
	}
	return out
}

var groupVerb = map[ofp.GroupCommand]string{ofp.GroupAdd: "add", ofp.GroupModify: "modify", ofp.GroupDelete: "delete"}

func groupMessage(cmd ofp.GroupCommand, g Group) ofswitch.Message {
	desc := fmt.Sprintf("group %d %s", g.ID, groupVerb[cmd])
	if cmd != ofp.GroupDelete {
		w := weightsOf(g)
		if len(w) > 8 && slices.Min(w) == slices.Max(w) {
			desc += fmt.Sprintf(" (%d buckets of weight %d)", len(w), w[0]) // the per-slot layout
		} else {
			desc += fmt.Sprintf(" (%d buckets, weights %v)", len(w), w)
		}
	}
	return ofswitch.Message{Type: of.TypeGroupMod, Body: &ofwire.GroupMod{Command: cmd, Group: g}, Desc: desc}
}

func weightsOf(g Group) []uint16 {
	w := make([]uint16, len(g.Buckets))
	for i, b := range g.Buckets {
		w[i] = b.Weight
	}
	return w
}

func flowMessage(cmd ofp.FlowModCommand, f Flow) ofswitch.Message {
	verb, mask := "add", uint64(0)
	if cmd == ofp.FlowDeleteStrict {
		verb, mask = "delete", ^uint64(0)
	}
	return ofswitch.Message{
		Type: of.TypeFlowMod,
		Body: flowMod(cmd, f, mask),
		Desc: fmt.Sprintf("flow %s table=%d priority=%d %s", verb, f.Table, f.Priority, describeCookie(f.Cookie)),
	}
}
