package balancer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"flowweight/controller/config"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
	"flowweight/weights"

	"github.com/prometheus/client_golang/prometheus"
)

// liveState is everything of a service's live computation that a shadow must never touch:
// the result as JSON (byte for byte), the applied weights, the books (learned capacity,
// damping history, throughput) and what the switches are handed.
func liveState(t *testing.T, b *Balancer) string {
	t.Helper()
	s := b.services[0]
	res, err := json.Marshal(struct {
		Backends             []weights.Explanation
		Total, Fallback      int
		Panic, Stepped, Hold bool
		Applied, Out         []uint16
		Learned, Prev, Thr   []float64
		IntentSeq, IntentGen uint64
		IntentWeights        []uint16
	}{Backends: s.result.Backends, Total: s.result.Total, Fallback: s.result.Fallback, Panic: s.result.Panic,
		Stepped: s.result.Stepped, Hold: s.hold, Applied: s.applied, Out: s.out(),
		Learned: bookField(s, func(k book) float64 { return k.learned }), Prev: bookField(s, func(k book) float64 { return k.prevShare }),
		Thr: bookField(s, func(k book) float64 { return k.throughput }), IntentSeq: b.latest.Load().Seq, IntentGen: b.latest.Load().Gen,
		IntentWeights: intentWeights(b)})
	if err != nil {
		t.Fatal(err)
	}
	return string(res)
}

func bookField(s *service, f func(book) float64) []float64 {
	out := make([]float64, len(s.books))
	for j, k := range s.books {
		out[j] = f(k)
	}
	return out
}

func intentWeights(b *Balancer) []uint16 {
	var out []uint16
	for _, s := range b.latest.Load().Services {
		for _, be := range s.Backends {
			out = append(out, be.Weight)
		}
	}
	return out
}

// shadowPair is two balancers on the same configuration, the second with shadow_policy
// shadow, fed the same reports on clocks that move together.
func shadowPair(t *testing.T, live, shadow string) (plain, shadowed *Balancer, feed func(step int)) {
	t.Helper()
	var clks [2]*testutil.Clock
	var bs [2]*Balancer
	for i := range bs {
		c := testConfig(t, fmt.Sprintf("policy = %q", live))
		c.Services[0].Backends = append(c.Services[0].Backends, config.Backend{Name: "c", IP: "10.0.0.3", Port: 80, Source: "probe", Capacity: 2})
		if i == 1 {
			c.Services[0].ShadowPolicy = weights.PolicyName(shadow)
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		clks[i] = testutil.NewClock(time.Unix(1e9, 0))
		b, err := New(c, Options{Now: clks[i].Now})
		if err != nil {
			t.Fatal(err)
		}
		bs[i] = b
	}
	seq := uint64(0)
	feed = func(step int) {
		seq++
		for i, b := range bs {
			for k, id := range []string{"a", "b", "c"} {
				// Loads that differ per backend and move every step, so that every policy
				// has something to learn, damp and step-limit.
				cpu := 0.2 + 0.15*float64(k) + 0.1*float64((step*(k+2))%5)
				r := &report.Report{BackendID: id, Seq: seq, Flags: report.FlagHealthOK, CPUUtil: cpu, CPUCount: float64(2 + 2*k),
					MemUtil: 0.2, MemBytes: 1 << 30, Conns: uint32(10 * (k + 1) * (step%3 + 1)), Time: clks[i].Now(),
					Signals: report.SignalServiceCPU, ServiceCPU: cpu * 0.7}
				b.pool.Accept(r, netip.AddrPort{})
			}
		}
		for i, b := range bs {
			clks[i].Advance(time.Second)
			// Give the books a throughput too (the switch's counters, which this test has no
			// switch for), so the adaptive policies learn capacity.
			for j := range b.services[0].books {
				b.services[0].books[j].throughput = float64(1000 * (j + 1) * (step%4 + 1))
			}
			b.update(context.Background(), step%3 != 2) // every third a kick
		}
	}
	return bs[0], bs[1], feed
}

// TestShadowNeverChangesLive: a service with a shadow policy computes, applies and hands the
// switches exactly what the same service without one does, update after update (periods and
// kicks), byte for byte, for every pair of policies; and the shadow did show other weights.
func TestShadowNeverChangesLive(t *testing.T) {
	policies := []string{"headroom", "dynamic", "static", "equal", "least_conn"}
	for _, live := range policies {
		for _, shadow := range policies {
			if live == shadow {
				continue
			}
			t.Run(live+"/"+shadow, func(t *testing.T) {
				plain, shadowed, feed := shadowPair(t, live, shadow)
				differed := false
				for step := range 40 {
					feed(step)
					if got, want := liveState(t, shadowed), liveState(t, plain); got != want {
						t.Fatalf("step %d: live state with shadow %s differs from without:\n with: %s\n none: %s", step, shadow, got, want)
					}
					sh := shadowed.services[0].shadow
					if sh == nil || len(sh.held) != 3 {
						t.Fatalf("step %d: no shadow weights: %+v", step, sh)
					}
					differed = differed || !slices.Equal(sh.held, shadowed.services[0].applied)
					if plain.services[0].shadow != nil {
						t.Fatal("a service without shadow_policy has a shadow")
					}
				}
				if !differed {
					t.Errorf("the %s shadow never differed from the live %s weights: the comparison shows nothing", shadow, live)
				}
			})
		}
	}
}

// reloadShadow reloads b's configuration with shadow_policy set to shadow ("" removes it)
// and runs the reload's kicked update.
func reloadShadow(t *testing.T, b *Balancer, shadow string, canary ...string) {
	t.Helper()
	next := testConfig(t, "")
	next.Weighting = b.Config().Weighting
	next.Collector.KeyFile = b.Config().Collector.KeyFile
	next.Services[0].Backends = slices.Clone(b.Config().Services[0].Backends)
	next.Services[0].ShadowPolicy = weights.PolicyName(shadow)
	next.Services[0].CanaryDatapaths = canary
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(next); err != nil {
		t.Fatal(err)
	}
	b.update(context.Background(), false)
}

// TestShadowReloadLifecycle: adding, changing and removing shadow_policy by reload shows and
// removes the shadow in the API and flowweight_backend_weight_shadow, and never changes the
// weights applied or the flows the switches are given.
func TestShadowReloadLifecycle(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b := staticPool(t, clk, "", 1, 2, 4) // static: 143, 286, 571
	reg := prometheus.NewRegistry()
	if err := b.metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	periods(b, clk, 12) // past warm-up
	applied := slices.Clone(b.services[0].applied)
	flows, groups := desiredFor(b, 1)
	steps := []struct {
		shadow string
		want   map[string]float64 // the shadow series; nil: none
	}{
		{"", nil},
		{"equal", map[string]float64{"be1": 334, "be2": 333, "be3": 333}},
		{"least_conn", map[string]float64{"be1": 143, "be2": 286, "be3": 571}}, // equal connections: by capacity
		{"equal", map[string]float64{"be1": 334, "be2": 333, "be3": 333}},
		{"", nil},
	}
	for i, st := range steps {
		if i > 0 {
			reloadShadow(t, b, st.shadow)
		}
		periods(b, clk, 2)
		got := gathered(t, reg, "flowweight_backend_weight_shadow", "backend")
		if st.want == nil && len(got) != 0 || st.want != nil && !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d (shadow %q): series %v, want %v", i, st.shadow, got, st.want)
		}
		v := b.View().Services()[0]
		if v.ShadowPolicy != st.shadow {
			t.Errorf("step %d: API shadow_policy %q, want %q", i, v.ShadowPolicy, st.shadow)
		}
		for _, bv := range v.Backends {
			switch {
			case st.want == nil && (bv.ShadowWeight != nil || bv.ShadowShare != nil):
				t.Errorf("step %d: backend %s shows a shadow without a shadow policy", i, bv.Name)
			case st.want != nil && (bv.ShadowWeight == nil || float64(*bv.ShadowWeight) != st.want[bv.Name] || *bv.ShadowShare != st.want[bv.Name]/1000):
				t.Errorf("step %d: backend %s shadow weight %v share %v, want %v", i, bv.Name, bv.ShadowWeight, bv.ShadowShare, st.want[bv.Name])
			}
		}
		if got := b.services[0].applied; !slices.Equal(got, applied) {
			t.Errorf("step %d (shadow %q): applied %v, want %v as before", i, st.shadow, got, applied)
		}
		if f, g := desiredFor(b, 1); !reflect.DeepEqual(f, flows) || !reflect.DeepEqual(g, groups) {
			t.Errorf("step %d (shadow %q): the switches' desired state changed", i, st.shadow)
		}
	}
}

// TestShadowStateAcrossReload: a reload that keeps the shadow policy keeps its learned
// capacity, previous shares and weights for the backends that remain (by name, in the new
// order); a changed shadow policy, or none before, starts afresh.
func TestShadowStateAcrossReload(t *testing.T) {
	oldCfg := config.Service{Name: "web", ShadowPolicy: "dynamic", Backends: []config.Backend{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	old := &service{cfg: oldCfg, shadow: &shadow{tuning: weights.Tuning{Policy: "dynamic"},
		books: []book{{learned: 1.1, prevShare: 0.2}, {learned: 1.2, prevShare: 0.3}, {learned: 1.3, prevShare: 0.5}},
		held:  []uint16{200, 300, 500}}}
	next := []config.Backend{{Name: "c"}, {Name: "d"}, {Name: "a"}} // b removed, d added, reordered
	cases := []struct {
		name    string
		shadow  string
		old     *service
		learned []float64
		held    []uint16
	}{
		{"same policy", "dynamic", old, []float64{1.3, 0, 1.1}, []uint16{500, 0, 200}},
		{"changed policy", "equal", old, []float64{0, 0, 0}, nil},
		{"none before", "dynamic", &service{cfg: oldCfg}, []float64{0, 0, 0}, nil},
		{"new service", "dynamic", nil, []float64{0, 0, 0}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sh := newShadow(&config.Service{Name: "web", ShadowPolicy: weights.PolicyName(c.shadow), Backends: next}, weights.Tuning{Policy: "static"}, c.old)
			if sh.tuning.Policy != weights.PolicyName(c.shadow) {
				t.Fatalf("tuning policy %q", sh.tuning.Policy)
			}
			if got := bookField(&service{books: sh.books}, func(k book) float64 { return k.learned }); !slices.Equal(got, c.learned) {
				t.Errorf("learned %v, want %v", got, c.learned)
			}
			if !slices.Equal(sh.held, c.held) {
				t.Errorf("held %v, want %v", sh.held, c.held)
			}
		})
	}
	if newShadow(&config.Service{Name: "web", Backends: next}, weights.Tuning{}, old) != nil {
		t.Error("a service without shadow_policy got a shadow")
	}
}
