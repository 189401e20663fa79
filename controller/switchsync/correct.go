package switchsync

import (
	"fmt"
	"math"
	"sort"
	"time"

	"flowweight/controller/dataplane"
)

// Correcting the measured share (docs/dataplane.md, "Correcting the measured share"). With
// client affinity a returning client's new connections go to its learned backend past the
// group, so the group places only part of a service's new connections: a client that opens
// 30 % of them, pinned to one backend, adds its 30 % to whatever that backend's slots give
// it, and the realised split drifts by that much from the computed one. The switch counts
// both parts (the group's buckets, and the table-8 flow of each backend that a pinned
// connection passes), so the controller knows exactly how much of each backend's share is
// pinned, and can give the group's slots to the others until the whole matches the weights.
//
// Pure: the syncer hands in its measured window (measure.go) and the computed shares, and
// plans with Apply's weights. The solve needs only the window's pinned counts and the group's
// total, not which slot table counted them, so it does not chase its own corrections:
//
//	group share x_i = (p_i·N − P_i) / G
//
// for computed share p_i, N connections in the window, P_i of them pinned to backend i and G
// placed by the group, shifted alike to sum to 1 within [p_i/10, 3·p_i], then moved half-way
// from the share in use at each reading (a damped step: settled in about 15 s at a hundred
// new connections a second, docs/benchmarks.md). It acts only while the group places at
// least a fifth of the connections and the skew the pinned ones would cause uncorrected is
// beyond what sampling explains (three sampling errors, and at least a point), and lets go
// below half of that.

const (
	// correctMinCount is the fewest new connections in a window that a correction is moved
	// on: below it the pinned shares are noise, and the correction in use is kept.
	correctMinCount = 200
	// correctCounts is how many of the latest counts a correction reads (Window.Recent):
	// enough that a pinned share is a few tenths of a point from its rate, few enough that
	// the correction follows a heavy client that moves within seconds at a hundred new
	// connections a second (the whole minute's window would take a minute).
	correctCounts = 2000
	// correctLow and correctHigh bound a backend's share of the group's connections relative
	// to its computed share: the correction can take 90 % of a backend's slots or triple
	// them, never more, so no reading can drive a weight to 0 or to the whole group (of
	// three or more backends).
	correctLow, correctHigh = 0.1, 3.0
	// correctMinGroup is the least share of a window's connections the group must place for
	// a correction: it corrects with those alone.
	correctMinGroup = 0.2
	// correctStep is how far each reading moves the share in use toward the solve.
	correctStep = 0.5
	// correctFloor is the least skew acted on, whatever the sampling error says.
	correctFloor = 0.01
	// correctSlots and correctDeadBand: a new correction differing from the one in use by
	// less than two slots of a 256-slot table for every backend is not worth a rewrite (the
	// pinned counts of returning light clients wobble by about that from reading to reading).
	correctSlots    = 256
	correctDeadBand = 2
	// correctSettled is the largest residual (Correction.Residual) of a settled correction: a
	// correction kept within the dead band misses its target by under 2 slots of the group's
	// share, under a point of the whole split.
	correctSettled = 0.01
)

// Correction is a service's correction on one switch: what the syncer plans its group with,
// and why.
type Correction struct {
	// Active says the group's shares are corrected (Group), not the computed ones.
	Active bool
	// Residual is the largest difference over the backends, in points of the whole split
	// (a fraction), between the group's shares in use and the bounded solve of the latest
	// window: what the correction still misses of what it can do (a backend whose pinned
	// clients alone exceed its share stays off its computed share however settled). Settled
	// counts the readings in a row whose residual was within a point; 0 while it is farther.
	Residual float64
	Settled  int
	// Group is, per backend name, the share of the group's new connections the correction
	// plans (nil when not active).
	Group map[string]float64
	// Skew is the largest difference over the backends between the computed share and the
	// share the window's pinned connections would make of the split uncorrected; Threshold
	// is what it must exceed to start a correction (half of it ends one).
	Skew, Threshold float64
	// Count is the window's new connections, Pinned those pinned past the group.
	Count, Pinned uint64
	// Why says what the last reading did, for the status; At is the end of the window it
	// read (the syncer moves a correction once per window that grew).
	Why      string
	At       time.Time
	Backends map[string]CorrectionBackend
}

// CorrectionBackend explains one backend's part of a Correction.
type CorrectionBackend struct {
	// Computed is the share the weights give it; PinnedShare the share of all the window's
	// new connections pinned to it past the group.
	Computed, PinnedShare float64
	// Group is the share of the group's connections planned for it (Computed when the
	// correction is not active).
	Group float64
	// Bound names the bound that limited it ("" none): its pinned clients alone exceed its
	// share, or the correction's limits.
	Bound string
}

// Computed is each backend's share of s by its weights, over the backends that have a
// bucket; the others are absent.
func Computed(s dataplane.Service) map[string]float64 {
	var total float64
	for _, b := range s.Backends {
		if b.Reachable() && b.Weight > 0 {
			total += float64(b.Weight)
		}
	}
	out := make(map[string]float64, len(s.Backends))
	if total == 0 {
		return out
	}
	for _, b := range s.Backends {
		if b.Reachable() && b.Weight > 0 {
			out[b.Name] += float64(b.Weight) / total
		}
	}
	return out
}

// Correct is the correction after a reading: prev is the one in use, m the window measured,
// computed the shares the weights give (Computed).
func Correct(prev Correction, m Measured, computed map[string]float64) Correction {
	c := Correction{Count: m.Total, Backends: make(map[string]CorrectionBackend, len(computed))}
	for name, b := range m.Backends {
		if _, ok := computed[name]; ok {
			c.Pinned += b.Pinned
		}
	}
	names := make([]string, 0, len(computed))
	for name := range computed {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c.Backends[name] = CorrectionBackend{Computed: computed[name], Group: computed[name]}
	}
	if len(names) < 2 {
		c.Why = "fewer than two backends with a bucket: nothing to correct"
		return c
	}
	n := float64(m.Total)
	if m.Total < correctMinCount || c.Pinned > m.Total {
		c.Why = fmt.Sprintf("%d new connections in the window, fewer than %d: the correction in use stays", m.Total, correctMinCount)
		if c.Pinned > m.Total {
			c.Why = fmt.Sprintf("window counts %d pinned of %d new connections: inconsistent, the correction in use stays", c.Pinned, m.Total)
		}
		return hold(prev, c, names)
	}
	g := n - float64(c.Pinned)
	if g <= 0 {
		c.Why = "no new connection passed the group in the window: the correction in use stays"
		return hold(prev, c, names)
	}
	if g/n < correctMinGroup {
		// Nearly every connection pinned: the group's few would have to carry the whole
		// correction, and clients' pinned volumes (whole clusters of connections, not
		// independent draws) would swing it. Measured, not corrected.
		c.Why = fmt.Sprintf("the group placed %.1f%% of the window's %d new connections, under %.0f%%: too few to correct the pinned skew with",
			100*g/n, m.Total, 100*correctMinGroup)
		return c
	}
	sigma := 0.0
	for _, name := range names {
		p := computed[name]
		pinned := float64(m.Backends[name].Pinned) / n
		b := c.Backends[name]
		b.PinnedShare = pinned
		c.Backends[name] = b
		c.Skew = math.Max(c.Skew, math.Abs(pinned-p*float64(c.Pinned)/n))
		sigma = math.Max(sigma, math.Sqrt(p*(1-p)/n))
	}
	c.Threshold = math.Max(correctFloor, 3*sigma)
	c.Active = c.Skew > c.Threshold || (prev.Active && c.Skew > c.Threshold/2)
	if !c.Active {
		c.Why = fmt.Sprintf("pinned connections skew the split by %.1f points, within %.1f (sampling): the computed shares stand", 100*c.Skew, 100*c.Threshold)
		if prev.Active {
			c.Why = fmt.Sprintf("pinned connections skew the split by %.1f points, below %.1f: correction ended", 100*c.Skew, 50*c.Threshold)
		}
		return c
	}
	target := boundedShares(c, m, computed, names, n, g)
	from := prev.Group
	if !prev.Active || !sameNames(from, names) {
		from = computed
	}
	// Within the dead band of the shares in use: no rewrite. Within twice it: the last
	// step, to the target. Farther: half-way.
	far, near := false, true
	for _, name := range names {
		d := math.Abs(target[name]-from[name]) * correctSlots
		far = far || d >= correctDeadBand
		near = near && d < 2*correctDeadBand
	}
	switch {
	case prev.Active && sameNames(prev.Group, names) && !far:
		c.Group = prev.Group
	case near:
		c.Group = target
	default:
		c.Group = make(map[string]float64, len(names))
		for _, name := range names {
			c.Group[name] = from[name] + correctStep*(target[name]-from[name])
		}
	}
	for _, name := range names {
		// What the shares in use still miss of the target, in points of the whole split.
		c.Residual = math.Max(c.Residual, math.Abs(target[name]-c.Group[name])*g/n)
		b := c.Backends[name]
		b.Group = c.Group[name]
		c.Backends[name] = b
	}
	if c.Residual <= correctSettled {
		c.Settled = prev.Settled + 1
	}
	c.Why = fmt.Sprintf("pinned connections (%.1f%% of %d) would skew the split by %.1f points: the group's slots correct it",
		100*float64(c.Pinned)/n, m.Total, 100*c.Skew)
	return c
}

// boundedShares solves the group's shares for the window (x_i = (p_i·N − P_i)/G), each
// within [correctLow, correctHigh] of its computed share and summing to 1, and notes in c
// which bound limited a backend. The solve is shifted by one amount for every backend before
// the bounds clamp it, the amount found by bisection: the bounds always admit a sum of 1
// (their floors sum to correctLow, their ceilings to correctHigh), and a shared shift keeps the
// differences the pinned counts make.
func boundedShares(c Correction, m Measured, computed map[string]float64, names []string, n, g float64) map[string]float64 {
	raw := make(map[string]float64, len(names))
	for _, name := range names {
		raw[name] = (computed[name]*n - float64(m.Backends[name].Pinned)) / g
	}
	shifted := func(mu float64) (map[string]float64, float64) {
		x := make(map[string]float64, len(names))
		var sum float64
		for _, name := range names {
			p := computed[name]
			x[name] = min(max(raw[name]+mu, correctLow*p), correctHigh*p)
			sum += x[name]
		}
		return x, sum
	}
	lo, hi := -2.0, 2.0 // every raw share is within [-N/G, N/G] ⊂ [-5, 5] at G/N ≥ 0.2
	for range 3 {
		if _, s := shifted(lo); s > 1 {
			lo *= 4
		}
		if _, s := shifted(hi); s < 1 {
			hi *= 4
		}
	}
	for range 60 {
		mid := (lo + hi) / 2
		if _, s := shifted(mid); s < 1 {
			lo = mid
		} else {
			hi = mid
		}
	}
	x, sum := shifted((lo + hi) / 2)
	for _, name := range names {
		x[name] /= sum // the last rounding of the bisection
		p, b := computed[name], c.Backends[name]
		switch {
		case raw[name] <= 0:
			b.Bound = "its pinned clients alone exceed its share"
		case x[name] <= correctLow*p*(1+1e-9):
			b.Bound = fmt.Sprintf("at least %.0f%% of its computed share", 100*correctLow)
		case x[name] >= correctHigh*p*(1-1e-9):
			b.Bound = fmt.Sprintf("at most %.0f× its computed share", correctHigh)
		}
		c.Backends[name] = b
	}
	return x
}

// hold keeps prev's shares in c (a reading too thin to move them on).
func hold(prev Correction, c Correction, names []string) Correction {
	if !prev.Active || !sameNames(prev.Group, names) {
		return c
	}
	c.Active, c.Settled, c.Group, c.Skew, c.Threshold, c.Residual = true, prev.Settled, prev.Group, prev.Skew, prev.Threshold, prev.Residual
	for _, name := range names {
		b := c.Backends[name]
		b.Group = prev.Group[name]
		if pb, ok := prev.Backends[name]; ok {
			b.PinnedShare, b.Bound = pb.PinnedShare, pb.Bound
		}
		c.Backends[name] = b
	}
	return c
}

func sameNames(m map[string]float64, names []string) bool {
	if len(m) != len(names) {
		return false
	}
	for _, n := range names {
		if _, ok := m[n]; !ok {
			return false
		}
	}
	return true
}

// correctScale is the total of a corrected service's weights: fine enough that rounding
// moves no slot of a 256-slot table.
const correctScale = 10000

// Apply returns s with the weights of its backends that have a bucket multiplied by c's
// factors (group share over computed share) and put on correctScale (at least 1), or s itself
// when c is not active or its backends are not those with a bucket now. A reweight between
// two readings thus moves the group at once, corrected as the last reading said; backends
// without a bucket keep their weight, so a correction never gives one a bucket or takes one
// away.
func (c Correction) Apply(s dataplane.Service) dataplane.Service {
	if !c.Active {
		return s
	}
	var live []string
	var total float64
	for _, b := range s.Backends {
		if b.Reachable() && b.Weight > 0 {
			live = append(live, b.Name)
			total += float64(b.Weight) * c.factor(b.Name)
		}
	}
	if !sameNames(c.Group, live) || total <= 0 || math.IsNaN(total) || math.IsInf(total, 0) {
		return s
	}
	out := s
	out.Backends = make([]dataplane.Backend, len(s.Backends))
	for i, b := range s.Backends {
		if b.Reachable() && b.Weight > 0 {
			b.Weight = uint16(max(1, math.Round(float64(b.Weight)*c.factor(b.Name)/total*correctScale)))
		}
		out.Backends[i] = b
	}
	return out
}

// factor is how much the correction multiplies backend name's computed share by.
func (c Correction) factor(name string) float64 {
	p := c.Backends[name].Computed
	if p <= 0 {
		return 1
	}
	return c.Group[name] / p
}
