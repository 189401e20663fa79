package main

import (
	"fmt"
	"strings"
	"time"

	"flowweight/e2e/scenario"
)

// stepRuns are the peers of the step and overload experiments.
func (pl *peerLab) stepRuns() []policyRun {
	var out []policyRun
	for _, r := range pl.peerRuns() {
		if r.label == labelFWDefault || r.label == labelHAWeighted || r.label == labelFixed || r.label == labelFWReactive {
			out = append(out, r)
		}
	}
	return out
}

// idleFor waits out the idle period before a step: nothing is waited for, the idleness is
// the experiment.
func idleFor(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// step goes from idle (-idle with no load) to 80 % of the capacity for -measure, per peer,
// repeated and rotated: the p99 over the whole step and per 5 s window.
func (b *bench) step() error {
	pl, stop, err := b.setupPeers()
	if err != nil {
		return err
	}
	defer stop()
	pl.header(fmt.Sprintf("Step: idle for %v, then 80 %% of the capacity for %v", b.idle, b.measure))
	s := pl.s
	runs := b.selected(pl.stepRuns())
	rate := 0.8 * pl.capacity
	window := min(5*time.Second, b.measure)
	reps := b.repeatOr(3)
	fmt.Printf("| repetition | peer | requests ok | failed (by kind) | p99 of all over the step | p99 of all per %v window | max | balancer CPU (cores) | generator's max lag |\n", window)
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	var results []runResult
	for rep := range reps {
		for j := range runs {
			r := runs[(j+rep)%len(runs)]
			if err := configure(s, r); err != nil {
				return fmt.Errorf("step %s: %w", r.label, err)
			}
			idleFor(b.idle)
			lo := poisson(r, seedOf(0.8, rep), scenario.Phase{Rate: rate, Duration: b.measure})
			lo.Window = window
			res, bal, _, err := measureLoad(s, r, lo)
			if err != nil {
				return fmt.Errorf("step %s: %w", r.label, err)
			}
			results = append(results, runResult{level: 0.8, rep: rep, run: r, res: res, bal: bal})
			fmt.Printf("| #%d | %s | %d | %s | %s | %s | %s | %s | %s |\n", rep+1, r.label, res.OK, failedCell(res), allCell(res),
				windowsCell(res.Windows), ms(res.Max), bal, ms(res.MaxLag))
		}
	}
	fmt.Println()
	fmt.Printf("Offered: %.0f req/s (80 %% of %.1f).\n\n", rate, pl.capacity)
	printPeerMedians(results, []float64{0.8}, runs)
	printPeerRatios(results, []float64{0.8})
	return nil
}

// windowsCell is a run's p99 of all per window, "failed" where a window's p99 is a failure.
func windowsCell(ws []scenario.Window) string {
	var parts []string
	for _, w := range ws {
		c := ms(w.P99All)
		if w.P99Failed {
			c = "failed"
		}
		if w.Errors > 0 {
			c += fmt.Sprintf(" (%d failed)", w.Errors)
		}
		parts = append(parts, c)
	}
	return strings.Join(parts, ", ")
}

// downEvents counts the controller's state events to down and to stale between t0 and t1.
func downEvents(s *scenario.Scenario, t0, t1 time.Time) (down, stale int, err error) {
	var evs []scenario.Event
	if err := s.API("/api/v1/events", &evs); err != nil {
		return 0, 0, err
	}
	for _, e := range evs {
		if e.Kind != "state" || e.Time.Before(t0) || e.Time.After(t1) {
			continue
		}
		switch {
		case strings.Contains(e.Text, "-> down"):
			down++
		case strings.Contains(e.Text, "-> stale"):
			stale++
		}
	}
	return down, stale, nil
}

// overload measures each peer at 80 % (-measure), then 110 % for -measure followed at once by
// 80 % for -measure: the failures during the overload, the backends evicted meanwhile, and
// the p99 of the first half-window after the load drops against the 80 % figure before, when
// that figure held again, and the backlog the overload left.
func (b *bench) overload() error {
	pl, stop, err := b.setupPeers()
	if err != nil {
		return err
	}
	defer stop()
	pl.header(fmt.Sprintf("Overload: 80 %% for %v, then 110 %% for %v and at once 80 %% for %v", b.measure, b.measure, b.measure))
	s := pl.s
	runs := b.selected(pl.stepRuns())
	lo80, hi := 0.8*pl.capacity, 1.1*pl.capacity
	half := b.measure / 2
	reps := b.repeatOr(3)
	fmt.Printf("| repetition | peer | p99 of all at 80 %% | failed during 110 %% (by kind) | p99 of all per %v window from the overload on | evictions during the run | p99 of all, first %v after the drop | that / the 80 %% p99 | the 80 %% p99 again from | answered requests open at the drop, and about the time to clear them | first packets dropped, overload and after (flowweight) |\n", half, half)
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for rep := range reps {
		for j := range runs {
			r := runs[(j+rep)%len(runs)]
			if err := configure(s, r); err != nil {
				return fmt.Errorf("overload %s: %w", r.label, err)
			}
			seed := seedOf(1.1, rep)
			if err := settle(s, r, lo80, seed); err != nil {
				return fmt.Errorf("overload %s: settle: %w", r.label, err)
			}
			t0 := time.Now()
			downs0 := 0
			if r.hap != nil {
				downs0 = r.hap.downs()
			}
			steady, _, _, err := measureLoad(s, r, poisson(r, seed+1, scenario.Phase{Rate: lo80, Duration: b.measure}))
			if err != nil {
				return fmt.Errorf("overload %s: %w", r.label, err)
			}
			lo := poisson(r, seed, scenario.Phase{Rate: hi, Duration: b.measure}, scenario.Phase{Rate: lo80, Duration: b.measure})
			lo.Window = half
			var drops0 dropCounts
			if r.hap == nil {
				if drops0, err = readDrops(s); err != nil {
					return fmt.Errorf("overload %s: %w", r.label, err)
				}
			}
			res, _, _, err := measureLoad(s, r, lo)
			if err != nil {
				return fmt.Errorf("overload %s: %w", r.label, err)
			}
			drops := "–"
			if r.hap == nil {
				d, err := readDrops(s)
				if err != nil {
					return fmt.Errorf("overload %s: %w", r.label, err)
				}
				drops = d.since(drops0)
			}
			evictions := ""
			if r.hap != nil {
				evictions = fmt.Sprintf("%d (HAProxy \"is DOWN\")", r.hap.downs()-downs0)
			} else {
				d, st, err := downEvents(s, t0, time.Now())
				if err != nil {
					return err
				}
				evictions = fmt.Sprintf("%d (down %d, stale %d)", d+st, d, st)
			}
			failed, offered, afterW, okAfter := splitAtDrop(res.Windows, b.measure)
			overKinds := ""
			if res.Errors > 0 {
				overKinds = " (whole run: " + res.ErrSummary() + ")"
			}
			after, ratio := "–", "–"
			if okAfter {
				after = ms(afterW.P99All)
				if afterW.P99Failed {
					after = "failed"
				}
				ratio = plainRatio(scenario.LoadResult{P99All: afterW.P99All, P99Failed: afterW.P99Failed}, steady)
			}
			back := "–"
			if !steady.P99Failed {
				back = fmt.Sprintf("> %v after the drop", b.measure-half)
				if at, ok := recovery(res, b.measure, half, 2*b.measure, steady.P99All); ok {
					back = fmt.Sprintf("%v after the drop", at)
				}
			}
			waiting := res.AnsweredAcross(b.measure)
			backlog := fmt.Sprintf("%d, %.1f s", waiting, float64(waiting)/(pl.capacity-lo80))
			fmt.Printf("| #%d | %s | %s | %d of %d%s | %s | %s | %s | %s | %s | %s | %s |\n", rep+1, r.label, p99Only(steady), failed, offered,
				overKinds, windowsCell(res.Windows), evictions, after, ratio, back, backlog, drops)
		}
	}
	fmt.Println()
	fmt.Printf("Offered: 80 %% = %.0f req/s, 110 %% = %.0f req/s of %.1f. Failures by scheduled arrival time; the overload's stragglers answered after it count in its windows.\n", lo80, hi, pl.capacity)
	fmt.Printf("\"The 80 %% p99 again from\": the first whole second after the drop from which the p99 of all over the next %v is at or below the run's 80 %% figure. \"About the time to clear them\": the requests scheduled before the drop and answered after it (not those that failed, and some partly served, or sent late by the generator), over the spare capacity at 80 %% (%.1f req/s); a balancer that answers every request is back at about the earliest when its backlog is served (the backends share their CPU between old and new requests). \"Again from\" compares a half-window's p99 with a whole run's, strictly: a run already back meets it about half the time.\n\n", half, pl.capacity-lo80)
	return nil
}

// recovery is the first whole second after drop from which the p99 of all over the next
// window is at or below steady (the 80 % figure): when that figure held again. Only starts
// whose window ends by end are tried.
func recovery(res scenario.LoadResult, drop, window, end, steady time.Duration) (time.Duration, bool) {
	for at := time.Duration(0); drop+at+window <= end; at += time.Second {
		if p99, failed, n := res.Between(drop+at, drop+at+window); n > 0 && !failed && p99 <= steady {
			return at, true
		}
	}
	return 0, false
}

// splitAtDrop reads an overload run's windows: the failures and arrivals of those that start
// before drop (the overload), and the first window from drop on (the load just dropped).
func splitAtDrop(ws []scenario.Window, drop time.Duration) (failed, offered int, after scenario.Window, ok bool) {
	for _, w := range ws {
		if w.Start < drop {
			failed += w.Errors
			offered += w.Offered
			continue
		}
		if !ok {
			after, ok = w, true
		}
	}
	return failed, offered, after, ok
}

// plainRatio is num's p99 of all over den's, without a target.
func plainRatio(num, den scenario.LoadResult) string {
	switch {
	case num.P99Failed && den.P99Failed:
		return "– (both failures)"
	case num.P99Failed:
		return "∞ (a failure)"
	case den.P99Failed:
		return "– (the 80 % p99 is a failure)"
	case den.P99All <= 0:
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(num.P99All)/float64(den.P99All))
}
