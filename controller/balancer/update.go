package balancer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"flowweight/collector"
	"flowweight/controller/arp"
	"flowweight/controller/dataplane"
	"flowweight/controller/ofswitch"

	"github.com/netrack/openflow/ofp"
)

// updateLoop recomputes weights every update period (or when kicked) and brings every switch
// to the desired state.
func (b *Balancer) updateLoop(ctx context.Context) {
	t := time.NewTicker(b.Config().Controller.UpdatePeriod)
	defer t.Stop()
	period := b.Config().Controller.UpdatePeriod
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.update(ctx, true)
			b.maybeSaveState()
		case <-b.kick:
			b.update(ctx, false)
		}
		if p := b.Config().Controller.UpdatePeriod; p != period {
			period = p
			t.Reset(p)
		}
	}
}

// update is one cycle. recompute is false for a kick (a learned MAC, a connect, a state
// change): those replan with fresh health but do not count as a sampling period, so the
// learned capacity and damping move once per period only.
func (b *Balancer) update(ctx context.Context, periodic bool) {
	snap := b.pool.Snapshot(nil)
	states := make(map[string]*collector.State, len(snap))
	for i := range snap {
		states[snap[i].Name] = &snap[i]
	}
	var counts []switchCounts
	if periodic {
		counts = b.readCounters(ctx)
	}
	b.mu.Lock()
	if periodic {
		b.measureThroughputLocked(counts)
	}
	changed := map[string][2][]uint16{}
	for _, s := range b.services {
		var before []uint16
		if s.applied != nil {
			before = append(before, s.applied...)
		}
		learned := make([]book, len(s.books))
		copy(learned, s.books)
		s.hold = b.now().Sub(b.started) < b.cfg.Collector.StaleAfter && s.anyUnknown(states)
		if !s.hold && s.applied == nil && s.seed != nil {
			s.adoptSeed()
		}
		worth := s.compute(states)
		b.noteClamps(s)
		apply := worth && !s.hold
		if !periodic {
			// A kick must not advance learning; only statuses matter here. The shares move
			// only when the kick's result is written: the switch then holds them, and the
			// next period's damping and step limit must start from what it holds. Restoring
			// them after a write made that period repeat the kick's step (a wasted period,
			// and an intermediate vector that looked settled).
			for j := range s.books {
				prev := s.books[j].prevShare
				s.books[j] = learned[j]
				if apply {
					s.books[j].prevShare = prev
				}
			}
		}
		if apply {
			s.applied = s.result.Weights(s.applied[:0])
			changed[s.cfg.Name] = [2][]uint16{before, append([]uint16(nil), s.applied...)}
		}
		b.metrics.observeService(s)
		if periodic {
			now := b.now()
			for j, e := range s.result.Backends {
				w := e.Weight
				if s.applied != nil {
					w = s.applied[j]
				}
				b.hist.add(s.cfg.Name+"/"+e.Name, Point{Time: now, Weight: w, AL: e.AL})
			}
		}
	}
	switches := make([]*switchState, 0, len(b.switches))
	for _, st := range b.switches {
		switches = append(switches, st)
	}
	b.mu.Unlock()

	for _, st := range switches {
		b.sync(ctx, st, changed)
	}
	b.resolveBackends(ctx, switches)
}

// desiredFor builds the planner's input for one switch: applied weights, and each backend's
// MAC and port from the config or from what this switch taught us.
func (b *Balancer) desiredFor(dpid uint64) (dataplane.State, []dataplane.Service) {
	b.mu.Lock()
	defer b.mu.Unlock()
	svcs := make([]dataplane.Service, 0, len(b.services))
	for _, s := range b.services {
		ds := dataplane.Service{Name: s.cfg.Name, Index: s.index, VIP: s.cfg.ParsedVIP(), VIPMAC: vipMAC(&s.cfg),
			Protocol: s.cfg.Protocol, Port: uint16(s.cfg.Port), Mode: dataplane.Mode(s.cfg.Mode),
			GroupID: uint32(s.cfg.GroupID), Zone: uint16(s.cfg.Zone)}
		for j, be := range s.cfg.Backends {
			db := dataplane.Backend{Name: be.Name, Index: uint16(j), IP: be.ParsedIP(), Port: uint16(be.Port),
				MAC: be.ParsedMAC(), SwitchPort: uint32(be.SwitchPort)}
			if s.applied != nil {
				db.Weight = s.applied[j]
			}
			if loc, _, ok := b.arpl.Usable(dpid, db.IP); ok {
				if db.MAC == nil {
					db.MAC = loc.MAC
				}
				if db.SwitchPort == 0 {
					db.SwitchPort = loc.Port
				}
			}
			ds.Backends = append(ds.Backends, db)
		}
		svcs = append(svcs, ds)
	}
	opt := b.optionsLocked(dpid)
	b.noteLayoutsLocked(svcs, opt)
	return dataplane.Desired(svcs, opt), svcs
}

// sync brings one switch to the desired state: read back first when we do not know what it
// holds, then plan, apply stage by stage with barriers, and record the result.
func (b *Balancer) sync(ctx context.Context, st *switchState, changed map[string][2][]uint16) {
	st.mu.Lock()
	defer st.mu.Unlock()
	b.syncLocked(ctx, st, changed)
}

func (b *Balancer) syncLocked(ctx context.Context, st *switchState, changed map[string][2][]uint16) {
	dpid := st.sw.DatapathID()
	if st.resync || !st.known {
		cur, err := b.readBack(ctx, st.sw)
		if err != nil {
			b.log.Warn("read-back failed", "dpid", st.sw.String(), "err", err)
			b.metrics.rewriteErrors.Inc()
			return
		}
		st.current, st.known, st.resync = cur, true, false
		b.adoptLocations(dpid, cur)
	}
	desired, svcs := b.desiredFor(dpid)
	b.seedFromSwitch(svcs, st.current)
	desired = b.holdGroups(desired, st.current)
	desired = dataplane.KeepSlots(desired, st.current) // stateless: move only the slots that must
	plan := dataplane.Plan(desired, st.current)
	if len(plan) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*b.Config().Controller.BarrierTimeout*time.Duration(len(plan)+1))
	defer cancel()
	start := time.Now()
	res, err := st.sw.Apply(cctx, plan...)
	elapsed := time.Since(start)
	n := 0
	for _, stage := range plan {
		n += len(stage)
	}
	if err != nil {
		// Part of the plan may have been applied: read back before planning again.
		st.resync = true
		b.metrics.rewriteErrors.Inc()
		b.events.add(Event{Time: b.now(), Kind: "error", Text: fmt.Sprintf("switch %s: rewrite failed: %v", st.sw, err)})
		b.log.Error("rewrite failed; will resync", "dpid", st.sw.String(), "messages", n, "err", err)
		return
	}
	st.current, st.lastApply, st.lastRTT = desired, b.now(), elapsed
	for _, d := range res.BarrierRTT {
		b.metrics.barrierRTT.Observe(d.Seconds())
	}
	b.metrics.rewrites.Inc()
	for name, ch := range changed {
		b.log.Info("weights rewritten", "dpid", st.sw.String(), "service", name, "weights", describeChange(b.backendNames(name), ch[0], ch[1]),
			"messages", n, "barrier_rtt", elapsed.Round(time.Microsecond).String())
		b.events.add(Event{Time: b.now(), Kind: "rewrite", Service: name,
			Text: fmt.Sprintf("switch %s: %s (barrier %s)", st.sw, describeChange(b.backendNames(name), ch[0], ch[1]), elapsed.Round(time.Microsecond))})
	}
	if len(changed) == 0 {
		b.log.Info("switch state repaired", "dpid", st.sw.String(), "messages", n, "barrier_rtt", elapsed.Round(time.Microsecond).String())
	}
}

func (b *Balancer) backendNames(service string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.services {
		if s.cfg.Name == service {
			names := make([]string, len(s.cfg.Backends))
			for i, be := range s.cfg.Backends {
				names[i] = be.Name
			}
			return names
		}
	}
	return nil
}

// describeChange renders "web1 500->400, web2 500->600".
func describeChange(names []string, before, after []uint16) string {
	var sb strings.Builder
	for i, n := range names {
		if i >= len(after) {
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		if before != nil && i < len(before) {
			fmt.Fprintf(&sb, "%s %d->%d", n, before[i], after[i])
		} else {
			fmt.Fprintf(&sb, "%s %d", n, after[i])
		}
	}
	return sb.String()
}

// readBack asks the switch for its groups and for the flows carrying our cookie.
func (b *Balancer) readBack(ctx context.Context, sw *ofswitch.Switch) (dataplane.State, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*b.Config().Controller.BarrierTimeout)
	defer cancel()
	gbody, err := sw.Multipart(cctx, ofp.MultipartTypeGroupDescription, nil)
	if err != nil {
		return dataplane.State{}, fmt.Errorf("group description: %w", err)
	}
	groups, err := dataplane.DecodeGroupDesc(gbody)
	if err != nil {
		return dataplane.State{}, fmt.Errorf("group description: %w", err)
	}
	fbody, err := sw.Multipart(cctx, ofp.MultipartTypeFlow, dataplane.OwnFlowsRequest())
	if err != nil {
		return dataplane.State{}, fmt.Errorf("flow stats: %w", err)
	}
	flows, err := dataplane.DecodeFlowStats(fbody)
	if err != nil {
		return dataplane.State{}, fmt.Errorf("flow stats: %w", err)
	}
	owned := b.ownedGroups()
	return dataplane.State{Flows: flows, Groups: groups}.Canonical().FilterGroups(func(id uint32) bool { return owned[id] }), nil
}

// ownedGroups is the set of group ids this controller has configured since it started:
// groups carry no cookie, so only these may be planned (and deleted when a service goes).
func (b *Balancer) ownedGroups() map[uint32]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.services {
		b.owned[uint32(s.cfg.GroupID)] = true
	}
	return maps.Clone(b.owned)
}

// diffSummary says how two states differ, for the drift log line.
func diffSummary(want, got dataplane.State) string {
	count := func(a, b dataplane.State) (flows, groups int) {
		for _, f := range a.Flows {
			if !slices.Contains(b.Flows, f) {
				flows++
			}
		}
		for _, g := range a.Groups {
			if !slices.ContainsFunc(b.Groups, g.Equal) {
				groups++
			}
		}
		return
	}
	mf, mg := count(want, got)
	xf, xg := count(got, want)
	return fmt.Sprintf("%d flows and %d groups missing or changed, %d flows and %d groups unexpected", mf, mg, xf, xg)
}

// readbackLoop reads every switch back periodically; a difference from what we applied is
// drift (someone ran ovs-ofctl, or the switch lost state) and is repaired at once.
func (b *Balancer) readbackLoop(ctx context.Context) {
	period := b.Config().Controller.ReadbackPeriod
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		switches := make([]*switchState, 0, len(b.switches))
		for _, st := range b.switches {
			switches = append(switches, st)
		}
		b.mu.Unlock()
		for _, st := range switches {
			b.repair(ctx, st)
		}
		if p := b.Config().Controller.ReadbackPeriod; p != period {
			period = p
			t.Reset(p)
		}
	}
}

// repair reads one switch back and, when it differs from what we applied, puts it right.
func (b *Balancer) repair(ctx context.Context, st *switchState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	cur, err := b.readBack(ctx, st.sw)
	if err != nil {
		b.log.Warn("read-back failed", "dpid", st.sw.String(), "err", err)
		return
	}
	if st.known && !cur.Equal(st.current) {
		b.metrics.drift.Inc()
		b.events.add(Event{Time: b.now(), Kind: "drift", Text: "switch " + st.sw.String() + ": state differs from what was applied; repairing"})
		b.log.Warn("drift detected; repairing", "dpid", st.sw.String(), "diff", diffSummary(st.current, cur))
	}
	st.current, st.known, st.resync = cur, true, false
	b.adoptLocations(st.sw.DatapathID(), cur)
	b.syncLocked(ctx, st, nil)
}

// adoptLocations takes backends' MACs and ports from what the switch holds, for backends this
// controller has not located yet: after a restart the learned table is empty, and planning
// without it would delete every backend's forwarding flows until ARP answers again. They are
// our own earlier writes: usable at once but only "adopted", so resolveBackends re-checks
// them, and moving away from one needs the same re-confirmation as a confirmed location
// (controller/arp's package doc).
func (b *Balancer) adoptLocations(dpid uint64, cur dataplane.State) {
	locs := dataplane.Locations(cur)
	if len(locs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.services {
		for _, be := range s.cfg.Backends {
			ip := be.ParsedIP()
			if loc, ok := locs[ip]; ok {
				b.arpl.Adopt(dpid, ip, arp.Location{MAC: loc.MAC, Port: loc.Port})
			}
		}
	}
}

// seedFromSwitch records, for each service in its start-up hold that has written nothing yet,
// the weights this switch holds for its group (service.adoptSeed uses them when the hold
// ends). The first switch read back wins: with several switches they hold the same weights
// unless one drifted, and any of them is a better start than none.
func (b *Balancer) seedFromSwitch(svcs []dataplane.Service, current dataplane.State) {
	groups := make(map[uint32]dataplane.Group, len(current.Groups))
	for _, g := range current.Groups {
		groups[g.ID] = g
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, s := range b.services {
		if !s.hold || s.applied != nil || s.seed != nil || i >= len(svcs) || svcs[i].Name != s.cfg.Name {
			continue
		}
		if g, ok := groups[uint32(s.cfg.GroupID)]; ok {
			if w, ok := dataplane.HeldWeights(svcs[i], g); ok {
				s.seed = w
			}
		}
	}
}

// holdGroups keeps a service's group exactly as the switch holds it while the service is in
// its start-up hold (see service.hold): a restarted controller has no reports yet, and
// rewriting the group from an empty picture (all unknown: panic weights; then whoever reports
// first: everything) would move traffic for no reason, and in stateless mode re-hash live
// connections.
func (b *Balancer) holdGroups(desired, current dataplane.State) dataplane.State {
	b.mu.Lock()
	held := map[uint32]bool{}
	for _, s := range b.services {
		if s.hold {
			held[uint32(s.cfg.GroupID)] = true
		}
	}
	b.mu.Unlock()
	if len(held) == 0 {
		return desired
	}
	cur := map[uint32]dataplane.Group{}
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

var _ ofswitch.Handler = (*Balancer)(nil)
