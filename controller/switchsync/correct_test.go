package switchsync

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// window is a Measured of n new connections split by share, pinned per backend as given.
func window(n uint64, share map[string]float64, pinned map[string]uint64) Measured {
	m := Measured{Unit: UnitConnections, Total: n, Backends: map[string]MeasuredBackend{}}
	for name, p := range share {
		c := uint64(math.Round(p * float64(n)))
		m.Backends[name] = MeasuredBackend{Count: c, Pinned: pinned[name]}
		m.Pinned += pinned[name]
	}
	return m
}

var thirds = map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3}

// settle runs Correct on the same window until the correction stops moving.
func settle(t *testing.T, m Measured, computed map[string]float64) Correction {
	t.Helper()
	var c Correction
	for range 40 {
		next := Correct(c, m, computed)
		if next.Active == c.Active && mapsClose(next.Group, c.Group, 0) {
			return next
		}
		c = next
	}
	return c
}

func mapsClose(a, b map[string]float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || math.Abs(v-w) > tol {
			return false
		}
	}
	return true
}

// TestCorrectHeavyPinnedClient: a client pinned to a opens 30 % of 3,000 connections; the
// group's shares settle where the whole split meets the computed thirds, within the slot
// the dead-band allows.
func TestCorrectHeavyPinnedClient(t *testing.T) {
	m := window(3000, thirds, map[string]uint64{"a": 900})
	c := settle(t, m, thirds)
	if !c.Active {
		t.Fatalf("not active: %s", c.Why)
	}
	g := float64(m.Total - m.Pinned)
	for name, p := range thirds {
		got := (float64(m.Backends[name].Pinned) + c.Group[name]*g) / float64(m.Total)
		if math.Abs(got-p) > 2.0/correctSlots {
			t.Errorf("%s: whole share %.4f with group share %.4f, want %.4f", name, got, c.Group[name], p)
		}
	}
	if c.Backends["a"].PinnedShare != 0.3 || !strings.Contains(c.Why, "skew the split by") {
		t.Errorf("explanation: %+v, %q", c.Backends["a"], c.Why)
	}
}

func TestCorrectCases(t *testing.T) {
	cases := []struct {
		name     string
		n        uint64
		pinned   map[string]uint64
		computed map[string]float64
		active   bool
		why      string
		bound    map[string]string
	}{
		{name: "no pinned connections", n: 3000, computed: thirds, why: "within"},
		{name: "pinned evenly", n: 3000, pinned: map[string]uint64{"a": 300, "b": 300, "c": 300}, computed: thirds, why: "within"},
		{name: "skew within sampling", n: 3000, pinned: map[string]uint64{"a": 30}, computed: thirds, why: "within"},
		{name: "too few connections", n: 100, pinned: map[string]uint64{"a": 90}, computed: thirds, why: "fewer than 200"},
		{name: "pinned beyond its share", n: 3000, pinned: map[string]uint64{"a": 1500}, computed: thirds, active: true,
			bound: map[string]string{"a": "its pinned clients alone exceed its share"}},
		{name: "everything pinned", n: 3000, pinned: map[string]uint64{"a": 1000, "b": 2000}, computed: thirds, why: "no new connection passed the group"},
		{name: "more pinned than counted", n: 3000, pinned: map[string]uint64{"a": 2000, "b": 2000}, computed: thirds, why: "inconsistent"},
		{name: "one backend", n: 3000, pinned: map[string]uint64{"a": 900}, computed: map[string]float64{"a": 1}, why: "fewer than two backends"},
		{name: "pinned to a backend without a bucket", n: 3000, pinned: map[string]uint64{"z": 900}, computed: thirds, why: "within"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := window(c.n, thirds, c.pinned)
			if p, ok := c.pinned["z"]; ok {
				m.Backends["z"] = MeasuredBackend{Count: p, Pinned: p}
			}
			got := settle(t, m, c.computed)
			if got.Active != c.active || !strings.Contains(got.Why, c.why) {
				t.Fatalf("active %v (%q), want %v with %q", got.Active, got.Why, c.active, c.why)
			}
			var sum float64
			for name, x := range got.Group {
				p := c.computed[name]
				if x < correctLow*p*(1-1e-6) || x > correctHigh*p*(1+1e-6) || math.IsNaN(x) {
					t.Errorf("%s: group share %.4f beyond the bounds of its computed %.4f", name, x, p)
				}
				sum += x
			}
			if got.Active && math.Abs(sum-1) > 1e-9 {
				t.Errorf("group shares sum to %v", sum)
			}
			for name, want := range c.bound {
				if b := got.Backends[name].Bound; b != want {
					t.Errorf("%s bound %q, want %q", name, b, want)
				}
			}
		})
	}
}

// TestCorrectHysteresis: a correction starts beyond the threshold, holds while the skew stays
// above half of it, ends below; a window too thin keeps the one in use.
func TestCorrectHysteresis(t *testing.T) {
	on := settle(t, window(3000, thirds, map[string]uint64{"a": 900}), thirds)
	if !on.Active {
		t.Fatal("not started")
	}
	// Skew 0.03·2/3 = 2 points, above half the threshold (3σ ≈ 2.6 points at n = 3000).
	if c := Correct(on, window(3000, thirds, map[string]uint64{"a": 90}), thirds); !c.Active {
		t.Errorf("ended at skew %.4f above half the threshold %.4f", c.Skew, c.Threshold)
	}
	if c := Correct(on, window(3000, thirds, nil), thirds); c.Active || !strings.Contains(c.Why, "correction ended") {
		t.Errorf("did not end without pinned connections: %v %q", c.Active, c.Why)
	}
	if c := Correct(on, window(50, thirds, nil), thirds); !c.Active || !mapsClose(c.Group, on.Group, 0) {
		t.Errorf("a thin window moved the correction: %+v", c)
	}
}

// TestCorrectDamped: one reading moves the group's shares half-way to the solve.
func TestCorrectDamped(t *testing.T) {
	m := window(3000, thirds, map[string]uint64{"a": 900})
	first := Correct(Correction{}, m, thirds)
	final := settle(t, m, thirds)
	for name, p := range thirds {
		half := p + (final.Group[name]-p)/2
		if math.Abs(first.Group[name]-half) > 2.0/correctSlots {
			t.Errorf("%s: first step %.4f, want about %.4f (half-way from %.4f to %.4f)", name, first.Group[name], half, p, final.Group[name])
		}
	}
}

// TestCorrectProperty: whatever a window holds (counts from zero to millions, pinned more or
// less than counted, backends the weights do not know), a correction's shares are finite,
// sum to 1, and stay within its bounds of the computed shares.
func TestCorrectProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		k := 2 + r.IntN(5)
		computed := map[string]float64{}
		var sum float64
		for j := range k {
			w := float64(1 + r.IntN(1000))
			computed[string(rune('a'+j))] = w
			sum += w
		}
		for n := range computed {
			computed[n] /= sum
		}
		m := Measured{Backends: map[string]MeasuredBackend{}}
		for j := range k + 1 {
			c := uint64(r.IntN(5000))
			p := uint64(0)
			if r.IntN(2) == 0 && c > 0 {
				p = uint64(r.IntN(int(c) + 1))
			}
			m.Backends[string(rune('a'+j))] = MeasuredBackend{Count: c, Pinned: p}
			m.Total += c
			m.Pinned += p
		}
		var c Correction
		for range 1 + r.IntN(5) {
			c = Correct(c, m, computed)
		}
		if !c.Active {
			continue
		}
		var total float64
		for name, x := range c.Group {
			p := computed[name]
			if math.IsNaN(x) || x < correctLow*p*(1-1e-6) || x > correctHigh*p*(1+1e-6) {
				t.Fatalf("case %d: %s share %v of computed %v (window %+v)", i, name, x, p, m)
			}
			total += x
		}
		if math.Abs(total-1) > 1e-9 {
			t.Fatalf("case %d: shares sum to %v", i, total)
		}
		if _, ok := c.Group[string(rune('a'+k))]; ok {
			t.Fatalf("case %d: a share for a backend without a bucket", i)
		}
	}
}

// TestCorrectionApply: the corrected weights are the computed ones times the correction's
// factors; a reweight between readings carries the factors over; a changed set of backends
// with a bucket, or an inactive correction, leaves the weights as computed.
func TestCorrectionApply(t *testing.T) {
	svc := Located(intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500, 500)), 1, locateAll)[0]
	c := settle(t, window(3000, thirds, map[string]uint64{"a": 900}), thirds)
	got := c.Apply(svc)
	for i, b := range got.Backends {
		if want := c.Group[b.Name] * correctScale; math.Abs(float64(b.Weight)-want) > 1 {
			t.Errorf("%s: weight %d, want %.0f", b.Name, b.Weight, want)
		}
		if svc.Backends[i].Weight != 500 {
			t.Fatal("Apply modified its input")
		}
	}
	// b reweighted to twice a's and c's: its factor applies to the new weight.
	re := svc
	re.Backends = slices.Clone(svc.Backends)
	re.Backends[1].Weight = 1000
	got = c.Apply(re)
	fa, fb := c.Group["a"]/thirds["a"], c.Group["b"]/thirds["b"]
	if r, want := float64(got.Backends[1].Weight)/float64(got.Backends[0].Weight), 2*fb/fa; math.Abs(r-want) > 0.01*want {
		t.Errorf("b/a after the reweight %.3f, want %.3f", r, want)
	}
	// c drained: not the correction's set of buckets.
	dr := svc
	dr.Backends = slices.Clone(svc.Backends)
	dr.Backends[2].Weight = 0
	if got := c.Apply(dr); got.Backends[0].Weight != 500 || got.Backends[2].Weight != 0 {
		t.Errorf("a changed bucket set was corrected: %+v", got.Backends)
	}
	if got := (Correction{}).Apply(svc); got.Backends[0].Weight != 500 {
		t.Errorf("an inactive correction changed the weights")
	}
}

// TestCorrectMostlyPinned: when the group places under a fifth of the window, the correction
// stays off and says why (its few connections cannot carry it).
func TestCorrectMostlyPinned(t *testing.T) {
	c := Correct(Correction{}, window(3000, thirds, map[string]uint64{"a": 2000, "b": 500}), thirds)
	if c.Active || !strings.Contains(c.Why, "too few to correct") {
		t.Fatalf("active %v: %s", c.Active, c.Why)
	}
}

// TestWindowRecent: Recent keeps the latest samples that hold n counts, and the skips
// within them.
func TestWindowRecent(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var w Window
	w.Span = MeasureWindow
	for i := range 5 {
		from := t0.Add(time.Duration(i) * time.Second)
		w = w.Add(Sample{From: from, To: from.Add(time.Second), Counts: map[string]uint64{"a": 100, "b": 50}})
	}
	w = w.Skip(t0.Add(1500 * time.Millisecond)).Skip(t0.Add(3500 * time.Millisecond))
	r := w.Recent(300)
	if len(r.Samples) != 2 || !r.Samples[0].From.Equal(t0.Add(3*time.Second)) || len(r.Skips) != 1 {
		t.Fatalf("Recent(300): %d samples from %v, %d skips; want the last 2 and 1 skip", len(r.Samples), r.Samples[0].From, len(r.Skips))
	}
	if r := w.Recent(10_000); len(r.Samples) != 5 || len(r.Skips) != 2 {
		t.Fatalf("Recent past the window: %d samples, %d skips", len(r.Samples), len(r.Skips))
	}
	if r := (Window{}).Recent(10); len(r.Samples) != 0 {
		t.Fatal("Recent of nothing")
	}
}
