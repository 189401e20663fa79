package dataplane

import (
	"fmt"
	"slices"

	"flowweight/controller/ofwire"
	"flowweight/internal/slots"
)

// How computed weights become buckets (docs/dataplane.md, "Exact shares"). The controller
// apportions the switch's whole slot table itself — N = 256 slots on Open vSwitch 2.17 and
// later, 64 on older or unknown switches (LayoutSlots) — and writes bucket weights that make
// Open vSwitch build exactly that table, so the realised split is the computed one to 1/N:
//
//   - conntrack mode, one bucket per live backend whose weight is its slot count, plus at
//     most one bucket of weight 1 that fixes the table's size (slots.Weighted); the counts
//     (slots.Apportion) sum to N.
//   - stateless mode, N buckets of weight 1: Webster then maps slot i to bucket i, so the
//     controller decides each slot's backend, and KeepSlots keeps every slot whose backend
//     still has room when shares change — the fewest slots move, and connections hashed to
//     the others keep their backend. If N buckets would not fit one 64 KiB GROUP_MOD the
//     stateless group uses the conntrack-style layout instead.

// bucketPlan is one planned bucket: the backend it sends to and its weight.
type bucketPlan struct {
	backend int // position in the service's live list
	weight  uint16
}

// GroupLayout is how one service's group divides the slot table among its backends.
type GroupLayout struct {
	// N is the table size the buckets were laid out for (LayoutSlots of the switch), or
	// UDPSlots for a UDP service hashed per flow.
	N int
	// UDPHash says how a UDP service's new flows are hashed (empty for TCP and reactive
	// dispatch): UDPPerFlow into a table of flows the controller writes (udpflow.go; Table
	// is that table), or UDPPerAddress by the group.
	UDPHash UDPHash
	// Table is the slot table Open vSwitch builds for the buckets (slots.OVS).
	Table slots.Table
	// Backends lists the live backends (reachable, weight > 0) in Index order. With more live
	// backends than slots some have Slots 0 and no bucket.
	Backends []BackendSlots
	// Notes say where the split differs from the computed one by more than rounding: a
	// backend lifted to one slot, backends left without a slot. The controller logs a note when
	// its Key appears.
	Notes []Note
}

// Note is one remark on a layout. Key names the condition without the figures ("SERVICE
// backend NAME lifted", "SERVICE starved"), so a caller can log it when it appears rather
// than every time the shares move a little.
type Note struct {
	Key  string
	Text string
}

// BackendSlots is one backend's part of its group's slot table.
type BackendSlots struct {
	Index  uint16
	Name   string
	Weight uint16 // the computed weight
	Slots  int    // slots of the switch's table (Table.NHash) that send to it
}

// Computed is the backend's computed share of its group's live weight, in [0, 1].
func (l GroupLayout) Computed(i int) float64 {
	total := 0
	for _, b := range l.Backends {
		total += int(b.Weight)
	}
	if total == 0 {
		return 0
	}
	return float64(l.Backends[i].Weight) / float64(total)
}

// Realised is the backend's share of new connections: its slots over the switch's table. It
// is 0 when there is no table (Table.Fallback: the switch's per-bucket score decides, and its
// split is not proportional).
func (l GroupLayout) Realised(i int) float64 {
	if l.Table.NHash == 0 {
		return 0
	}
	return float64(l.Backends[i].Slots) / float64(l.Table.NHash)
}

// Layout returns how service s's group divides the switch's slot table, as Desired lays it
// out for opt (the switch's version in opt.OVS). The per-backend slot counts do not depend on
// the bucket actions' size, so Layout plans without them.
func Layout(s Service, opt Options) GroupLayout {
	live := liveBackends(s)
	if PerFlowUDP(s, opt) {
		return udpLayout(s, live)
	}
	buckets, n, notes := layoutBuckets(s, live, opt, nil)
	l := groupLayout(live, buckets, n, append(notes, udpPerAddressNote(s, opt)...), opt)
	if s.Protocol == "udp" && s.Dispatch != DispatchReactive {
		l.UDPHash = UDPPerAddress
	}
	return l
}

func groupLayout(live []Backend, buckets []bucketPlan, n int, notes []Note, opt Options) GroupLayout {
	w := make([]uint16, len(buckets))
	for i, b := range buckets {
		w[i] = b.weight
	}
	l := GroupLayout{N: n, Table: slots.OVS(w, opt.OVS), Notes: notes}
	for _, b := range live {
		l.Backends = append(l.Backends, BackendSlots{Index: b.Index, Name: b.Name, Weight: b.Weight})
	}
	for i, h := range l.Table.Hits {
		l.Backends[buckets[i].backend].Slots += h
	}
	return l
}

// liveBackends are the backends that get buckets, in Index order.
func liveBackends(s Service) []Backend {
	var out []Backend
	for _, b := range sortedBackends(s) {
		if b.Reachable() && b.Weight > 0 {
			out = append(out, b)
		}
	}
	return out
}

// layoutBuckets plans the buckets of s's group over its live backends; actionLen, when not
// nil, gives each live backend's bucket action length (to check the GROUP_MOD size).
func layoutBuckets(s Service, live []Backend, opt Options, actionLen func(i int) int) ([]bucketPlan, int, []Note) {
	if len(live) == 0 {
		return nil, 0, nil
	}
	n := slots.Size(opt.OVS)
	count, notes := apportionLive(s, live, n)
	perSlot := s.Mode == ModeStateless
	if perSlot && actionLen != nil {
		size := ofwire.HeaderLen + ofwire.GroupModFixedLen
		for i := range live {
			size += count[i] * (ofwire.BucketFixedLen + actionLen(i))
		}
		perSlot = size <= ofwire.MaxMessageLen
	}
	var out []bucketPlan
	if perSlot {
		for i := range live {
			for range count[i] {
				out = append(out, bucketPlan{backend: i, weight: 1})
			}
		}
		return out, n, notes
	}
	for _, b := range slots.Weighted(count) {
		out = append(out, bucketPlan{backend: b.Part, weight: b.Weight})
	}
	return out, n, notes
}

// slotNotes says where count (Apportion of n slots over the live backends) differs from
// the computed split by more than rounding: a backend lifted to one slot (plain, the split
// without the minimum, gave it none), backends left without a slot.
func slotNotes(s Service, live []Backend, count, plain []int, n int) []Note {
	total := 0
	for _, b := range live {
		total += int(b.Weight)
	}
	var notes []Note
	zero := 0
	for i, b := range live {
		exact := float64(b.Weight) / float64(total)
		switch {
		case count[i] == 0:
			zero++
		case plain[i] == 0:
			notes = append(notes, Note{Key: fmt.Sprintf("%s backend %s lifted", s.Name, b.Name),
				Text: fmt.Sprintf("service %q backend %q: computed share %.2f%% is below one slot of %d; it gets one slot (%.2f%%)",
					s.Name, b.Name, 100*exact, n, 100/float64(n))})
		}
	}
	if zero > 0 {
		worst := 0.0
		for i, b := range live {
			worst = max(worst, abs(float64(count[i])/float64(n)-float64(b.Weight)/float64(total)))
		}
		notes = append(notes, Note{Key: s.Name + " starved",
			Text: fmt.Sprintf("service %q: %d live backends for %d slots: %d get no slot; largest share error %.2f points",
				s.Name, len(live), n, zero, 100*worst)})
	}
	return notes
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// KeepSlots returns desired with the buckets of each one-slot-per-bucket group (every bucket
// of weight 1, as stateless mode lays them out) reordered to agree with the same group in
// current as far as the new counts allow: a slot keeps its bucket's action while that action
// still has slots to fill, and only the rest change, each to an action still short of slots.
// So a reweight rewrites exactly the slots that must move (the least possible), and a group
// whose per-action counts did not change is left as the switch holds it (no plan). Call it on
// Desired's result before Plan, and record its result as what the switch holds. The slot
// flows of UDP services hashed per flow are kept the same way (keepUDPSlots).
func KeepSlots(desired, current State) State {
	cur := map[uint32]Group{}
	for _, g := range current.Groups {
		cur[g.ID] = g
	}
	out := State{Flows: keepUDPSlots(desired.Flows, current.Flows), Groups: slices.Clone(desired.Groups)}
	for gi, g := range out.Groups {
		c, ok := cur[g.ID]
		if !ok || c.Type != g.Type || len(c.Buckets) != len(g.Buckets) || !unitWeights(g) || !unitWeights(c) {
			continue
		}
		need := map[string]int{}
		for _, b := range g.Buckets {
			need[b.Actions]++
		}
		buckets := make([]Bucket, len(g.Buckets))
		var open []int
		for i, b := range c.Buckets {
			if need[b.Actions] > 0 {
				need[b.Actions]--
				buckets[i] = b
			} else {
				open = append(open, i)
			}
		}
		// Fill the open slots in desired's order of actions, so the result is deterministic.
		for _, b := range g.Buckets {
			if need[b.Actions] > 0 {
				need[b.Actions]--
				buckets[open[0]] = b
				open = open[1:]
			}
		}
		out.Groups[gi] = Group{ID: g.ID, Type: g.Type, Buckets: buckets}
	}
	return out
}

func unitWeights(g Group) bool {
	for _, b := range g.Buckets {
		if b.Weight != 1 {
			return false
		}
	}
	return len(g.Buckets) > 0
}
