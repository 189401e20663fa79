package main

import (
	"context"
	"fmt"
	"time"

	"flowweight/e2e/scenario"
)

// share pins weights with policy static and capacity factors (equal CPU quotas, so the
// factors alone set the ratio), checks dump-groups shows them, sends b.conns new TCP
// connections through the VIP and counts where each landed.
func (b *bench) share() error {
	fmt.Printf("## Realised share of new connections (policy static, %d connections each)\n\n", b.conns)
	fmt.Println("| mode | configured | dump-groups weights | configured share | realised share | max deviation | ok / errors |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, c := range []struct {
		quotas []float64
		caps   [][]float64
	}{
		{[]float64{0.5, 0.5}, [][]float64{{60, 40}, {50, 50}}},
		{[]float64{0.5, 0.5, 0.5}, [][]float64{{70, 20, 10}, {1, 1, 1}, {1, 2, 4}}},
	} {
		if err := b.shareOne(c.quotas, c.caps); err != nil {
			return err
		}
	}
	fmt.Println()
	return nil
}

func (b *bench) shareOne(quotas []float64, caps [][]float64) error {
	s, stop, err := b.start(scenario.Options{Quotas: quotas, Capacities: caps[0], Work: 200,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	if err != nil {
		return err
	}
	defer stop()
	ns := names(s)
	for _, c := range caps {
		if err := s.Reload(c, ""); err != nil {
			return err
		}
		want := Normalize(c)
		w, err := waitShares(s, want, 0.006, 30*time.Second)
		if err != nil {
			return fmt.Errorf("capacities %v: %w", c, err)
		}
		res, err := s.Load(context.Background(), scenario.LoadOptions{Concurrency: 8, Duration: 120 * time.Second,
			MaxRequests: b.conns, Timeout: 5 * time.Second})
		if err != nil {
			return err
		}
		after, err := s.GroupWeights()
		if err != nil {
			return err
		}
		if !equalWeights(w, after) {
			return fmt.Errorf("capacities %v: weights moved during the run: %s -> %s", c, fmtWeights(w, ns), fmtWeights(after, ns))
		}
		got := make([]float64, len(ns))
		for i, n := range ns {
			got[i] = float64(res.PerBackend[n]) / float64(max(res.OK, 1))
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %.1f pt | %d / %d |\n", s.Opts.Mode, fmtCaps(c), fmtWeights(w, ns),
			fmtShares(want), fmtShares(got), 100*MaxDiff(got, want), res.OK, res.Errors)
	}
	return nil
}

func fmtCaps(c []float64) string {
	out := ""
	for i, x := range c {
		if i > 0 {
			out += ":"
		}
		out += fmt.Sprint(x)
	}
	return out
}
