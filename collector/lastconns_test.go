package collector

import (
	"math"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// TestLastConnsIsTheRawCount: the smoothed Conns of a backend whose connections all closed
// never reaches 0, so a drain waits on LastConns, the latest count as reported by any
// source (full report, in-flight report, SNMP poll), with its time.
func TestLastConnsIsTheRawCount(t *testing.T) {
	c := testutil.NewClock(time.Unix(1e9, 0))
	var trans []Transition
	p := newPool(c, &trans)
	if st, _ := p.Get("a"); !st.LastConnsAt.IsZero() {
		t.Fatalf("a count before any report: %v at %v", st.LastConns, st.LastConnsAt)
	}
	steps := []struct {
		name  string
		apply func()
		want  float64
	}{
		{"full report of 50", func() { r := rep("a", true); r.Seq, r.Conns = 1, 50; p.Accept(r, from) }, 50},
		{"full report of 0", func() { r := rep("a", true); r.Seq, r.Conns = 2, 0; p.Accept(r, from) }, 0},
		{"in-flight report of 3", func() {
			r := rep("a", true)
			r.Seq, r.Conns, r.Signals = 3, 3, report.SignalInFlight
			p.Accept(r, from)
		}, 3},
		{"snmp poll of 7", func() { p.Observe("a", Sample{Conns: 7, MemUtil: 0.1}) }, 7},
		{"a NaN count changes nothing", func() { p.Observe("a", Sample{Conns: math.NaN(), MemUtil: 0.1}) }, 7},
		{"snmp poll of 0", func() { p.Observe("a", Sample{Conns: 5, MemUtil: 0.1}) }, 5},
		// A probe that could not count sends 0 marked as not a count: the last real count
		// stays, and ages, so a drain waits for a count or for stale_after.
		{"full report whose count is stale", func() {
			r := rep("a", true)
			r.Seq, r.Conns, r.Signals = 4, 0, report.SignalConnsStale
			p.Accept(r, from)
		}, 5},
		{"snmp poll of 0", func() { p.Observe("a", Sample{Conns: 0, MemUtil: 0.1}) }, 0},
	}
	for _, s := range steps {
		c.Advance(time.Second)
		s.apply()
		st, _ := p.Get("a")
		if st.LastConns != s.want {
			t.Fatalf("%s: LastConns %v, want %v (smoothed Conns %v)", s.name, st.LastConns, s.want, st.Conns)
		}
		kept := s.name == "a NaN count changes nothing" || s.name == "full report whose count is stale"
		if !kept && !st.LastConnsAt.Equal(c.Now()) {
			t.Fatalf("%s: LastConnsAt %v, want now %v", s.name, st.LastConnsAt, c.Now())
		}
	}
	if st, _ := p.Get("a"); st.Conns == 0 {
		t.Fatal("smoothed Conns reached 0: the test shows nothing the raw count adds")
	}
	if p.StaleAfter() != 15*time.Second {
		t.Fatalf("StaleAfter %v", p.StaleAfter())
	}
}

// TestDrainedAt: the time the operator drain went on, kept while it stays on (a repeated
// drain does not move it), cleared when it goes off.
func TestDrainedAt(t *testing.T) {
	c := testutil.NewClock(time.Unix(1e9, 0))
	var trans []Transition
	p := newPool(c, &trans)
	at := func() time.Time { st, _ := p.Get("a"); return st.DrainedAt }
	if !at().IsZero() {
		t.Fatal("DrainedAt set before any drain")
	}
	c.Advance(time.Second)
	p.Drain("a", true)
	t0 := c.Now()
	c.Advance(time.Second)
	p.Drain("a", true) // again: still the first drain's time
	if !at().Equal(t0) {
		t.Fatalf("DrainedAt %v, want the first drain's %v", at(), t0)
	}
	p.Drain("a", false)
	if !at().IsZero() {
		t.Fatalf("DrainedAt %v after the undrain", at())
	}
}
