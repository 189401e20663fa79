// Command fwsim runs the balancing-quality simulator (flowweight/weights/sim) and prints
// Markdown tables: policy quality at three loads in two scenarios, how the dynamic weights
// settle after a load step under four tunings, and how sensitive the dynamic policy's p99 is
// to each tuning knob; -table seeds shows the headroom policy against the oracle seed by seed.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"flowweight/weights/sim"
)

func main() {
	seed := flag.Uint64("seed", 1, "first seed; every cell also runs seed+1, and the tables show the spread")
	jobs := flag.Int("jobs", 2_000_000, "arrivals per quality run")
	table := flag.String("table", "all", "quality | oscillation | tuning | all | seeds | fastloop | staleness | health (the last four not part of all)")
	nSeeds := flag.Int("seeds", 12, "seeds of -table seeds, from -seed on")
	ovs := flag.Bool("ovs-slots", false, "dispatch through the controller's 256-slot layout on Open vSwitch 3.1.0's select group (controller/dataplane's exact slot model)")
	flag.Parse()
	if *table == "fastloop" || *table == "staleness" || *table == "health" {
		run, write := sim.FastLoop, sim.WriteFastLoop
		switch *table {
		case "staleness":
			run = sim.FastLoopStaleness
		case "health":
			run, write = sim.HealthChecks, sim.WriteHealthChecks
		}
		rows, err := run(sim.TableOptions{Seeds: []uint64{*seed, *seed + 1}, Jobs: min(*jobs, 400_000), OVSSlots: *ovs})
		if err != nil {
			fmt.Fprintln(os.Stderr, "fwsim:", err)
			os.Exit(1)
		}
		fmt.Printf("<!-- fwsim -table %s -seed %d -jobs %d -ovs-slots=%v -->\n", *table, *seed, min(*jobs, 400_000), *ovs)
		write(os.Stdout, rows)
		return
	}
	if *table == "seeds" {
		if err := runSeeds(os.Stdout, *seed, *nSeeds, *jobs, *ovs); err != nil {
			fmt.Fprintln(os.Stderr, "fwsim:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Stdout, *seed, *jobs, *table, *ovs); err != nil {
		fmt.Fprintln(os.Stderr, "fwsim:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, seed uint64, jobs int, table string, ovs bool) error {
	switch table {
	case "quality", "oscillation", "tuning", "all":
	default:
		return fmt.Errorf("-table %q: want quality, oscillation, tuning or all", table)
	}
	if jobs < 1 {
		return fmt.Errorf("-jobs %d: want at least 1", jobs)
	}
	seeds := []uint64{seed, seed + 1}
	start := time.Now()
	fmt.Fprintf(w, "<!-- fwsim -seed %d -jobs %d -table %s -ovs-slots=%v; %s, GOMAXPROCS %d -->\n", seed, jobs, table, ovs,
		runtime.Version(), runtime.GOMAXPROCS(0))
	if table == "quality" || table == "all" {
		o := sim.TableOptions{Seeds: seeds, Jobs: jobs, OVSSlots: ovs}
		cells, err := sim.Quality(o)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n### Balancing quality (%d jobs per run, seeds %d and %d, warm-up 20 min excluded)\n", jobs, seeds[0], seeds[1])
		sim.WriteQuality(w, cells, o)
	}
	if table == "oscillation" || table == "all" {
		o := sim.OscillationOptions{Seeds: seeds}
		runs, err := sim.Oscillation(o)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "\n### Settling after a load step")
		sim.WriteOscillation(w, runs, o)
	}
	if table == "tuning" || table == "all" {
		o := sim.TableOptions{Seeds: seeds, Jobs: jobs}
		oracle, rows, err := sim.Tunings(o)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n### Tuning sensitivity (%d jobs per run, seeds %d and %d)\n", jobs, seeds[0], seeds[1])
		sim.WriteTunings(w, oracle, rows)
	}
	fmt.Fprintf(w, "\n<!-- wall time %v -->\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// runSeeds prints the seed table: headroom against the oracle on n seeds, one ratio per seed.
func runSeeds(w io.Writer, seed uint64, n, jobs int, ovs bool) error {
	if n < 1 || n > 100 {
		return fmt.Errorf("-seeds %d: want 1 to 100", n)
	}
	if jobs < 1 {
		return fmt.Errorf("-jobs %d: want at least 1", jobs)
	}
	var seeds []uint64
	for i := range n {
		seeds = append(seeds, seed+uint64(i))
	}
	start := time.Now()
	rows, err := sim.Seeds(sim.TableOptions{Seeds: seeds, Jobs: jobs, OVSSlots: ovs})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "<!-- fwsim -table seeds -seed %d -seeds %d -jobs %d -ovs-slots=%v; %s, GOMAXPROCS %d -->\n\n", seed, n, jobs, ovs,
		runtime.Version(), runtime.GOMAXPROCS(0))
	sim.WriteSeeds(w, rows)
	fmt.Fprintf(w, "\n<!-- wall time %v -->\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}
