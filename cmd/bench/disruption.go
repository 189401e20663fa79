package main

import (
	"fmt"
	"strings"
	"time"

	"flowweight/e2e/scenario"
)

// reweightCycle are the capacity factors the disruption run alternates between; every step
// moves every backend's bucket.
var reweightCycle = [][]float64{{1, 1, 4}, {4, 1, 1}, {1, 4, 1}}

// disruption opens b.long long-lived connections (a request every 250 ms on each), applies
// b.reweights pinned reweights, each confirmed in dump-groups, and counts the connections
// broken, in conntrack and then stateless mode.
func (b *bench) disruption() error {
	fmt.Printf("## Established connections broken by reweights (%d connections, a request every 250 ms each)\n\n", b.long)
	fmt.Println("| mode | reweights (confirmed in dump-groups) | connections | broken | broken after each reweight (cumulative) | requests answered |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, mode := range []string{scenario.ModeConntrack, scenario.ModeStateless} {
		if err := b.disruptOne(mode); err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
	}
	fmt.Println()
	return nil
}

func (b *bench) disruptOne(mode string) error {
	s, stop, err := b.start(scenario.Options{Mode: mode, Quotas: []float64{0.5, 0.5, 0.5}, Work: 200,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	if err != nil {
		return err
	}
	defer stop()
	if _, err := waitShares(s, []float64{1, 1, 1}, 0.006, 30*time.Second); err != nil {
		return err
	}
	lc, err := s.LongConns(b.long, 250*time.Millisecond, 4*time.Minute)
	if err != nil {
		return err
	}
	defer lc.Stop()
	time.Sleep(time.Second)
	var after []string
	done := 0
	for i := range b.reweights {
		c := reweightCycle[i%len(reweightCycle)]
		if err := s.Reload(c, ""); err != nil {
			return err
		}
		if _, err := waitShares(s, c, 0.006, 20*time.Second); err != nil {
			return fmt.Errorf("reweight %d to %v: %w", i+1, c, err)
		}
		done++
		// Two request periods and more, so every connection has sent on the new buckets.
		time.Sleep(1500 * time.Millisecond)
		after = append(after, fmt.Sprint(lc.Status().Broken))
	}
	// A moved connection may fail only by timeout (5 s per request).
	time.Sleep(6 * time.Second)
	res := lc.Stop()
	fmt.Printf("| %s | %d | %d | %d | %s | %d |\n", mode, done, res.Opened, res.Broken, strings.Join(after, ", "), res.Requests)
	return nil
}
