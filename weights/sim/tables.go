package sim

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"flowweight/weights"
)

// Loads are the offered loads the quality table covers.
var Loads = []float64{0.5, 0.8, 0.95}

// TableOptions chooses what the tables run.
type TableOptions struct {
	Seeds    []uint64 // each cell is run once per seed; the table shows the mean and the spread
	Jobs     int      // arrivals per quality run
	OVSSlots bool
	Policies []Policy // default: Policies
}

func (o *TableOptions) defaults() {
	if len(o.Seeds) == 0 {
		o.Seeds = []uint64{1, 2}
	}
	if o.Jobs == 0 {
		o.Jobs = 2_000_000
	}
	if len(o.Policies) == 0 {
		o.Policies = Policies
	}
}

// Cell is one policy at one scenario and load, over every seed.
type Cell struct {
	Scenario Scenario
	Load     float64
	Policy   Policy
	Runs     []Result  // one per seed
	Split    []float64 // policy Fixed: the split BestFixed found
}

func (c Cell) mean(f func(Result) float64) float64 {
	s := 0.0
	for _, r := range c.Runs {
		s += f(r)
	}
	return s / float64(len(c.Runs))
}

// spread is (max − min) / mean over the seeds, as a fraction.
func (c Cell) spread(f func(Result) float64) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range c.Runs {
		lo, hi = min(lo, f(r)), max(hi, f(r))
	}
	m := c.mean(f)
	if m == 0 {
		return 0
	}
	return (hi - lo) / m
}

func p99(r Result) float64  { return r.P99 }
func mean(r Result) float64 { return r.Mean }

// Quality runs every scenario × load × policy × seed.
func Quality(o TableOptions) ([]Cell, error) {
	o.defaults()
	var cfgs []Config
	var cells []Cell
	for _, sc := range Scenarios {
		for _, rho := range Loads {
			for _, p := range o.Policies {
				cells = append(cells, Cell{Scenario: sc, Load: rho, Policy: p})
				for _, seed := range o.Seeds {
					cfgs = append(cfgs, Config{Backends: Pool(sc), Load: rho, Jobs: o.Jobs, Seed: seed, Policy: p, OVSSlots: o.OVSSlots,
						ServiceCPU: true})
				}
			}
		}
	}
	rs, err := RunAll(cfgs)
	if err != nil {
		return nil, err
	}
	k := len(o.Seeds)
	for i := range cells {
		cells[i].Runs = rs[i*k : (i+1)*k]
	}
	// The noisy-neighbour scenario's reference is the best fixed split, searched for.
	for _, rho := range Loads {
		base := Config{Backends: Pool(ScenarioNeighbours), Load: rho, Jobs: o.Jobs, OVSSlots: o.OVSSlots, ServiceCPU: true}
		split, runs, err := BestFixed(base, o.Seeds)
		if err != nil {
			return nil, err
		}
		cells = append(cells, Cell{Scenario: ScenarioNeighbours, Load: rho, Policy: Fixed, Runs: runs, Split: split})
	}
	return cells, nil
}

func find(cells []Cell, sc Scenario, rho float64, p Policy) *Cell {
	for i := range cells {
		if cells[i].Scenario == sc && cells[i].Load == rho && cells[i].Policy == p {
			return &cells[i]
		}
	}
	return nil
}

// ms formats seconds as milliseconds with thousands separators.
func ms(s float64) string {
	v := int64(math.Round(s * 1000))
	neg := v < 0
	if neg {
		v = -v
	}
	d := fmt.Sprint(v)
	var b strings.Builder
	for i, c := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// WriteQuality prints the quality tables and the target checks as Markdown.
func WriteQuality(w io.Writer, cells []Cell, o TableOptions) {
	o.defaults()
	for _, sc := range Scenarios {
		for _, rho := range Loads {
			fmt.Fprintf(w, "\n#### Scenario %s (%s), ρ = %.2f\n\n", sc, sc.Describe(), rho)
			fmt.Fprintln(w, "| policy | mean ms | p99 ms | p99 spread | p99 / oracle | jobs/s | util: peak backend / worst interval | rewrites (per hour) | mean shares |")
			fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---|")
			or := find(cells, sc, rho, Oracle)
			for _, p := range append(o.Policies, Fixed) {
				c := find(cells, sc, rho, p)
				if c == nil {
					continue
				}
				ratio := "—"
				if or != nil {
					ratio = fmt.Sprintf("%.2f", c.mean(p99)/or.mean(p99))
				}
				peak := c.mean(func(r Result) float64 { return r.PeakUtil })
				note := ""
				if peak > 0.995 {
					note = " (saturated: grows with run length)"
				}
				rw, shares := "—", "—"
				if c.Split != nil {
					shares = "searched: " + fmtShares(c.Split)
				}
				if c.Runs[0].FinalShares != nil {
					hours := c.mean(func(r Result) float64 { return r.Window }) / 3600
					rw = fmt.Sprintf("%.0f (%.0f)", c.mean(func(r Result) float64 { return float64(r.Rewrites) }),
						c.mean(func(r Result) float64 { return float64(r.Rewrites) })/hours)
					shares = fmtShares(c.Runs[0].MeanShares)
				}
				name := string(p)
				if p == Fixed {
					name = "best fixed split"
				}
				fmt.Fprintf(w, "| %s | %s | %s%s | %.1f%% | %s | %.1f | %.3f / %.3f | %s | %s |\n", name,
					ms(c.mean(mean)), ms(c.mean(p99)), note, 100*c.spread(p99), ratio,
					c.mean(func(r Result) float64 { return r.Throughput }), peak,
					c.mean(func(r Result) float64 { return r.PeakIntervalUtil }), rw, shares)
			}
		}
	}
	WriteTargets(w, cells)
}

func fmtShares(s []float64) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, " / ")
}

// WriteTargets prints the targets: the headroom policy's p99 at most the reference's (the
// oracle; for the noisy neighbours the best fixed split searched for) at 80 % and 95 % load,
// 1/AL's within 1.3× of the oracle, and the order of mean response times round robin > least
// connections > flowweight.
func WriteTargets(w io.Writer, cells []Cell) {
	fmt.Fprint(w, "\n#### Targets\n\n")
	fmt.Fprintln(w, "| scenario | ρ | reference | headroom p99 / reference | ≤ 1.0 at ρ ≥ 0.8? | per seed | dynamic (1/AL) p99 / oracle | ≤ 1.3? | mean ms: round robin / least conn / headroom | order found, worst first |")
	fmt.Fprintln(w, "|---|---:|---|---:|---|---|---:|---|---|---|")
	for _, sc := range Scenarios {
		for _, rho := range Loads {
			h, d, or, rr, lc := find(cells, sc, rho, Headroom), find(cells, sc, rho, Dynamic), find(cells, sc, rho, Oracle),
				find(cells, sc, rho, RoundRobin), find(cells, sc, rho, LeastConn)
			if h == nil || d == nil || or == nil || rr == nil || lc == nil {
				continue
			}
			ref, refName := or, "oracle"
			if f := find(cells, sc, rho, Fixed); f != nil {
				ref, refName = f, "best fixed split"
			}
			ratio := h.mean(p99) / ref.mean(p99)
			met := "—"
			if rho >= 0.8 {
				met = "yes"
				if ratio > 1 {
					met = "**no**"
				}
			}
			var seeds []string
			for i := range h.Runs {
				if i < len(ref.Runs) {
					seeds = append(seeds, fmt.Sprintf("%.2f", h.Runs[i].P99/ref.Runs[i].P99))
				}
			}
			dr := d.mean(p99) / or.mean(p99)
			dmet := "yes"
			if dr > 1.3 {
				dmet = "**no**"
			}
			found := []*Cell{rr, lc, h}
			slices.SortStableFunc(found, func(a, b *Cell) int { return cmp.Compare(b.mean(mean), a.mean(mean)) })
			names := map[Policy]string{RoundRobin: "RR", LeastConn: "LC", Headroom: "headroom"}
			fmt.Fprintf(w, "| %s | %.2f | %s | %.2f | %s | %s | %.2f | %s | %s / %s / %s | %s > %s > %s |\n", sc, rho, refName, ratio, met,
				strings.Join(seeds, ", "), dr, dmet, ms(rr.mean(mean)), ms(lc.mean(mean)), ms(h.mean(mean)),
				names[found[0].Policy], names[found[1].Policy], names[found[2].Policy])
		}
	}
}

// OscillationOptions chooses the load-step experiment.
type OscillationOptions struct {
	Seeds []uint64
	Load  float64       // offered load before the step, of the initial total speed; default 0.6
	At    time.Duration // when the fast backend's speed halves; default 30 min
	Run   time.Duration // simulated length; default 2 h
}

func (o *OscillationOptions) defaults() {
	if len(o.Seeds) == 0 {
		o.Seeds = []uint64{1, 2}
	}
	if o.Load == 0 {
		o.Load = 0.6
	}
	if o.At == 0 {
		o.At = 30 * time.Minute
	}
	if o.Run == 0 {
		o.Run = 2 * time.Hour
	}
}

// StepRun is one variant and seed of the load-step experiment.
type StepRun struct {
	Variant string // a tuning name for the dynamic policy, or a reference policy's name
	Seed    uint64
	Result  Result // statistics are over the time after the step
	// Rel and Abs are the settling with a tolerance of 5% of each share and of 5 share
	// points; zero for the reference policies, which do not learn.
	Rel, Abs Settling
}

// StepConfig is the load-step experiment for one policy, tuning and seed: scenario A, the
// fast backend's true speed halves at o.At (a noisy neighbour), statistics from the step on.
func StepConfig(o OscillationOptions, p Policy, t weights.Tuning, seed uint64) Config {
	o.defaults()
	pool := Pool(ScenarioRight)
	total := 0.0
	for _, b := range pool {
		total += b.Speed
	}
	jobs := int(o.Load * total / 0.1 * o.Run.Seconds())
	return Config{Backends: pool, Load: o.Load, MeanSize: 0.1, Jobs: jobs, Seed: seed, Policy: p,
		Tuning: t, Warmup: o.At, Steps: []Step{{At: o.At, Backend: 2, Factor: 0.5}}, Trace: p == Dynamic}
}

// stepReferences are the policies shown beside the dynamic variants in the load-step table.
var stepReferences = []Policy{Oracle, LeastConn, Static}

// Oscillation runs every variant, and the reference policies, on every seed.
func Oscillation(o OscillationOptions) ([]StepRun, error) {
	o.defaults()
	var cfgs []Config
	var runs []StepRun
	for _, v := range OscillationVariants() {
		for _, seed := range o.Seeds {
			cfgs = append(cfgs, StepConfig(o, Dynamic, v.Tuning, seed))
			runs = append(runs, StepRun{Variant: v.Name, Seed: seed})
		}
	}
	for _, p := range stepReferences {
		for _, seed := range o.Seeds {
			cfgs = append(cfgs, StepConfig(o, p, weights.DefaultTuning(), seed))
			runs = append(runs, StepRun{Variant: string(p), Seed: seed})
		}
	}
	rs, err := RunAll(cfgs)
	if err != nil {
		return nil, err
	}
	for i := range runs {
		runs[i].Result = rs[i]
		if rs[i].Trace != nil {
			runs[i].Rel = Settle(rs[i].Trace, o.At, 0.05, true)
			runs[i].Abs = Settle(rs[i].Trace, o.At, 0.05, false)
		}
		runs[i].Result.Trace = nil
	}
	return runs, nil
}

// WriteOscillation prints the load-step table as Markdown.
func WriteOscillation(w io.Writer, runs []StepRun, o OscillationOptions) {
	o.defaults()
	fmt.Fprintf(w, "\nScenario A at ρ = %.2f; at t = %v the fast backend's true speed halves (4 → 2; the pool's load becomes %.2f, oracle shares 0.200 / 0.400 / 0.400); run %v, statistics from the step on. "+
		"Settled = every share stays within the tolerance of its final value (its mean over the last quarter of the run) for the rest of the run: ±5 share points, or ±5%% of the share (relative). "+
		"\"jitter\" is the largest relative deviation from the final value over the last quarter. Rows in italics are references without weights to settle (their column shows each backend's utilisation after the step instead of shares): the oracle knows the new speed at once; static keeps 1:2:4.\n\n",
		o.Load, o.At, o.Load*7/5, o.Run)
	fmt.Fprintln(w, "| tuning | seed | settled ±5 pts after | rewrites until then | settled ±5% rel. after | rewrites until then | rewrites after step (per hour) | jitter | final shares | mean ms | p99 ms |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
	hours := (o.Run - o.At).Hours()
	after := func(s Settling) string {
		if !s.Settled {
			return "not settled"
		}
		return s.After.Round(time.Second).String()
	}
	for _, r := range runs {
		if r.Rel.Final == nil {
			fmt.Fprintf(w, "| *%s* | %d | — | — | — | — | — | — | util %s | %s | %s |\n", r.Variant, r.Seed,
				fmtShares(r.Result.Util), ms(r.Result.Mean), ms(r.Result.P99))
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %d | %s | %d | %d (%.0f) | %.1f%% | %s | %s | %s |\n", r.Variant, r.Seed,
			after(r.Abs), r.Abs.RewritesToSettle, after(r.Rel), r.Rel.RewritesToSettle,
			r.Rel.RewritesAfter, float64(r.Rel.RewritesAfter)/hours,
			100*r.Rel.MaxDev, fmtShares(r.Rel.Final), ms(r.Result.Mean), ms(r.Result.P99))
	}
}

// Sensitivity is one tuning (or pipeline setting) of the dynamic policy to compare.
type Sensitivity struct {
	Name string
	Mod  func(*Config) // applied to a Config whose Tuning is weights.DefaultTuning()
}

// SensitivityVariants are the settings the tuning table compares with the defaults: the ones
// whose change moved p99 at ρ = 0.95 by more than the seed spread, and the realism knob.
func SensitivityVariants() []Sensitivity {
	return []Sensitivity{
		{"defaults", func(*Config) {}},
		{"dead_band = 0", func(c *Config) { c.Tuning.DeadBand = 0 }},
		{"dead_band = 0.005", func(c *Config) { c.Tuning.DeadBand = 0.005 }},
		{"dead_band = 0.005, learn.rate = 0.05", func(c *Config) { c.Tuning.DeadBand = 0.005; c.Tuning.Learn.Rate = 0.05 }},
		{"learn.rate = 0.05", func(c *Config) { c.Tuning.Learn.Rate = 0.05 }},
		{"alpha = 0.5", func(c *Config) { c.Tuning.Alpha = 0.5 }},
		{"alpha = 0.1", func(c *Config) { c.Tuning.Alpha = 0.1 }},
		{"gain = 1", func(c *Config) { c.Tuning.Gain = 1 }},
		{"floor = 0", func(c *Config) { c.Tuning.Floor = 0 }},
		{"sample = update = 1s", func(c *Config) { c.Sample, c.Update = time.Second, time.Second }},
		{"update = 30s (sample 5s)", func(c *Config) { c.Update = 30 * time.Second }},
		{"Open vSwitch slot table", func(c *Config) { c.OVSSlots = true }},
	}
}

// sensitivityCells are the (scenario, load) pairs of the tuning table.
var sensitivityCells = []struct {
	sc  Scenario
	rho float64
}{{ScenarioEqual, 0.8}, {ScenarioRight, 0.95}, {ScenarioEqual, 0.95}}

// SensitivityRow is one variant over sensitivityCells; Runs[cell][seed].
type SensitivityRow struct {
	Name string
	Runs [][]Result
}

// Tunings runs every sensitivity variant of the dynamic policy, plus the oracle and static
// weights with the Open vSwitch slot table as references for the last variant.
func Tunings(o TableOptions) (oracle [][]Result, rows []SensitivityRow, err error) {
	o.defaults()
	var cfgs []Config
	add := func(p Policy, sc Scenario, rho float64, mod func(*Config)) {
		for _, seed := range o.Seeds {
			c := Config{Backends: Pool(sc), Load: rho, Jobs: o.Jobs, Seed: seed, Policy: p, Tuning: weights.DefaultTuning()}
			mod(&c)
			cfgs = append(cfgs, c)
		}
	}
	for _, sc := range sensitivityCells {
		add(Oracle, sc.sc, sc.rho, func(*Config) {})
	}
	refs := []Sensitivity{
		{"*oracle through the slot table*", func(c *Config) { c.Policy = Static; c.Backends = Pool(ScenarioRight); c.OVSSlots = true }},
	}
	vs := append(SensitivityVariants(), refs...)
	for _, v := range vs {
		for _, sc := range sensitivityCells {
			add(Dynamic, sc.sc, sc.rho, v.Mod)
		}
	}
	rs, err := RunAll(cfgs)
	if err != nil {
		return nil, nil, err
	}
	k := len(o.Seeds)
	next := func() []Result {
		r := rs[:k]
		rs = rs[k:]
		return r
	}
	for range sensitivityCells {
		oracle = append(oracle, next())
	}
	for _, v := range vs {
		row := SensitivityRow{Name: v.Name}
		for range sensitivityCells {
			row.Runs = append(row.Runs, next())
		}
		rows = append(rows, row)
	}
	return oracle, rows, nil
}

// WriteTunings prints the tuning table as Markdown.
func WriteTunings(w io.Writer, oracle [][]Result, rows []SensitivityRow) {
	fmt.Fprint(w, "\nDynamic policy, one setting changed from weights.DefaultTuning() (or from the pipeline's 5 s sample and update) per row. "+
		"Cells: p99 ÷ the oracle's p99 at the same scenario, load and seeds (mean of the seeds' p99s; the range over seeds in brackets). "+
		"The last row is static weights 1:2:4 (the oracle's split) written through the slot table: what the switch can realise at best.\n\n")
	fmt.Fprint(w, "| setting |")
	for _, sc := range sensitivityCells {
		fmt.Fprintf(w, " %s, ρ=%.2f |", sc.sc, sc.rho)
	}
	fmt.Fprintln(w, " mean ms (B, 0.95) | rewrites per hour (B, 0.95) | mean shares (B, 0.95, seed 1) |")
	fmt.Fprint(w, "|---|")
	for range sensitivityCells {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w, "---:|---:|---|")
	avg := func(rs []Result, f func(Result) float64) float64 {
		s := 0.0
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	for _, row := range rows {
		fmt.Fprintf(w, "| %s |", row.Name)
		for i := range sensitivityCells {
			op := avg(oracle[i], p99)
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, r := range row.Runs[i] {
				lo, hi = min(lo, r.P99/op), max(hi, r.P99/op)
			}
			fmt.Fprintf(w, " %.2f (%.2f–%.2f) |", avg(row.Runs[i], p99)/op, lo, hi)
		}
		last := row.Runs[len(row.Runs)-1]
		sh := "—"
		if last[0].MeanShares != nil {
			sh = fmtShares(last[0].MeanShares)
		}
		fmt.Fprintf(w, " %s | %.0f | %s |\n", ms(avg(last, mean)),
			avg(last, func(r Result) float64 { return float64(r.Rewrites) / max(r.Window, 1) * 3600 }), sh)
	}
}
