package weights

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestPolicyTraits: every valid name chooses the policy of that name, and the traits that
// Compute, Worth and the fast loop read from it are the ones the policies are documented
// with: the adaptive ones learn and are damped, the fixed splits have no dead-band and no
// fast loop, least_conn is neither.
func TestPolicyTraits(t *testing.T) {
	cases := []struct {
		name            PolicyName
		adaptive, fixed bool
	}{
		{PolicyHeadroom, true, false},
		{PolicyDynamic, true, false},
		{PolicyLeastConn, false, false},
		{PolicyStatic, false, true},
		{PolicyEqual, false, true},
	}
	for _, c := range cases {
		if err := c.name.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p := c.name.Policy()
		if p.Name() != c.name || p.Adaptive() != c.adaptive || p.Fixed() != c.fixed {
			t.Errorf("%s: Policy() = %s adaptive %v fixed %v, want adaptive %v fixed %v",
				c.name, p.Name(), p.Adaptive(), p.Fixed(), c.adaptive, c.fixed)
		}
		tun := DefaultTuning()
		tun.Policy, tun.InFlightPeriod = c.name, 50*time.Millisecond
		if tun.FollowsInFlight() == c.fixed {
			t.Errorf("%s: FollowsInFlight() = %v, want %v", c.name, tun.FollowsInFlight(), !c.fixed)
		}
	}
}

// TestPolicySharesAreTheirOwn: with damping, learning, the floor and the step limit out of
// the way, each policy's targets are exactly its documented raw shares, normalised.
func TestPolicySharesAreTheirOwn(t *testing.T) {
	in := []Backend{
		{Name: "a", Status: StatusUp, HasMetrics: true, CPU: .2, CPUCount: 2, Conns: 3},
		{Name: "b", Status: StatusUp, HasMetrics: true, CPU: .6, CPUCount: 4, Conns: 9},
		{Name: "c", Status: StatusUp, HasMetrics: true, CPU: .5, CPUCount: 2, Conns: 0},
	}
	tun := cpuOnly()
	tun.Learn.Enabled, tun.Floor, tun.MaxStep = false, 0, 1
	c := []float64{2.0 / (8.0 / 3), 4.0 / (8.0 / 3), 2.0 / (8.0 / 3)} // C at a pool mean of 1
	raw := map[PolicyName]func(i int) float64{
		PolicyStatic:    func(i int) float64 { return c[i] },
		PolicyEqual:     func(int) float64 { return 1 },
		PolicyLeastConn: func(i int) float64 { return c[i] / (in[i].Conns + 1) },
		PolicyDynamic:   func(i int) float64 { return c[i] / in[i].CPU },
	}
	for name, share := range raw {
		tun.Policy = name
		var r Result
		Compute(in, tun, &r)
		var sum float64
		for i := range in {
			sum += share(i)
		}
		for i, e := range r.Backends {
			if want := share(i) / sum; !near(e.Target, want, 1e-12) {
				t.Errorf("%s: backend %s target %v, want %v", name, e.Name, e.Target, want)
			}
		}
	}
}

// TestUnknownPolicyRunsDynamic: Validate rejects an unknown name; should one reach Compute
// all the same, it runs as the dynamic policy rather than as a policy of its own.
func TestUnknownPolicyRunsDynamic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	in := randomPool(rng, 8)
	dyn, odd := DefaultTuning(), DefaultTuning()
	dyn.Policy, odd.Policy = PolicyDynamic, "fastest"
	if odd.Policy.Validate() == nil {
		t.Fatal("an unknown name validates")
	}
	var a, b Result
	Compute(in, dyn, &a)
	Compute(in, odd, &b)
	for i := range a.Backends {
		if a.Backends[i] != b.Backends[i] {
			t.Fatalf("backend %d: %+v under an unknown name, %+v under dynamic", i, b.Backends[i], a.Backends[i])
		}
	}
}

func near(a, b, eps float64) bool { return a-b <= eps && b-a <= eps }
