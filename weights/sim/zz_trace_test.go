package sim

import (
	"fmt"
	"testing"

	"flowweight/weights"
)

func TestZZTrace(t *testing.T) {
	for _, seed := range []uint64{11, 5} {
		c := Config{Backends: Pool(ScenarioEqual), Load: 0.95, Jobs: 2_000_000, Seed: seed, Policy: Headroom,
			Tuning: weights.DefaultTuning(), ServiceCPU: true, OVSSlots: true, Trace: true}
		r, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("seed %d p99 %.0f util %v mean shares %v rewrites %d\n", seed, r.P99*1000, r.Util, r.MeanShares, r.Rewrites)
		// histogram of slow and fast shares
		hs := map[int]int{}
		hf := map[int]int{}
		for _, p := range r.Trace {
			hs[int(p.Shares[0]*1000)/5*5]++
			hf[int(p.Shares[2]*1000)/5*5]++
		}
		fmt.Println(" slow share permille buckets:", hs)
		fmt.Println(" fast share permille buckets:", hf)
	}
}
