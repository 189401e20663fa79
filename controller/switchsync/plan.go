package switchsync

import (
	"net/netip"
	"slices"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/controller/ofswitch"
)

// Locator finds a backend on one switch: what that switch taught the controller.
type Locator func(ip netip.Addr) (dataplane.Location, bool)

// Desired is the state one switch should hold for in: the services placed on it, their
// backends located by the config or else by locate. It returns the planner's input too, for
// the layout notes, the views and the seeds.
func Desired(in *intent.Intent, dpid uint64, ovs dataplane.OVSVersion, locate Locator) (dataplane.State, []dataplane.Service) {
	svcs := Located(in, dpid, locate)
	return dataplane.Desired(svcs, Options(in, ovs)), svcs
}

// Located is the planner's input for one switch: the services of in placed on dpid, their
// backends located by the config or else by locate. The intent is not modified.
func Located(in *intent.Intent, dpid uint64, locate Locator) []dataplane.Service {
	placed := in.On(dpid)
	svcs := make([]dataplane.Service, 0, len(placed))
	for _, s := range placed {
		ds := s.Service
		ds.Backends = make([]dataplane.Backend, len(s.Backends))
		canary := s.CanaryOn(dpid)
		for j, db := range s.Backends {
			if canary && !db.OutOfService {
				db.Weight = s.CanaryWeights[j]
			}
			if locate != nil && (db.MAC == nil || db.SwitchPort == 0) {
				if loc, ok := locate(db.IP); ok {
					if db.MAC == nil {
						db.MAC = loc.MAC
					}
					if db.SwitchPort == 0 {
						db.SwitchPort = loc.Port
					}
				}
			}
			ds.Backends[j] = db
		}
		svcs = append(svcs, ds)
	}
	return svcs
}

// Options are the planner's options for a switch of version ovs.
func Options(in *intent.Intent, ovs dataplane.OVSVersion) dataplane.Options {
	return dataplane.Options{Normal: in.Normal, OVS: ovs}
}

// Hold keeps each held service's group exactly as the switch holds it (intent.Service.Held):
// a restarted controller has no reports yet, and rewriting the group from an empty picture
// (all unknown: panic weights; then whoever reports first: everything) would move traffic for
// no reason, and in stateless mode re-hash live connections. A UDP service hashed per flow
// keeps its slot flows the same way (the group is then unused). With no such group or slot
// flows on the switch (a cold start) there is nothing to hold.
func Hold(desired, current dataplane.State, in *intent.Intent) dataplane.State {
	held := map[uint32]bool{}
	heldIdx := map[uint16]bool{}
	for i := range in.Services {
		if in.Services[i].Held {
			held[in.Services[i].GroupID] = true
			heldIdx[in.Services[i].Index] = true
		}
	}
	if len(held) == 0 {
		return desired
	}
	desired = holdSlotFlows(desired, current, heldIdx)
	cur := make(map[uint32]dataplane.Group, len(current.Groups))
	for _, g := range current.Groups {
		cur[g.ID] = g
	}
	out := dataplane.State{Flows: desired.Flows, Groups: make([]dataplane.Group, len(desired.Groups))}
	for i, g := range desired.Groups {
		if c, ok := cur[g.ID]; ok && held[g.ID] && len(c.Buckets) > 0 {
			g = c
		}
		out.Groups[i] = g
	}
	return out
}

// holdSlotFlows replaces the slot flows (dataplane.KindUDPSlot) of each held service that
// has some on the switch by the switch's own.
func holdSlotFlows(desired, current dataplane.State, held map[uint16]bool) dataplane.State {
	onSwitch := map[uint16][]dataplane.Flow{}
	for _, f := range current.Flows {
		if svc, _, k, ok := dataplane.ParseCookie(f.Cookie); ok && k == dataplane.KindUDPSlot && held[svc] {
			onSwitch[svc] = append(onSwitch[svc], f)
		}
	}
	if len(onSwitch) == 0 {
		return desired
	}
	out := dataplane.State{Groups: desired.Groups, Flows: make([]dataplane.Flow, 0, len(desired.Flows))}
	for _, f := range desired.Flows {
		if svc, _, k, ok := dataplane.ParseCookie(f.Cookie); ok && k == dataplane.KindUDPSlot && onSwitch[svc] != nil {
			continue
		}
		out.Flows = append(out.Flows, f)
	}
	for _, fs := range onSwitch {
		out.Flows = append(out.Flows, fs...)
	}
	return out.Canonical()
}

// Seeds reads, for each service of in that wants a seed, the weights current (a read-back of
// the switch dpid) holds for its group, in config order, by service name. svcs is Desired's
// planner input for the same switch: a bucket is matched to a located backend by its actions.
// A canary switch of a service (canary_datapaths) holds the shadow policy's weights, not the
// live ones, so it offers no seed for that service.
func Seeds(in *intent.Intent, dpid uint64, svcs []dataplane.Service, current dataplane.State) map[string][]uint16 {
	want := map[string]bool{}
	for i := range in.Services {
		if in.Services[i].WantSeed && !slices.Contains(in.Services[i].Canary, dpid) {
			want[in.Services[i].Name] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	groups := make(map[uint32]dataplane.Group, len(current.Groups))
	for _, g := range current.Groups {
		groups[g.ID] = g
	}
	out := map[string][]uint16{}
	for _, s := range svcs {
		if !want[s.Name] {
			continue
		}
		if g, ok := groups[s.GroupID]; ok {
			if w, ok := dataplane.HeldWeights(s, g); ok {
				out[s.Name] = w
			}
		}
	}
	return out
}

// Counts are one read of a switch's per-flow byte counters, by cookie.
type Counts struct {
	At    int64 // Unix nanoseconds
	Bytes map[uint64]uint64
}

// Rates turns two reads into bytes per second per cookie. A counter that went backwards (a
// flow re-added) or is missing from either read has no rate.
func Rates(prev, cur Counts) map[uint64]float64 {
	if prev.Bytes == nil || cur.At <= prev.At {
		return nil
	}
	dt := float64(cur.At-prev.At) / 1e9
	out := make(map[uint64]float64, len(cur.Bytes))
	for cookie, v := range cur.Bytes {
		if old, ok := prev.Bytes[cookie]; ok && v >= old {
			out[cookie] = float64(v-old) / dt
		}
	}
	return out
}

// weightsOf returns each service's backend weights by name, to tell a rewrite of weights
// from a repair.
func weightsOf(svcs []dataplane.Service) map[string][]uint16 {
	out := make(map[string][]uint16, len(svcs))
	for _, s := range svcs {
		w := make([]uint16, len(s.Backends))
		for j, b := range s.Backends {
			w[j] = b.Weight
		}
		out[s.Name] = w
	}
	return out
}

// AffinityEnds are the deletes that end client affinities (dataplane.AffinityDelete) for the
// change from prev, the planner input last applied to the switch (nil: nothing applied since
// the syncer started, so nothing is known to be clean), to svcs:
//
//   - a backend of an affinity service that is out of service (drained, down, stale) now and
//     was not in prev (or prev is nil);
//   - a backend of an affinity service in prev that is gone from it now;
//   - every backend of a service that had affinity in prev and no longer has it (or is gone).
//
// Nothing else: a reweight, even to 0, keeps affinities. (A backend that merely loses its
// bucket loses its table-5 flow, so its clients are not sent to it meanwhile.) Services and
// backends are matched by name; the cookie carries the index prev had.
func AffinityEnds(prev, svcs []dataplane.Service) []ofswitch.Message {
	// Only a service with affinity, before or now, can end one. Most have none, and this
	// runs for every switch at every step: indexing every backend of every service cost a
	// sixth of the fleet benchmark's CPU per weight change.
	sticky := map[string]bool{}
	for _, s := range svcs {
		if s.AffinityTimeout != 0 {
			sticky[s.Name] = true
		}
	}
	for _, s := range prev {
		if s.AffinityTimeout != 0 {
			sticky[s.Name] = true
		}
	}
	if len(sticky) == 0 {
		return nil
	}
	type key struct{ svc, backend string }
	was := map[key]dataplane.Backend{}
	for _, s := range prev {
		if !sticky[s.Name] {
			continue
		}
		for _, b := range s.Backends {
			was[key{s.Name, b.Name}] = b
		}
	}
	var out []ofswitch.Message
	now := map[key]bool{}
	nowSvc := map[string]dataplane.Service{}
	for _, s := range svcs {
		if !sticky[s.Name] {
			continue
		}
		nowSvc[s.Name] = s
		for _, b := range s.Backends {
			now[key{s.Name, b.Name}] = true
			if s.AffinityTimeout == 0 || !b.OutOfService {
				continue
			}
			if pb, ok := was[key{s.Name, b.Name}]; prev == nil || !ok || !pb.OutOfService {
				out = append(out, dataplane.AffinityDelete(s.Index, b.Index))
			}
		}
	}
	for _, s := range prev {
		if s.AffinityTimeout == 0 {
			continue
		}
		cur, ok := nowSvc[s.Name]
		whole := !ok || cur.AffinityTimeout == 0
		for _, b := range s.Backends {
			if whole || !now[key{s.Name, b.Name}] {
				out = append(out, dataplane.AffinityDelete(s.Index, b.Index))
			}
		}
	}
	return out
}

// Throughput sums, per flow cookie, the byte rates the switches measured (Status.Rates). A
// switch's rates older than maxAge at now are not counted: that switch stopped answering,
// and its last rate is not today's.
func Throughput(statuses []*Status, now time.Time, maxAge time.Duration) map[uint64]float64 {
	rate := map[uint64]float64{}
	for _, st := range statuses {
		if st.RatesAt.IsZero() || now.Sub(st.RatesAt) > maxAge {
			continue
		}
		for cookie, r := range st.Rates {
			rate[cookie] += r
		}
	}
	return rate
}
