package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"flowweight/e2e/scenario"
)

// The cost of reactive dispatch (docs/dataplane.md, "Reactive dispatch"), against the select
// group on the same switch, backends and client, interleaved: what the controller's choice
// adds to a new connection's handshake, and how many new connections per second one
// controller core dispatches.
//
// Latency: dispatchSerial connections one after another, each timed from dial to established
// (the client's SYN, through the switch, to the backend's SYN-ACK back): the group's path is
// the switch alone, reactive's adds a packet-in, the choice and a packet-out. Rate:
// dispatchDialers clients dial and close as fast as they can for dispatchFor (bounded in
// count too); the controller's and ovs-vswitchd's CPU over it give the CPU one dispatched
// connection costs each.

const (
	dispatchSerial  = 500
	dispatchDialers = 32
	dispatchFor     = 10 * time.Second
	dispatchMax     = 200000 // connections per rate run, whatever the rate
)

func (b *bench) dispatchCost() error {
	reps := b.repeat
	if reps == 0 {
		reps = 3
	}
	s, stop, err := b.start(scenario.Options{Quotas: []float64{0.5, 0.5, 0.5}, Work: 100, InFlight: fastLoopPeriod,
		Weighting: map[string]string{"policy": `"static"`, "in_flight_period": `"0s"`}})
	if err != nil {
		return err
	}
	defer stop()
	if _, err := waitShares(s, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, 0.01, 30*time.Second); err != nil {
		return err
	}
	fmt.Printf("## Reactive dispatch: added first-packet latency and ceiling, against the select group\n\n")
	fmt.Printf("Three backends (quota 0.5 core each, equal weights), one client, the same switch. Latency: %d connections one after another, dial to established. Rate: %d clients dialling and closing for %v (at most %d connections); CPU is utime+stime over the run. Runs interleaved, %d repetitions, every run listed.\n\n",
		dispatchSerial, dispatchDialers, dispatchFor, dispatchMax, reps)
	fmt.Println("| run | dispatch | connect p50 | connect p99 | connect max | failed | rate run: connections/s | failed dials | controller CPU (cores) | ovs-vswitchd CPU (cores) | controller CPU per connection |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	type row struct{ p50, p99, rate, perConn float64 }
	var rows = map[string][]row{}
	for rep := range reps {
		modes := []string{"group", "reactive"}
		if rep%2 == 1 {
			slices.Reverse(modes)
		}
		for _, mode := range modes {
			if err := setDispatch(s, mode); err != nil {
				return err
			}
			if err := flushConntrack(s); err != nil {
				return err
			}
			lat, failed, err := serialConnects(s, dispatchSerial)
			if err != nil {
				return err
			}
			if err := flushConntrack(s); err != nil {
				return err
			}
			r, err := dispatchRate(s)
			if err != nil {
				return err
			}
			p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
			per := 0.0
			if r.conns > 0 {
				per = r.ctl.cpu.Seconds() / float64(r.conns)
			}
			rows[mode] = append(rows[mode], row{p50, p99, r.rate(), per})
			fmt.Printf("| %d | %s | %.3f ms | %.3f ms | %.3f ms | %d | %.0f | %d | %s | %s | %.1f µs |\n", rep+1, mode,
				msOf(p50), msOf(p99), msOf(quantile(lat, 1)), failed, r.rate(), r.failed, r.ctl, r.ovs, per*1e6)
		}
	}
	med := medianBy[row]
	g, r := rows["group"], rows["reactive"]
	fmt.Printf("\nMedians: connect p50 %.3f ms (group) / %.3f ms (reactive), p99 %.3f / %.3f ms: reactive adds %.3f ms at the median. Rate %.0f / %.0f connections/s; the controller spends %.1f µs of CPU per dispatched connection, about %.0f connections per second per controller core.\n\n",
		msOf(med(g, func(x row) float64 { return x.p50 })), msOf(med(r, func(x row) float64 { return x.p50 })),
		msOf(med(g, func(x row) float64 { return x.p99 })), msOf(med(r, func(x row) float64 { return x.p99 })),
		msOf(med(r, func(x row) float64 { return x.p50 })-med(g, func(x row) float64 { return x.p50 })),
		med(g, func(x row) float64 { return x.rate }), med(r, func(x row) float64 { return x.rate }),
		1e6*med(r, func(x row) float64 { return x.perConn }), 1/med(r, func(x row) float64 { return x.perConn }))
	return setDispatch(s, "group")
}

// setDispatch reloads the controller with the service's dispatch set to mode and waits until
// the switch holds the matching table-1 flow (a flow to the controller only in reactive).
func setDispatch(s *scenario.Scenario, mode string) error {
	s.Opts.ServiceKeys = map[string]string{"dispatch": strconv.Quote(mode)}
	if err := s.Reload(nil, ""); err != nil {
		return err
	}
	return until(20*time.Second, func() error {
		flows, err := s.Flows()
		if err != nil {
			return err
		}
		reactive := slices.ContainsFunc(flows, func(f string) bool { return strings.Contains(f, "actions=CONTROLLER") && strings.Contains(f, "reg3=0") })
		if reactive != (mode == "reactive") {
			return fmt.Errorf("switch does not hold dispatch %q yet", mode)
		}
		_, err = s.InSync()
		return err
	})
}

// until polls f every 100 ms until it succeeds or timeout passes, returning its last error.
func until(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// flushConntrack empties the switch's connection tracking before a measurement, so that each
// starts from the same table whatever the runs before it left there. Nothing is open between
// measurements.
func flushConntrack(s *scenario.Scenario) error {
	if _, err := s.OVS.Appctl("dpctl/flush-conntrack"); err != nil {
		return fmt.Errorf("flush conntrack: %w", err)
	}
	return nil
}

// serialConnects opens n connections to the VIP one after another, each closed once open,
// and returns the dial-to-established times of those that opened, and how many did not.
func serialConnects(s *scenario.Scenario, n int) ([]time.Duration, int, error) {
	addr := net.JoinHostPort(s.VIP.String(), strconv.Itoa(scenario.VIPPort))
	var lat []time.Duration
	failed := 0
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		t0 := time.Now()
		c, err := s.Client.DialContext(ctx, "tcp", addr)
		d := time.Since(t0)
		cancel()
		if err != nil {
			failed++
			continue
		}
		lat = append(lat, d)
		closeReset(c)
	}
	if len(lat) == 0 {
		return nil, failed, fmt.Errorf("no connection of %d opened", n)
	}
	slices.Sort(lat)
	return lat, failed, nil
}

type rateResult struct {
	conns, failed int
	elapsed       time.Duration
	ctl, ovs      cpuUse
}

func (r rateResult) rate() float64 { return float64(r.conns) / r.elapsed.Seconds() }

// dispatchRate runs dispatchDialers clients that dial the VIP and close at once, for
// dispatchFor or dispatchMax connections, measuring the controller's and ovs-vswitchd's CPU.
func dispatchRate(s *scenario.Scenario) (rateResult, error) {
	addr := net.JoinHostPort(s.VIP.String(), strconv.Itoa(scenario.VIPPort))
	return runRate(s, dispatchDialers, dispatchFor, dispatchMax, func(ctx context.Context, _ int64) error {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		c, err := s.Client.DialContext(dctx, "tcp", addr)
		if err != nil {
			return err
		}
		closeReset(c)
		return nil
	})
}

// runRate runs workers goroutines calling one (with a running count from 1) for d or max
// calls in all, whichever comes first, and measures the controller's and ovs-vswitchd's CPU
// over it. A call that fails while the run lasts is counted failed; one cut short by its end
// is not counted.
func runRate(s *scenario.Scenario, workers int, d time.Duration, max int64, one func(ctx context.Context, i int64) error) (rateResult, error) {
	mc, err := startCPU(s.ControllerPID())
	if err != nil {
		return rateResult{}, err
	}
	mo, err := startCPU(s.OVS.PID())
	if err != nil {
		return rateResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var ok, bad, issued atomic.Int64
	t0 := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := issued.Add(1)
				if i > max {
					return
				}
				if err := one(ctx, i); err != nil {
					if ctx.Err() == nil {
						bad.Add(1)
					}
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	r := rateResult{conns: int(ok.Load()), failed: int(bad.Load()), elapsed: time.Since(t0)}
	if r.ctl, err = mc.stop(); err != nil {
		return r, err
	}
	if r.ovs, err = mo.stop(); err != nil {
		return r, err
	}
	return r, nil
}

// medianBy is the median (medianOf) of f over xs.
func medianBy[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	return medianOf(v)
}

// closeReset closes c with a reset instead of a FIN: a close leaves the client's side in
// TIME_WAIT for 60 s, and with tens of thousands of them to the one VIP and port the client's
// connect() spends milliseconds finding a free port (handshakes of 5 ms and 400 connections/s
// after a rate run, group and reactive alike, against 0.5 ms and 3,000/s before one).
func closeReset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// quantile of sorted durations (q = 1: the largest).
func quantile(xs []time.Duration, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := min(int(q*float64(len(xs))), len(xs)-1)
	return float64(xs[i])
}

func msOf(ns float64) float64 { return ns / 1e6 }
