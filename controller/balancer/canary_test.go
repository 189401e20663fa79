package balancer

import (
	"slices"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/internal/testutil"
)

// TestCanaryWeightsInTheIntent: with canary_datapaths, the intent carries the shadow's
// weights for the canary switches, whose desired group is the shadow's split while every
// other switch's is the live one; the live weights do not move; a reload that drops the
// canary gives every switch the live split again.
func TestCanaryWeightsInTheIntent(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	b := staticPool(t, clk, "", 1, 2, 4) // static: 143, 286, 571
	periods(b, clk, 12)                  // past warm-up
	applied := slices.Clone(b.services[0].applied)
	liveState, _ := desiredFor(b, 1)

	reload := func(shadow string, canary ...string) {
		t.Helper()
		reloadShadow(t, b, shadow, canary...)
		periods(b, clk, 2)
	}
	weightsOn := func(dpid uint64) []uint16 {
		t.Helper()
		_, svcs := desiredFor(b, dpid)
		var out []uint16
		for _, be := range svcs[0].Backends {
			out = append(out, be.Weight)
		}
		return out
	}

	reload("equal", "0000000000000002")
	in := b.latest.Load()
	if got := in.Services[0].CanaryWeights; !slices.Equal(got, []uint16{334, 333, 333}) || !slices.Equal(in.Services[0].Canary, []uint64{2}) {
		t.Fatalf("intent canary %v weights %v, want [2] and the shadow's [334 333 333]", in.Services[0].Canary, got)
	}
	if got := weightsOn(2); !slices.Equal(got, []uint16{334, 333, 333}) {
		t.Errorf("canary switch plans %v, want the shadow's", got)
	}
	if got := weightsOn(1); !slices.Equal(got, applied) {
		t.Errorf("switch 1 plans %v, want the live %v", got, applied)
	}
	if st, _ := desiredFor(b, 1); !slices.Equal(st.Flows, liveState.Flows) || !slices.EqualFunc(st.Groups, liveState.Groups, dataplane.Group.Equal) {
		t.Errorf("switch 1's desired state changed with a canary elsewhere")
	}
	if got := b.services[0].applied; !slices.Equal(got, applied) {
		t.Errorf("live applied %v, want %v as before", got, applied)
	}
	if v := b.View().Services()[0]; !slices.Equal(v.CanaryDatapaths, []string{"0000000000000002"}) {
		t.Errorf("API canary_datapaths %v", v.CanaryDatapaths)
	}

	reload("equal")
	if got := weightsOn(2); !slices.Equal(got, applied) {
		t.Errorf("after the canary is dropped switch 2 plans %v, want the live %v", got, applied)
	}
	if in := b.latest.Load(); in.Services[0].Canary != nil || in.Services[0].CanaryWeights != nil {
		t.Errorf("intent keeps a canary after the reload dropped it: %v %v", in.Services[0].Canary, in.Services[0].CanaryWeights)
	}
}
