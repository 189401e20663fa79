package switchsync

import (
	"fmt"
	"time"

	"flowweight/controller/dataplane"
)

// Measured shares (docs/dataplane.md, "Measured shares"): consecutive readings of a select
// group's bucket counters become per-backend counts of what the group sent where, summed over
// a sliding window beside the share the group's slot table planned for the same counts. Pure:
// the syncer reads the switch (measuring.go) and hands the readings here.

// MeasureWindow is how far back a measured share looks: long enough for a few hundred new
// connections at modest rates (the sampling error of a share p over n connections is about
// sqrt(p(1-p)/n)), short enough to follow a reweight within a minute.
const MeasureWindow = time.Minute

// Units of a measurement: what one count of a bucket is in the service's mode.
const (
	// UnitConnections: conntrack mode sends only a connection's untracked-new packets to the
	// group, so a count is a new connection (or a retransmission of its first packet).
	UnitConnections = "connections"
	// UnitPackets: stateless mode sends every packet to the VIP through the group, so a count
	// is a packet and the share is of packets, not connections.
	UnitPackets = "packets"
)

// UnitOf is what a bucket counts in mode.
func UnitOf(mode dataplane.Mode) string {
	if mode == dataplane.ModeStateless {
		return UnitPackets
	}
	return UnitConnections
}

// reasonRewritten is BucketDeltas' reason for a rewrite between two readings.
const reasonRewritten = "group rewritten since the last reading"

// GroupReading is one read of a group's bucket counters and what the syncer knew of the group
// then.
type GroupReading struct {
	At time.Time
	// Epoch counts the rewrites of the group the syncer made or saw before this read.
	Epoch uint64
	// Age is how long the switch says the group has existed (its duration).
	Age time.Duration
	// Buckets are the packet counts per bucket, in the group's bucket order.
	Buckets []uint64
}

// BucketDeltas returns what each bucket counted between prev and cur, or why the two cannot
// be compared; first says prev is no reading at all (nothing to report, nothing to log). A
// delta is only trusted when both reads saw the same group: the same epoch (no rewrite of ours
// or one we saw in between), the same number of buckets, a duration that did not go back (the
// group was not deleted and added again), and no counter that went backwards.
func BucketDeltas(prev, cur GroupReading) (d []uint64, why string, first bool) {
	switch {
	case prev.At.IsZero():
		return nil, "", true
	case cur.Epoch != prev.Epoch:
		return nil, reasonRewritten, false
	case !cur.At.After(prev.At):
		return nil, fmt.Sprintf("reading at %s is not after the previous one at %s", cur.At.Format(time.RFC3339Nano), prev.At.Format(time.RFC3339Nano)), false
	case len(cur.Buckets) != len(prev.Buckets):
		return nil, fmt.Sprintf("bucket list changed from %d to %d buckets", len(prev.Buckets), len(cur.Buckets)), false
	case cur.Age < prev.Age:
		return nil, fmt.Sprintf("group re-created (its duration went back from %s to %s)", prev.Age, cur.Age), false
	}
	d = make([]uint64, len(cur.Buckets))
	for k, n := range cur.Buckets {
		if n < prev.Buckets[k] {
			return nil, fmt.Sprintf("bucket %d counter went backwards from %d to %d", k, prev.Buckets[k], n), false
		}
		d[k] = n - prev.Buckets[k]
	}
	return d, "", false
}

// Sample is one accepted delta of a service's group, per backend name: what was counted and
// the share of the slot table each backend had while it was. With client affinity, Pinned is
// what each backend's table-8 flow counted (new connections of returning clients, sent to
// their learned backend past the group); Counts includes them.
type Sample struct {
	From, To time.Time
	Counts   map[string]uint64
	Pinned   map[string]uint64
	Planned  map[string]float64
}

// SampleOf maps per-bucket deltas to s's backends by split (bucket order as the switch holds
// the group).
func SampleOf(from, to time.Time, deltas []uint64, s dataplane.Service, split dataplane.GroupSplit) Sample {
	sm := Sample{From: from, To: to, Counts: make(map[string]uint64, len(s.Backends)),
		Planned: make(map[string]float64, len(s.Backends))}
	for i, b := range s.Backends {
		sm.Counts[b.Name] += 0
		sm.Planned[b.Name] = split.Planned(i)
	}
	for k, n := range deltas {
		if k < len(split.Backend) {
			sm.Counts[s.Backends[split.Backend[k]].Name] += n
		}
	}
	return sm
}

// Window is the samples of one service's group over the last Span, and when deltas were
// discarded in it (BucketDeltas' reasons: a window with skips covers less than Span). Add and
// Skip return a new Window; one is never modified, so a published Measured shares nothing
// mutable.
type Window struct {
	Span    time.Duration
	Samples []Sample
	Skips   []time.Time
}

// Add appends s and drops what ended more than Span before it.
func (w Window) Add(s Sample) Window {
	out := w.since(s.To)
	out.Samples = append(out.Samples, s)
	return out
}

// Skip records a delta discarded at at.
func (w Window) Skip(at time.Time) Window {
	out := w.since(at)
	out.Skips = append(out.Skips, at)
	return out
}

// Recent is w's latest samples that hold at least n counts between them (all of w when it
// holds fewer): a share over the last n counts follows a change as fast as the traffic allows.
func (w Window) Recent(n uint64) Window {
	out := Window{Span: w.Span}
	var got uint64
	i := len(w.Samples)
	for i > 0 && got < n {
		i--
		for _, c := range w.Samples[i].Counts {
			got += c
		}
	}
	out.Samples = w.Samples[i:]
	if len(out.Samples) > 0 {
		from := out.Samples[0].From
		for _, t := range w.Skips {
			if !t.Before(from) {
				out.Skips = append(out.Skips, t)
			}
		}
	}
	return out
}

// since copies w without what ended more than Span before now.
func (w Window) since(now time.Time) Window {
	cut := now.Add(-w.Span)
	out := Window{Span: w.Span}
	for _, o := range w.Samples {
		if !o.To.Before(cut) {
			out.Samples = append(out.Samples, o)
		}
	}
	for _, t := range w.Skips {
		if !t.Before(cut) {
			out.Skips = append(out.Skips, t)
		}
	}
	return out
}

// Measured is one service's group on one switch over a window.
type Measured struct {
	// Unit is what a count is (UnitConnections, UnitPackets).
	Unit string
	// From and To bound the window; Total is every count in it, Pinned those pinned past
	// the group by client affinity.
	From, To time.Time
	Total    uint64
	Pinned   uint64
	// Skipped counts the deltas discarded within the window.
	Skipped  int
	Backends map[string]MeasuredBackend
	// Cumulative is every count accepted per backend since the syncer started (for a
	// counter metric); deltas discarded are not in it.
	Cumulative map[string]uint64
}

// MeasuredBackend is one backend's part of a Measured.
type MeasuredBackend struct {
	// Count is what the backend's buckets counted in the window, and with client affinity
	// its connections pinned past the group (Pinned, of them); Share is Count/Total (0 when
	// Total is 0).
	Count, Pinned uint64
	Share         float64
	// Planned is the share the slot table gave the backend, weighted by the group's counts
	// of each sample (the table may have changed within the window); with no counts, the
	// latest sample's. It is a share of what the group placed, Total less Pinned.
	Planned float64
}

// Measure sums the window for a service of the given unit.
func (w Window) Measure(unit string) Measured {
	m := Measured{Unit: unit, Skipped: len(w.Skips), Backends: map[string]MeasuredBackend{}}
	if len(w.Samples) == 0 {
		return m
	}
	m.From, m.To = w.Samples[0].From, w.Samples[len(w.Samples)-1].To
	expected := map[string]float64{}
	for _, s := range w.Samples {
		var total, pinned uint64
		for name, n := range s.Counts {
			b := m.Backends[name]
			b.Count += n
			b.Pinned += s.Pinned[name]
			m.Backends[name] = b
			total += n
			pinned += s.Pinned[name]
		}
		for name, p := range s.Planned {
			expected[name] += float64(total-pinned) * p
		}
		m.Total += total
		m.Pinned += pinned
	}
	last := w.Samples[len(w.Samples)-1]
	for name, b := range m.Backends {
		if m.Total > 0 {
			b.Share = float64(b.Count) / float64(m.Total)
		}
		if g := m.Total - m.Pinned; g > 0 {
			b.Planned = expected[name] / float64(g)
		} else {
			b.Planned = last.Planned[name]
		}
		m.Backends[name] = b
	}
	return m
}
