package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"flowweight/controller/view"
	"flowweight/e2e/scenario"
)

// traceDir is -trace: where flowweight runs' per-backend traces go (empty: none). A trace is
// what the controller's API said every tracePeriod while the load ran: the weights and the
// headroom policy's terms, so a run that went wrong can be read afterwards (the scenario's
// own directory, and the controller's log in it, is removed when the bench ends).
var traceDir string

const tracePeriod = 250 * time.Millisecond

// tracer polls the API until stopped and writes one line per backend per poll.
type tracer struct {
	stop chan struct{}
	done sync.WaitGroup
}

// startTrace starts tracing run r into traceDir, or does nothing (nil) when -trace is unset
// or r is not a flowweight run.
func startTrace(s *scenario.Scenario, r policyRun, tag string) (*tracer, error) {
	if traceDir == "" || r.hap != nil {
		return nil, nil
	}
	name := strings.NewReplacer(" ", "_", "(", "", ")", "", ",", "", "=", "", "/", "_").Replace(
		fmt.Sprintf("%s-%s-%s", time.Now().UTC().Format("150405"), tag, r.label)) + ".tsv"
	f, err := os.Create(filepath.Join(traceDir, name))
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	t := &tracer{stop: make(chan struct{})}
	t.done.Add(1)
	go func() {
		defer t.done.Done()
		defer f.Close()
		w := bufio.NewWriter(f)
		defer w.Flush()
		fmt.Fprintln(w, "t_s\tname\tstate\tweight\tshare\tcpu\town\tavail\tpressure\tlearned\tc\ttarget\tdamped\tfull\tslow\tin_flight\tconns")
		t0 := time.Now()
		tick := time.NewTicker(tracePeriod)
		defer tick.Stop()
		for {
			var bs []view.BackendView
			if err := s.API("/api/v1/backends", &bs); err == nil {
				at := time.Since(t0).Seconds()
				for _, b := range bs {
					e := b.Explanation
					inf := -1.0
					if b.InFlight != nil {
						inf = *b.InFlight
					}
					fmt.Fprintf(w, "%.2f\t%s\t%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%t\t%.1f\t%.1f\n",
						at, b.Name, b.State, b.AppliedWeight, b.Share, b.CPU, e.Own, e.Avail, e.Pressure, b.LearnedCapacity,
						e.C, e.Target, e.Damped, e.Full, e.Slow, inf, b.Conns)
				}
			}
			select {
			case <-t.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return t, nil
}

func (t *tracer) end() {
	if t == nil {
		return
	}
	close(t.stop)
	t.done.Wait()
}
