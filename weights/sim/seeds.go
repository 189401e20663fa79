package sim

import (
	"fmt"
	"io"
	"strings"

	"flowweight/weights"
)

// SeedRow is one policy in one scenario at one load, run once per seed: the p99 of each run
// and its ratio to the oracle's p99 on the same seed (the same arrivals and sizes).
type SeedRow struct {
	Scenario Scenario
	Load     float64
	Label    string
	P99      []float64 // seconds, one per seed
	Ratio    []float64 // P99 ÷ the oracle's on that seed
}

// SeedVariants are the headroom tunings the seed table compares with the oracle: the
// default, and slower learning (the learned capacity is the noise source at 95 % load).
var SeedVariants = []struct {
	Label string
	Mod   func(*weights.Tuning)
}{
	{"headroom (default)", func(*weights.Tuning) {}},
	{"headroom, learn.rate 0.1", func(t *weights.Tuning) { t.Learn.Rate = 0.1 }},
}

// Seeds runs the headroom variants and the oracle at 80 and 95 % load in every scenario, once
// per seed, so the spread of p99 across seeds is seen instead of a two-seed mean. The reference
// is the oracle (shares ∝ the speed the service gets) in every scenario, scenario C included.
func Seeds(o TableOptions) ([]SeedRow, error) {
	o.defaults()
	var rows []SeedRow
	for _, rho := range []float64{0.8, 0.95} {
		for _, sc := range []Scenario{ScenarioRight, ScenarioEqual, ScenarioNeighbours} {
			cfg := func(p Policy, seed uint64, mod func(*weights.Tuning)) Config {
				t := weights.DefaultTuning()
				mod(&t)
				return Config{Backends: Pool(sc), Load: rho, Jobs: o.Jobs, Seed: seed, Policy: p,
					Tuning: t, ServiceCPU: true, OVSSlots: o.OVSSlots}
			}
			var cfgs []Config
			for _, s := range o.Seeds {
				cfgs = append(cfgs, cfg(Oracle, s, func(*weights.Tuning) {}))
			}
			for _, v := range SeedVariants {
				for _, s := range o.Seeds {
					cfgs = append(cfgs, cfg(Headroom, s, v.Mod))
				}
			}
			rs, err := RunAll(cfgs)
			if err != nil {
				return nil, err
			}
			n := len(o.Seeds)
			labels := []string{"oracle"}
			for _, v := range SeedVariants {
				labels = append(labels, v.Label)
			}
			for k, l := range labels {
				r := SeedRow{Scenario: sc, Load: rho, Label: l}
				for i := range n {
					p := rs[k*n+i].P99
					r.P99 = append(r.P99, p)
					r.Ratio = append(r.Ratio, p/rs[i].P99)
				}
				rows = append(rows, r)
			}
		}
	}
	return rows, nil
}

// WriteSeeds prints one line per row: the mean and the worst ratio to the oracle, how many
// seeds stay at or under 1.0, and every seed's ratio.
func WriteSeeds(w io.Writer, rows []SeedRow) {
	fmt.Fprintln(w, "| ρ | scenario | policy | mean p99 ÷ oracle | worst seed | seeds ≤ 1.0 | per seed |")
	fmt.Fprintln(w, "|---:|---|---|---:|---:|---:|---|")
	for _, r := range rows {
		if r.Label == "oracle" {
			continue
		}
		var sum, worst float64
		ok := 0
		var each []string
		for _, q := range r.Ratio {
			sum += q
			worst = max(worst, q)
			if q <= 1 {
				ok++
			}
			each = append(each, fmt.Sprintf("%.2f", q))
		}
		fmt.Fprintf(w, "| %.2f | %s | %s | %.2f | %.2f | %d of %d | %s |\n", r.Load, r.Scenario, r.Label,
			sum/float64(len(r.Ratio)), worst, ok, len(r.Ratio), strings.Join(each, ", "))
	}
}
