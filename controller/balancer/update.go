package balancer

import (
	"context"
	"maps"
	"slices"
	"time"

	"flowweight/collector"
	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/controller/switchsync"
	"flowweight/controller/view"
	"flowweight/weights"
)

// Kicked updates (a state change, a learned MAC, a connect) run at once, but spaced: the next
// one starts no sooner than minKickGap, and no sooner than kickShare−1 times the last one's
// duration, after the last one ended. Kicks in between coalesce into one. So a flood of kicks
// (a probe flapping its health or drain flag with every report, thousands a second) costs the
// loop at most 1/kickShare of its time, whatever the pool's size, and a lone kick is not
// delayed at all.
const (
	minKickGap = 10 * time.Millisecond
	kickShare  = 5
)

// updateLoop recomputes weights every update period (or when kicked) and hands the result to
// every switch's syncer.
func (b *Balancer) updateLoop(ctx context.Context) {
	t := time.NewTicker(b.Config().Controller.UpdatePeriod)
	defer t.Stop()
	period := b.Config().Controller.UpdatePeriod
	var (
		notBefore time.Time        // the earliest start of the next kicked update
		held      *time.Timer      // a kick waiting for notBefore
		heldC     <-chan time.Time // held's channel; nil when no kick waits
	)
	defer func() {
		if held != nil {
			held.Stop()
		}
	}()
	kicked := func() {
		if heldC != nil { // this update serves the held kick too
			held.Stop()
			heldC = nil
		}
		start := time.Now()
		b.update(ctx, false)
		end := time.Now()
		notBefore = end.Add(max(minKickGap, (kickShare-1)*end.Sub(start)))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.update(ctx, true)
			if b.st.due() {
				b.saveState()
			}
		case <-b.kick:
			if wait := time.Until(notBefore); wait > 0 {
				if heldC == nil { // else a held kick already stands for this one
					held = time.NewTimer(wait)
					heldC = held.C
				}
				continue
			}
			kicked()
		case <-heldC:
			heldC = nil
			kicked()
		}
		if p := b.Config().Controller.UpdatePeriod; p != period {
			period = p
			t.Reset(p)
		}
	}
}

// update is one cycle: state → weights → one immutable intent, offered to every syncer.
// periodic is false for a kick (a learned MAC, a connect, a state change): those replan with
// fresh health but do not count as a sampling period, so the learned capacity and damping
// move once per period only. update never waits on a switch.
func (b *Balancer) update(_ context.Context, periodic bool) {
	start := time.Now()
	defer func() { b.metrics.updateSeconds.Observe(time.Since(start).Seconds()) }()
	// The snapshot's buffer is reused, one update at a time: a fresh 10,000-state copy each
	// period was most of an update's garbage (BenchmarkUpdate).
	b.updating.Lock()
	defer b.updating.Unlock()
	b.snap = b.pool.Snapshot(b.snap[:0])
	snap := b.snap
	states := make(map[string]*collector.State, len(snap))
	for i := range snap {
		states[snap[i].Name] = &snap[i]
	}
	b.mu.Lock()
	syncers := sortedSyncers(b.switches)
	if periodic {
		statuses := make([]*switchsync.Status, len(syncers))
		for i, sy := range syncers {
			statuses[i] = sy.Status()
		}
		rate := switchsync.Throughput(statuses, b.now(), 2*b.cfg.Controller.UpdatePeriod)
		for _, s := range b.services {
			s.measureThroughput(rate)
		}
	}
	standby := !leading(b.lead)
	takeSeeds(b.services, syncers, standby, b.cfg.Controller.TLSCA != "" && b.cfg.Controller.TLSNamesDPID, &b.st)
	unread := false // a connected switch not read back yet: its seeds may still come
	for _, sy := range syncers {
		if !sy.Status().Known {
			unread = true
		}
	}
	dirty := !periodic || b.dirty
	b.dirty = false
	period := b.cfg.Weighting.InFlightPeriod
	starting := b.now().Before(b.startupUntil)
	for _, s := range b.services {
		wasHeld := s.hold
		s.hold = starting && (s.anyUnknown(states) || (s.applied == nil && s.seed == nil && unread))
		if s.hold != wasHeld {
			dirty = true
		}
		if standby && s.seed != nil {
			// A standby follows the switch: what the leader wrote is what it would have
			// applied, so at a takeover it moves only by what its own damping allows.
			s.applied = nil
		}
		if !s.hold && s.applied == nil && !standby {
			noteSeed(b.log, s, b.st.weightsFrom)
		}
		if !s.hold && s.applied == nil && s.seed != nil {
			s.adoptSeed()
		}
		apply := s.compute(states, periodic)
		if s.canaryMoved {
			dirty = true
		}
		s.noteClamps(b.now(), b.log, b.metrics)
		if apply {
			s.applied = s.result.Weights(s.applied[:0])
			dirty = true
			b.st.applied()
		}
		// The fast loop's correction of the new weights, from the same snapshot, so the
		// switches never see the slow weights alone while it runs (follow.go).
		if s.follows(standby) && period > 0 {
			if s.follow(s.inFlightFromStates(states, b.now(), inFlightMaxAge(period)), b.now()) {
				dirty = true
			}
		} else if s.unfollow() {
			dirty = true
		}
		b.metrics.observeService(s)
		if periodic {
			now := b.now()
			for j, e := range s.result.Backends {
				w := e.Weight
				if out := s.out(); out != nil {
					w = out[j]
				}
				b.hist.Add(s.cfg.Name+"/"+e.Name, view.Point{Time: now, Weight: w, AL: e.AL})
			}
		}
	}
	b.seq++
	if dirty {
		b.gen++
	}
	in := b.intentLocked(standby)
	in.ReadCounters = periodic && b.cfg.Collector.ThroughputFrom == "switch"
	// Half a period: the rates are read well before the next update uses them.
	in.CounterSpread = b.cfg.Controller.UpdatePeriod / 2
	b.latest.Store(in)
	b.board.Publish(snapshotOf(b.services, in))
	b.mu.Unlock()

	for _, sy := range syncers {
		sy.Offer(in)
	}
	b.nb.Expire() // close the ARP rounds due (a timer does too, between updates)
}

// sortedSyncers lists the registry's syncers by datapath id (under b.mu).
func sortedSyncers(switches map[uint64]*switchsync.Syncer) []*switchsync.Syncer {
	out := make([]*switchsync.Syncer, 0, len(switches))
	for _, dpid := range slices.Sorted(maps.Keys(switches)) {
		out = append(out, switches[dpid])
	}
	return out
}

// intentLocked builds the intent of the running state (services, applied weights, holds)
// at the current seq and gen. b.mu must be held. The result shares nothing mutable with the
// balancer.
func (b *Balancer) intentLocked(standby bool) *intent.Intent {
	for _, s := range b.services {
		b.owned[uint32(s.cfg.GroupID)] = true
	}
	in := &intent.Intent{Seq: b.seq, Gen: b.gen, Owned: maps.Clone(b.owned), Normal: b.cfg.Controller.Normal,
		BarrierTimeout: b.cfg.Controller.BarrierTimeout, ReadbackPeriod: b.cfg.Controller.ReadbackPeriod,
		Services: make([]intent.Service, 0, len(b.services))}
	for _, s := range b.services {
		is := intent.Service{Service: dataplane.Service{Name: s.cfg.Name, Index: s.index, VIP: s.cfg.ParsedVIP(),
			VIPMAC: vipMAC(&s.cfg), Protocol: s.cfg.Protocol, Port: uint16(s.cfg.Port), Mode: dataplane.Mode(s.cfg.Mode),
			GroupID: uint32(s.cfg.GroupID), Zone: uint16(s.cfg.Zone), AffinityTimeout: uint16(s.cfg.AffinityTimeout / time.Second),
			Dispatch: dataplane.Dispatch(s.cfg.Dispatch), UDPHash: dataplane.UDPHash(s.cfg.UDPHash)},
			Held: s.hold, WantSeed: standby || (s.hold && s.applied == nil && s.seed == nil), Datapaths: s.cfg.ParsedDatapaths(),
			Canary: s.cfg.ParsedCanary(), CorrectShare: s.cfg.ShareCorrection != "off"}
		if s.shadow != nil && is.Canary != nil && s.shadow.held != nil {
			is.CanaryWeights = slices.Clone(s.shadow.held)
		}
		is.Backends = make([]dataplane.Backend, len(s.cfg.Backends))
		for j, be := range s.cfg.Backends {
			db := dataplane.Backend{Name: be.Name, Index: uint16(j), IP: be.ParsedIP(), Port: uint16(be.Port),
				MAC: be.ParsedMAC(), SwitchPort: uint32(be.SwitchPort)}
			if out := s.out(); out != nil {
				db.Weight = out[j]
			}
			db.OutOfService = db.Weight == 0 && j < len(s.in) && outOfService(s.in[j].Status)
			is.Backends[j] = db
		}
		in.Services = append(in.Services, is)
	}
	return in.Build()
}

// outOfService: a backend in this state gets weight 0 whatever the weights say (drained,
// down, stale), and its clients' affinities end (dataplane.Backend.OutOfService).
func outOfService(st weights.Status) bool {
	return st == weights.StatusDrained || st == weights.StatusDown || st == weights.StatusStale
}
