package balancer

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// TestFastLoopFollowsInFlight: between updates the fast loop corrects the applied weights by
// the in-flight reports, hands the switches an intent with the corrected weights, shows both
// in the view, and goes back to the slow weights when the counts age out or the policy is a
// fixed split.
func TestFastLoopFollowsInFlight(t *testing.T) {
	b, clk, rep := fastLoopBalancer(t, "\nin_flight_reference = \"pool\"")
	s := b.services[0]
	base := append([]uint16(nil), s.applied...)
	if base == nil || len(s.followed) != 2 || s.followed[0] != base[0] || s.followed[1] != base[1] {
		t.Fatalf("after the first update, no counts yet: applied %v, followed %v", base, s.followed)
	}
	weightsOf := func() []uint16 {
		in := b.latest.Load()
		var w []uint16
		for _, be := range in.Services[0].Backends {
			w = append(w, be.Weight)
		}
		return w
	}

	// a has 9 in flight, b 1: a gives share to b, within the bound.
	b.pool.Accept(rep("a", 9), netip.AddrPort{})
	b.pool.Accept(rep("b", 1), netip.AddrPort{})
	b.followOnce(50 * time.Millisecond)
	got := weightsOf()
	if !(got[0] < base[0] && got[1] > base[1] && int(got[0])+int(got[1]) == int(base[0])+int(base[1])) {
		t.Fatalf("followed %v from base %v", got, base)
	}
	v := b.View().Services()[0].Backends
	if !v[0].Followed || v[0].InFlight == nil || *v[0].InFlight != 9 || v[0].BaseWeight != base[0] || v[0].AppliedWeight != got[0] {
		t.Fatalf("view %+v", v[0])
	}

	// A periodic update keeps following (from the same snapshot), so the switch never sees
	// the slow weights alone.
	b.update(context.Background(), true)
	if w := weightsOf(); w[0] >= s.applied[0] {
		t.Fatalf("after an update: %v, base %v", w, s.applied)
	}

	// The counts age out: back to the slow weights.
	clk.Advance(time.Second)
	b.followOnce(50 * time.Millisecond)
	if w := weightsOf(); w[0] != s.applied[0] || w[1] != s.applied[1] {
		t.Fatalf("stale counts still followed: %v, base %v", w, s.applied)
	}

	// Never followed: a stateless service (each rewrite would re-hash live connections) and
	// a fixed split.
	for _, tc := range []struct {
		name, extra, mode string
	}{{"stateless mode", "", "stateless"}, {"static policy", "\npolicy = \"static\"", ""}} {
		cfg := testConfig(t, `in_flight_period = "50ms"`+tc.extra)
		cfg.Collector.KeyFile = b.Config().Collector.KeyFile
		if tc.mode != "" {
			cfg.Services[0].Mode = tc.mode
		}
		if err := b.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		b.update(context.Background(), true)
		b.pool.Accept(rep("a", 9), netip.AddrPort{})
		b.pool.Accept(rep("b", 0), netip.AddrPort{})
		b.followOnce(50 * time.Millisecond)
		if s := b.services[0]; s.followed != nil {
			t.Fatalf("%s followed: %v", tc.name, s.followed)
		}
	}
}

// TestFastLoopDeadBand: with weighting.in_flight_dead_band set, the fast loop hands the
// switches new weights only when some backend moved by more than the band since the last
// written ones, and always when they go back to the slow weights.
func TestFastLoopDeadBand(t *testing.T) {
	b, clk, rep := fastLoopBalancer(t, "\nin_flight_dead_band = 0.1\nin_flight_reference = \"pool\"")
	s := b.services[0]
	base := append([]uint16(nil), s.applied...)
	written := func() []uint16 { return writtenWeights(b) }
	steps := []struct {
		name  string
		a, b  int
		moved bool // the switches got new weights
	}{
		{"a far busier: beyond the band", 3, 0, true},
		{"a little busier still: inside the band", 4, 0, false},
		{"even: back to the slow weights", 1, 1, true},
		{"barely uneven: inside the band", 3, 2, false},
	}
	prev := written()
	for _, st := range steps {
		clk.Advance(50 * time.Millisecond)
		b.pool.Accept(rep("a", st.a), netip.AddrPort{})
		b.pool.Accept(rep("b", st.b), netip.AddrPort{})
		b.followOnce(50 * time.Millisecond)
		got := written()
		if moved := !slices.Equal(got, prev); moved != st.moved {
			t.Fatalf("%s: written %v -> %v (base %v): moved %v, want %v", st.name, prev, got, base, moved, st.moved)
		}
		if st.name == "even: back to the slow weights" && !slices.Equal(got, base) {
			t.Fatalf("even queues: %v, want the slow weights %v", got, base)
		}
		prev = got
	}
}

// TestFastLoopOwnReference: with in_flight_reference "own" a backend's count is
// judged against its own average: a steady difference between the backends' queues (the
// bigger one always holds more) leaves the slow weights alone, a queue building on one
// backend moves share off it, and the same queue held for seconds becomes its usual again.
func TestFastLoopOwnReference(t *testing.T) {
	b, clk, rep := fastLoopBalancer(t, "\nin_flight_reference = \"own\"")
	s := b.services[0]
	base := append([]uint16(nil), s.applied...)
	written := func() []uint16 { return writtenWeights(b) }
	step := func(a, bb int) []uint16 {
		clk.Advance(50 * time.Millisecond)
		b.pool.Accept(rep("a", a), netip.AddrPort{})
		b.pool.Accept(rep("b", bb), netip.AddrPort{})
		b.followOnce(50 * time.Millisecond)
		return written()
	}
	for range 40 { // two seconds of a steady 8 against 1
		if w := step(8, 1); !slices.Equal(w, base) {
			t.Fatalf("steady queues 8 and 1: %v, want the slow weights %v", w, base)
		}
	}
	w := step(20, 1) // a's queue builds
	if !(w[0] < base[0] && w[1] > base[1]) {
		t.Fatalf("a's queue from 8 to 20: %v from base %v", w, base)
	}
	for range 200 { // ten seconds at 20: its usual now
		w = step(20, 1)
	}
	if d := int(w[0]) - int(base[0]); d < -int(base[0])/50 {
		t.Fatalf("after ten seconds at 20: %v, base %v", w, base)
	}
}

// writtenWeights is the first service's weights in the intent the switches were last handed.
func writtenWeights(b *Balancer) []uint16 {
	var w []uint16
	for _, be := range b.latest.Load().Services[0].Backends {
		w = append(w, be.Weight)
	}
	return w
}

// fastLoopBalancer is a balancer with the fast loop on (extra: more [weighting] lines) whose
// two backends are past warm-up and have had one update, and rep, a report of backend id
// (an in-flight report of inflight connections, or a full one for a negative count).
func fastLoopBalancer(t *testing.T, extra string) (*Balancer, *testutil.Clock, func(id string, inflight int) *report.Report) {
	t.Helper()
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b, err := New(testConfig(t, "in_flight_period = \"50ms\""+extra), Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	rep := func(id string, inflight int) *report.Report {
		r := &report.Report{BackendID: id, Flags: report.FlagHealthOK, CPUUtil: 0.5, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30}
		if inflight >= 0 {
			r.Conns, r.Signals = uint32(inflight), report.SignalInFlight
		}
		return r
	}
	for range 2 { // past the 10 s warm-up of testConfig
		b.pool.Accept(rep("a", -1), netip.AddrPort{})
		b.pool.Accept(rep("b", -1), netip.AddrPort{})
		clk.Advance(11 * time.Second)
	}
	b.pool.Accept(rep("a", -1), netip.AddrPort{})
	b.pool.Accept(rep("b", -1), netip.AddrPort{})
	b.startupUntil = clk.Now() // past the start-up hold
	b.update(context.Background(), true)
	return b, clk, rep
}
