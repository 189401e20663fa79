package main

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"flowweight/e2e/lab"
	"flowweight/e2e/scenario"
)

// The warm-up experiment: a newcomer with a cold start (each request costs coldFactor times
// the work for its first coldFor, as a JIT-compiled service's first minute) joins a pool
// under 80 % load (issue 25 item 3; docs/weights.md, "Warm-up that watches").
const (
	coldFactor = 5
	coldFor    = 30 * time.Second
	// joinSteady is the measured load before the join, joinWindow the one from the
	// newcomer's start: the cold start and 10 s after it.
	joinSteady = 20 * time.Second
	joinWindow = 40 * time.Second
	// joinWarmup is every side's warm-up: flowweight's default and HAProxy's slowstart.
	joinWarmup = 60 * time.Second
)

const (
	labelWarmWatch = "flowweight headroom, warm-up that watches (default)"
	labelWarmTimer = "flowweight headroom, timer warm-up"
	labelHASlow    = "HAProxy leastconn, weights = capacities, slowstart 60s"
)

// warmupJoin scales the -peer-quotas pool out by a newcomer with the middle quota, under 80 %
// of the first backends' capacity, per peer, repeated and rotated: the pool's p99 of all over
// the 20 s before the join and the 40 s from it, and the newcomer's share of the answers.
func (b *bench) warmupJoin() error {
	base := b.peerQuotas
	quotas := append(slices.Clone(base), base[len(base)/2])
	work := b.work
	if work == 0 {
		work = 20000
	}
	s, stopLab, err := b.start(scenario.Options{Quotas: quotas, NoServiceCPU: b.noServiceCPU, Work: work,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	if err != nil {
		return err
	}
	var hap *haproxyPeer
	defer func() {
		if hap != nil {
			if err := hap.Stop(); err != nil {
				slog.Error("haproxy stop", "label", hap.label, "err", err)
			}
		}
		stopLab()
	}()
	if err := b.waitServiceCPU(s); err != nil {
		return err
	}
	if _, err := waitShares(s, quotas, 0.01, 30*time.Second); err != nil {
		return fmt.Errorf("fixed split weights: %w", err)
	}
	calibration := ""
	if b.work == 0 {
		if work, calibration, err = calibrate(s, quotas, b.requestCPU); err != nil {
			return err
		}
	} else {
		c, err := requestCost(s)
		if err != nil {
			return err
		}
		calibration = fmt.Sprintf("-work %d given: measured %v of backendd CPU per request", work, c.Round(10*time.Microsecond))
	}
	// What the quotas allow at the measured cost: the closed-loop saturation run can read
	// high (502.9 req/s on 2026-12-07 where 0.875 core at the 1.94 ms measured allowed 451),
	// and 80 % of it was then near 90 % of the pool, where every peer, HAProxy too, failed
	// requests before any join.
	unit, err := requestCost(s)
	if err != nil {
		return err
	}
	var cores float64
	for _, q := range base {
		cores += q
	}
	quotaCap := cores / unit.Seconds()
	newcomer := s.Backends[len(s.Backends)-1]
	if err := newcomer.StopHTTP(); err != nil {
		return err
	}
	if err := waitState(s, newcomer.Name, "down"); err != nil {
		return err
	}
	measured, pool, err := saturate(s)
	if err != nil {
		return err
	}
	capacity := min(measured, quotaCap)
	weights, err := haproxyWeights(quotas)
	if err != nil {
		return err
	}
	if hap, err = startHAProxySlow(s, s.Lab.Dir, labelHASlow, portHAWeighted, weights, joinWarmup); err != nil {
		return err
	}
	watch := fastLoopOff(feedback(labelWarmWatch, "headroom"))
	timer := fastLoopOff(feedback(labelWarmTimer, "headroom"))
	timer.extra["warmup_mode"] = `"timer"`
	runs := b.selected([]policyRun{watch, timer, {label: labelHASlow, hap: hap, settle: settleHAProxy}})
	rate := 0.8 * capacity

	fmt.Printf("## Warm-up: a cold newcomer joins under 80 %% load\n\n")
	fmt.Printf("Backends: quotas %s core, declared right; %s (quota %g) starts stopped and joins in each run with a cold start: `backendd -cold-factor %d -cold-for %v` (each request costs %d× the work for its first %v). Backend work: %s; `backendd -work %d`.\n\n",
		fmtQuotas(base), newcomer.Name, quotas[len(quotas)-1], coldFactor, coldFor, coldFactor, coldFor, calibration, work)
	fmt.Printf("Capacity of the first %d: %.1f req/s, the lower of the saturation run's (16 clients, no rate limit, 10 s: %.1f req/s; %s) and their quotas' %.3f core over the measured %v per request (%.1f req/s). Offered: %.0f req/s (80 %%), open loop, Poisson, a new TCP connection per request from %s, 5 s timeout; %v measured before the join, %v from the newcomer's start. Warm-up: %v on every side (flowweight's `warmup`, HAProxy's `slowstart`), flowweight's `warmup_start` 0.5. HAProxy %s, `%s`.\n\n",
		len(base), capacity, measured, pool, cores, unit.Round(10*time.Microsecond), quotaCap, rate, sourcesText(), joinSteady, joinWindow, joinWarmup, haproxyVersion(), haproxyCheck)
	fmt.Println("| repetition | peer | p99 of all, steady | p99 of all, join | join / steady | failed (steady; join) | newcomer's share of answers (join) | p99 per 5 s window: steady; join | switch conntrack after (by state); seq_chk_failed so far |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	type row struct {
		label               string
		steady, join, ratio float64
	}
	var rows []row
	reps := b.repeatOr(3)
	for rep := range reps {
		for j := range runs {
			r := runs[(j+rep)%len(runs)]
			if err := configure(s, r); err != nil {
				return fmt.Errorf("warmup %s: %w", r.label, err)
			}
			if err := settle(s, r, rate, seedOf(0.8, rep)); err != nil {
				return fmt.Errorf("warmup %s: settle: %w", r.label, err)
			}
			slo := poisson(r, seedOf(0.8, rep), scenario.Phase{Rate: rate, Duration: joinSteady})
			slo.Window = 5 * time.Second
			steady, _, _, err := measureLoad(s, r, slo)
			if err != nil {
				return fmt.Errorf("warmup %s: steady: %w", r.label, err)
			}
			downs := hap.downs()
			if err := newcomer.StartHTTPCold(coldFactor, coldFor); err != nil {
				return err
			}
			lo := poisson(r, seedOf(0.8, rep)+500, scenario.Phase{Rate: rate, Duration: joinWindow})
			lo.Window = 5 * time.Second
			join, _, _, err := measureLoad(s, r, lo)
			if err != nil {
				return fmt.Errorf("warmup %s: join: %w", r.label, err)
			}
			if err := newcomer.StopHTTP(); err != nil {
				return err
			}
			// Both sides see the newcomer gone before the next run's steady phase.
			if err := waitState(s, newcomer.Name, "down"); err != nil {
				return err
			}
			if err := lab.Poll(30*time.Second, func() error {
				if hap.downs() <= downs {
					return fmt.Errorf("HAProxy has not marked %s down", newcomer.Name)
				}
				return nil
			}); err != nil {
				return err
			}
			// What the switch's conntrack holds after the run, and the TCP packets it refused
			// for their sequence numbers (total so far): a new connection that meets another
			// peer's TIME_WAIT entry for the same addresses and ports is one of them.
			ctStates, seqFailed, err := conntrackState(s)
			if err != nil {
				return err
			}
			ratio := float64(join.P99All) / float64(max(steady.P99All, time.Microsecond))
			rows = append(rows, row{r.label, float64(steady.P99All), float64(join.P99All), ratio})
			share := 0.0
			if join.OK > 0 {
				share = float64(join.PerBackend[newcomer.Name]) / float64(join.OK)
			}
			fmt.Printf("| #%d | %s | %s | %s | %.2f× | %s; %s | %.1f%% | %s; %s | %s; %s |\n", rep+1, r.label, allCell(steady), allCell(join), ratio,
				failedCell(steady), failedCell(join), 100*share, windowsCell(steady.Windows), windowsCell(join.Windows), ctStates, seqFailed)
		}
	}
	fmt.Println()
	fmt.Println("| peer | p99 of all, steady: median | join: median | join / steady: median (target ≤ 1.5×) |")
	fmt.Println("|---|---|---|---|")
	for _, r := range runs {
		var st, jn, ra []float64
		for _, x := range rows {
			if x.label == r.label {
				st, jn, ra = append(st, x.steady), append(jn, x.join), append(ra, x.ratio)
			}
		}
		fmt.Printf("| %s | %s | %s | %.2f× |\n", r.label, ms(time.Duration(medianOf(st))), ms(time.Duration(medianOf(jn))), medianOf(ra))
	}
	fmt.Println()
	return nil
}

// waitState waits until the controller's API shows backend name in state.
func waitState(s *scenario.Scenario, name, state string) error {
	return lab.Poll(30*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		for _, be := range v.Backends {
			if be.Name == name {
				if be.State != state {
					return fmt.Errorf("backend %s is %s, want %s", name, be.State, state)
				}
				return nil
			}
		}
		return fmt.Errorf("no backend %s", name)
	})
}
