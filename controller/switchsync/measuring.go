package switchsync

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

// The syncer's side of the measured shares (measure.go is the computation): it reads its
// switch's group counters (OFPMP_GROUP, every group in one request) at most once per
// measureEvery, at an intent, and around a write that rewrites a group (measureAroundWrite);
// it publishes each service's window as Status.Measured.

// measureEvery is the least time between two readings: the counters of Open vSwitch's
// datapath flows reach the groups when its revalidators push them (about every 500 ms), so
// reading faster would mostly see the same numbers.
const measureEvery = time.Second

// measureState is what Run's goroutine keeps between readings.
type measureState struct {
	last   time.Time         // the last reading (zero: none)
	epochs map[uint32]uint64 // per group: rewrites made or seen
	// slotEpochs is per service index: rewrites of its counted flows made or seen (a
	// per-flow UDP service is measured by its slot flows' counters, udpSampleOf; an affinity
	// service's pinned connections by its table-8 flows', sampleOf).
	slotEpochs map[uint16]uint64
	readings   map[uint32]GroupReading      // per group: the last reading
	windows    map[string]Window            // per service
	totals     map[string]map[string]uint64 // per service per backend: every count accepted
	logged     map[uint32]string            // per group: the discard reason last logged
	// rebase: a reading was taken right before a write that rewrites groups, so the reading
	// right after it (the base of the next delta) is taken at once, whatever measureEvery
	// says.
	rebase bool
}

func newMeasureState() measureState {
	return measureState{epochs: map[uint32]uint64{}, slotEpochs: map[uint16]uint64{}, readings: map[uint32]GroupReading{}, windows: map[string]Window{},
		totals: map[string]map[string]uint64{}, logged: map[uint32]string{}}
}

// rewritten notes that the groups whose value differs between before and after changed on
// the switch (nil before: every group in after).
func (m *measureState) rewritten(before, after dataplane.State) {
	old := make(map[uint32]dataplane.Group, len(before.Groups))
	for _, g := range before.Groups {
		old[g.ID] = g
	}
	for _, g := range after.Groups {
		if o, ok := old[g.ID]; !ok || !o.Equal(g) {
			m.epochs[g.ID]++
		}
		delete(old, g.ID)
	}
	for id := range old {
		m.epochs[id]++
	}
	was, now := slotTables(before), slotTables(after)
	for idx, t := range now {
		if was[idx] != t {
			m.slotEpochs[idx]++
		}
		delete(was, idx)
	}
	for idx := range was {
		m.slotEpochs[idx]++
	}
}

// slotTables renders each service's counted per-backend flows (by service index: a per-flow
// UDP service's slot flows, an affinity service's table-8 flows) as one string, so two states'
// tables compare with ==.
func slotTables(st dataplane.State) map[uint16]string {
	var out map[uint16]string
	for _, f := range st.Flows {
		svc, _, k, ok := dataplane.ParseCookie(f.Cookie)
		if !ok || (k != dataplane.KindUDPSlot && k != dataplane.KindAffinityPinned) {
			continue
		}
		if out == nil {
			out = map[uint16]string{}
		}
		out[svc] += fmt.Sprintf("%x|%s|%s;", f.Cookie, f.Match, f.Instructions)
	}
	return out
}

// rewriteAll notes that any group may have changed (a write that failed part way).
func (m *measureState) rewriteAll(st dataplane.State) {
	m.rewritten(st, dataplane.State{})
}

// setCurrent records st as what the switch holds, noting the groups that changed.
func (s *Syncer) setCurrent(st dataplane.State) {
	s.meas.rewritten(s.current, st)
	s.current = st
}

// measureDue reports whether a reading is due: none yet, or measureEvery since the last.
func (s *Syncer) measureDue() bool {
	return s.meas.last.IsZero() || s.cfg.Now().Sub(s.meas.last) >= measureEvery
}

// measureAroundWrite reads the counters before a write that rewrites groups, when a reading is
// due, and asks for one right after it: a rewrite then loses no counts (the delta across it is
// only the write's own round trip). Rewrites more often than measureEvery (the fast loop) cost
// at most these two readings a second; the counts between a skipped reading and the write are
// lost, and the reading after the write is the next base.
func (s *Syncer) measureAroundWrite(ctx context.Context, in *intent.Intent, desired dataplane.State) {
	if s.meas.last.IsZero() || !s.measureDue() || !groupsChange(desired, s.current) {
		return
	}
	s.measure(ctx, in)
	s.meas.rebase = true
}

// measure reads the group counters and folds them into each planned service's window. A
// failed read changes nothing but the time of the next attempt (a switch that does not answer
// group stats is asked once per measureEvery, not at every intent): the next reading compares
// with the last good one.
func (s *Syncer) measure(ctx context.Context, in *intent.Intent) {
	sw := s.cfg.Conn
	s.meas.last, s.meas.rebase = s.cfg.Now(), false
	cctx, cancel := context.WithTimeout(ctx, in.BarrierTimeout)
	body, err := sw.Multipart(cctx, ofp.MultipartTypeGroup, ofwire.GroupStatsRequest{GroupID: ofwire.GroupAll})
	cancel()
	if err != nil {
		s.cfg.Logger.Debug("group counters unavailable", "dpid", sw.String(), "err", err)
		return
	}
	stats, err := ofwire.DecodeGroupStats(body)
	if err != nil {
		s.cfg.Logger.Warn("group counters", "dpid", sw.String(), "err", err)
		return
	}
	now := s.cfg.Now()
	byID := make(map[uint32]ofwire.GroupStats, len(stats))
	for _, g := range stats {
		byID[g.GroupID] = g
	}
	held := make(map[uint32]dataplane.Group, len(s.current.Groups))
	for _, g := range s.current.Groups {
		held[g.ID] = g
	}
	opt := Options(in, s.cfg.OVS)
	slots, slotsRead := s.readFlowCounters(ctx, in, dataplane.UDPSlotFlowsRequest(), "slot flow",
		func(svc dataplane.Service) bool { return dataplane.PerFlowUDP(svc, opt) })
	hits, hitsRead := s.readFlowCounters(ctx, in, dataplane.AffinityPinnedFlowsRequest(), "affinity flow", countsPinned)
	m := &s.meas
	out := make(map[string]Measured, len(s.st.Planned))
	for _, svc := range s.st.Planned {
		w, ok := m.windows[svc.Name]
		if !ok {
			w = Window{Span: MeasureWindow}
		}
		var sample *Sample
		var why string
		switch {
		case countsPinned(svc) && !hitsRead:
			delete(m.readings, svc.GroupID) // the next reading starts a delta afresh
		case countsPinned(svc):
			sample, why = s.sampleOf(svc, held, byID, hits, now)
		case !dataplane.PerFlowUDP(svc, opt):
			sample, why = s.sampleOf(svc, held, byID, nil, now)
		case slotsRead:
			sample, why = s.udpSampleOf(svc, slots, now)
		}
		switch {
		case why != "":
			w = w.Skip(now)
			s.discard(svc, why)
		case sample != nil:
			w = w.Add(*sample)
			delete(m.logged, svc.GroupID)
			tot := m.totals[svc.Name]
			if tot == nil {
				tot = map[string]uint64{}
				m.totals[svc.Name] = tot
			}
			for name, n := range sample.Counts {
				tot[name] += n
			}
		}
		m.windows[svc.Name] = w
		meas := w.Measure(UnitOf(svc.Mode))
		meas.Cumulative = cloneCounts(m.totals[svc.Name])
		out[svc.Name] = meas
	}
	for name := range m.windows { // services no longer placed here: forget them
		if _, ok := out[name]; !ok {
			delete(m.windows, name)
			delete(m.totals, name)
		}
	}
	s.st.Measured, s.st.MeasuredAt = out, now
	s.correct(in)
	s.publish()
}

// countsPinned says svc's new connections are not all placed by its group: with client
// affinity a returning client's pass its backend's table-5 and table-8 flows instead, and the
// syncer reads the table-8 flows' counters beside the group's.
func countsPinned(svc dataplane.Service) bool {
	return svc.AffinityTimeout > 0 && svc.Mode != dataplane.ModeStateless && svc.Dispatch != dataplane.DispatchReactive
}

// sampleOf turns the reading of svc's group into a sample: nil with no reason when there is
// nothing to compare with yet, nil with a reason when the delta must be discarded. For an
// affinity service (countsPinned), hits are the table-8 flows' counters read with the group's:
// one reading holds both, the pinned counts after the buckets, so a delta compares the two
// over the same interval and by the same rules.
func (s *Syncer) sampleOf(svc dataplane.Service, held map[uint32]dataplane.Group, byID map[uint32]ofwire.GroupStats, hits []dataplane.FlowCounter, now time.Time) (*Sample, string) {
	m := &s.meas
	id := svc.GroupID
	g, ok := held[id]
	gs, read := byID[id]
	prev := m.readings[id]
	delete(m.readings, id) // replaced below by a reading that can be compared with the next
	switch {
	case !ok:
		return nil, "" // not on the switch (yet): nothing to measure
	case !read:
		return nil, fmt.Sprintf("group %d missing from the switch's group counters", id)
	case len(gs.Buckets) != len(g.Buckets):
		return nil, fmt.Sprintf("group %d counters have %d buckets, the group as held has %d: the reply lags the layout", id, len(gs.Buckets), len(g.Buckets))
	}
	split, err := dataplane.SplitOf(svc, g, s.cfg.OVS)
	if err != nil {
		return nil, err.Error()
	}
	cur := GroupReading{At: now, Epoch: m.epochs[id], Age: time.Duration(gs.DurationSec)*time.Second + time.Duration(gs.DurationNsec),
		Buckets: make([]uint64, len(gs.Buckets))}
	for k, b := range gs.Buckets {
		cur.Buckets[k] = b.Packets
	}
	pinned := countsPinned(svc)
	var youngest time.Duration
	hasHits := false
	if pinned {
		per, young, ok, err := dataplane.KindCounts(svc, hits, dataplane.KindAffinityPinned)
		if err != nil {
			return nil, err.Error()
		}
		cur.Epoch += m.slotEpochs[svc.Index]
		cur.Buckets = append(cur.Buckets, per...)
		if ok {
			youngest, hasHits = young, true
			cur.Age = min(cur.Age, young)
		}
	}
	m.readings[id] = cur
	d, why, first := BucketDeltas(prev, cur)
	if first {
		return nil, ""
	}
	if why == "" && hasHits && youngest < now.Sub(prev.At) {
		// A table-8 flow added or replaced since the last reading restarted its counter.
		why = fmt.Sprintf("an affinity flow is %v old, younger than the last reading %v ago", youngest, now.Sub(prev.At))
	}
	if why != "" {
		return nil, fmt.Sprintf("group %d: %s", id, why)
	}
	var extra []uint64
	if pinned {
		d, extra = d[:len(gs.Buckets)], d[len(gs.Buckets):]
	}
	sm := SampleOf(prev.At, now, d, svc, split)
	if pinned {
		sm.Pinned = make(map[string]uint64, len(svc.Backends))
		for i, n := range extra {
			name := svc.Backends[i].Name
			sm.Pinned[name] += n
			sm.Counts[name] += n
		}
	}
	return &sm, ""
}

// readFlowCounters reads the counters of the flows req asks for, when a service planned here
// needs them; ok is false when none does or the read failed (then their windows stand still
// until the next reading, as every service's do when the group counters cannot be read).
func (s *Syncer) readFlowCounters(ctx context.Context, in *intent.Intent, req io.WriterTo, what string, need func(dataplane.Service) bool) (counters []dataplane.FlowCounter, ok bool) {
	if !slices.ContainsFunc(s.st.Planned, need) {
		return nil, false
	}
	sw := s.cfg.Conn
	cctx, cancel := context.WithTimeout(ctx, in.BarrierTimeout)
	body, err := sw.Multipart(cctx, ofp.MultipartTypeFlow, req)
	cancel()
	if err != nil {
		s.cfg.Logger.Debug(what+" counters unavailable", "dpid", sw.String(), "err", err)
		return nil, false
	}
	counters, err = dataplane.DecodeFlowCounters(body)
	if err != nil {
		s.cfg.Logger.Warn(what+" counters", "dpid", sw.String(), "err", err)
		return nil, false
	}
	return counters, true
}

// udpSampleOf is sampleOf for a per-flow UDP service: its "buckets" are its backends, each
// counting what the slot flows naming it counted (a slot flow counts the first packet of
// each new flow hashed to it, as a bucket does), compared across readings by the same rules.
func (s *Syncer) udpSampleOf(svc dataplane.Service, counters []dataplane.FlowCounter, now time.Time) (*Sample, string) {
	m := &s.meas
	id := svc.GroupID
	prev := m.readings[id]
	delete(m.readings, id)
	split, err := dataplane.UDPSplitOf(svc, s.current.Flows)
	if err != nil {
		return nil, err.Error()
	}
	per, youngest, ok, err := dataplane.UDPSlotCounts(svc, counters)
	switch {
	case err != nil:
		return nil, err.Error()
	case !ok && split.NHash == 0:
		return nil, "" // no slot flow planned (no live backend): nothing to measure
	case !ok:
		return nil, fmt.Sprintf("service %q: slot flows missing from the switch's flow counters", svc.Name)
	}
	cur := GroupReading{At: now, Epoch: m.epochs[id] + m.slotEpochs[svc.Index], Age: youngest, Buckets: per}
	m.readings[id] = cur
	d, why, first := BucketDeltas(prev, cur)
	if first {
		return nil, ""
	}
	if why == "" && youngest < now.Sub(prev.At) {
		// A slot flow added or replaced since the last reading (by us: the epoch says so;
		// behind our back: only its age does), and an ADD over a flow may carry its counter
		// to another backend's action.
		why = fmt.Sprintf("a slot flow is %v old, younger than the last reading %v ago", youngest, now.Sub(prev.At))
	}
	if why != "" {
		return nil, fmt.Sprintf("service %q slot flows: %s", svc.Name, why)
	}
	sm := SampleOf(prev.At, now, d, svc, split)
	return &sm, ""
}

// discard logs why a delta was discarded, once per group until one is accepted again: a
// rewrite discards one delta every time, and is no news.
func (s *Syncer) discard(svc dataplane.Service, why string) {
	if s.meas.logged[svc.GroupID] == why {
		return
	}
	s.meas.logged[svc.GroupID] = why
	if strings.HasSuffix(why, reasonRewritten) {
		// Our own rewrites discard the short delta across each write: debug, not news.
		s.cfg.Logger.Debug("measured share: delta discarded", "dpid", s.cfg.Conn.String(), "service", svc.Name, "reason", why)
		return
	}
	s.cfg.Logger.Info("measured share: delta discarded", "dpid", s.cfg.Conn.String(), "service", svc.Name, "reason", why)
}

func cloneCounts(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// groupsChange reports whether writing desired over current rewrites, adds or deletes a group.
func groupsChange(desired, current dataplane.State) bool {
	if len(desired.Groups) != len(current.Groups) {
		return true
	}
	cur := make(map[uint32]dataplane.Group, len(current.Groups))
	for _, g := range current.Groups {
		cur[g.ID] = g
	}
	for _, g := range desired.Groups {
		if c, ok := cur[g.ID]; !ok || !c.Equal(g) {
			return true
		}
	}
	return false
}
