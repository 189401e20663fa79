package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Arrivals is how a load run issues its requests.
type Arrivals int

const (
	// Closed is the closed loop (the default): Concurrency clients, each sending its next
	// request once its previous one is answered, paced by Rate when it is set. A slow system
	// is offered less load, and latency is measured from when the request was sent.
	Closed Arrivals = iota
	// Poisson is the open loop: arrivals at exponentially distributed intervals of mean
	// 1/Rate, drawn from a source seeded by Seed (the same seed, the same schedule), each a
	// new connection, whatever the system's answers. A request's latency counts from its
	// scheduled arrival, not from when the generator got round to it, so a stalled generator
	// or a full system cannot hide latency (no coordinated omission). At most MaxInFlight
	// requests are open; an arrival that finds them all open fails as "overflow" rather
	// than waiting in a queue nobody measures.
	Poisson
)

// Phase is a stretch of a Poisson run at one rate (requests per second; 0 is idle).
type Phase struct {
	Rate     float64
	Duration time.Duration
}

// Window is one stretch of a Poisson run's time series (LoadOptions.Window), by scheduled
// arrival time: a request belongs to the window it was due in, however late it was answered.
type Window struct {
	Start, Len          time.Duration // from the run's start; the last one may be shorter
	Offered, OK, Errors int           // Errors includes Overflow
	Overflow            int
	P99, P99All         time.Duration // as LoadResult's, over this window's requests
	P99Failed           bool
	PerBackend          map[string]int
}

// defaultMaxInFlight bounds a Poisson run's open requests (and goroutines, and sockets in
// the client's namespace) when LoadOptions.MaxInFlight is 0.
const defaultMaxInFlight = 1024

// overflowKind is the ErrKinds key of arrivals refused because MaxInFlight were open.
const overflowKind = "overflow"

// PoissonSchedule returns the arrival times, as offsets from the start, of a Poisson process
// through phases in order (rate 0: none in that phase), at most max of them, drawn from a
// source seeded with seed. The exponential distribution has no memory, so starting afresh at
// each phase boundary is exact.
func PoissonSchedule(phases []Phase, max int, seed int64) []time.Duration {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x666c6f77776569)) // "flowwei": a fixed stream
	var out []time.Duration
	var base time.Duration
	for _, p := range phases {
		if p.Rate > 0 {
			t := 0.0
			for len(out) < max {
				t += rng.ExpFloat64() / p.Rate
				off := time.Duration(t * float64(time.Second))
				if off >= p.Duration {
					break
				}
				out = append(out, base+off)
			}
		}
		base += p.Duration
	}
	return out
}

// phasesOf is o's phases: Phases, or one phase of Rate for Duration.
func phasesOf(o LoadOptions) ([]Phase, error) {
	ps := o.Phases
	if len(ps) == 0 {
		ps = []Phase{{Rate: o.Rate, Duration: o.Duration}}
	}
	any := false
	for i, p := range ps {
		if p.Rate < 0 || p.Duration <= 0 {
			return nil, fmt.Errorf("scenario: load: phase %d: rate %v, duration %v: want rate >= 0 and duration > 0", i, p.Rate, p.Duration)
		}
		any = any || p.Rate > 0
	}
	if !any {
		return nil, fmt.Errorf("scenario: load: Poisson arrivals need a rate > 0 (Rate %v, %d phases)", o.Rate, len(o.Phases))
	}
	return ps, nil
}

// dispatchHook, when a test sets it, runs before arrival i is sent: a stalled generator.
var dispatchHook func(i int)

// outcome is one arrival's fate.
type outcome struct {
	at      time.Duration // scheduled offset
	lat     time.Duration // from the scheduled arrival; successes only
	backend string
	kind    string // "" for a success
	msg     string
}

// openLoop runs the Poisson schedule of o through do (one request, returning the answering
// backend) and tallies the outcomes. Arrivals stop at o.Duration or when ctx ends; the
// requests still open then run to their own deadline (scheduled arrival + o.Timeout), so the
// slowest are not dropped from the figures. Requests cut off because ctx ended are not
// counted.
func openLoop(ctx context.Context, o LoadOptions, do func(context.Context) (string, error)) (LoadResult, error) {
	phases, err := phasesOf(o)
	if err != nil {
		return LoadResult{}, err
	}
	limit := o.MaxInFlight
	if limit <= 0 {
		limit = defaultMaxInFlight
	}
	sched := PoissonSchedule(phases, o.MaxRequests, o.Seed)
	var (
		mu       sync.Mutex
		outs     = make([]outcome, 0, len(sched))
		wg       sync.WaitGroup
		inFlight = make(chan struct{}, limit)
		maxLag   time.Duration
	)
	record := func(oc outcome) {
		mu.Lock()
		outs = append(outs, oc)
		mu.Unlock()
	}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
dispatch:
	for i, at := range sched {
		if at >= o.Duration {
			break
		}
		due := start.Add(at)
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				break dispatch
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			break
		}
		if dispatchHook != nil {
			dispatchHook(i)
		}
		maxLag = max(maxLag, time.Since(due))
		select {
		case inFlight <- struct{}{}:
		default:
			record(outcome{at: at, kind: overflowKind, msg: fmt.Sprintf("%d requests open (MaxInFlight)", limit)})
			continue
		}
		wg.Go(func() {
			defer func() { <-inFlight }()
			rctx, cancel := context.WithDeadline(ctx, due.Add(o.Timeout))
			defer cancel()
			name, err := do(rctx)
			lat := time.Since(due)
			if err != nil {
				if ctx.Err() != nil {
					return // the caller ended the run: not the system's error
				}
				record(outcome{at: at, kind: ErrKind(err), msg: err.Error()})
				return
			}
			record(outcome{at: at, lat: lat, backend: name})
		})
	}
	wg.Wait()
	res := tally(outs, o.Timeout, o.Window, min(o.Duration, total(phases)))
	res.Elapsed = time.Since(start)
	res.MaxLag = maxLag
	return res, nil
}

func total(ps []Phase) time.Duration {
	var t time.Duration
	for _, p := range ps {
		t += p.Duration
	}
	return t
}

// tally sums outcomes into a LoadResult, with one Window per window of length span when
// window > 0.
func tally(outs []outcome, timeout, window, span time.Duration) LoadResult {
	res := LoadResult{PerBackend: map[string]int{}, ErrKinds: map[string]int{}, Offered: len(outs), timeout: timeout}
	seen := map[string]bool{}
	var lats []time.Duration
	nw := 0
	if window > 0 {
		nw = int((span + window - 1) / window)
	}
	type acc struct {
		w    Window
		lats []time.Duration
	}
	ws := make([]acc, nw)
	for i := range ws {
		ws[i].w = Window{Start: time.Duration(i) * window, PerBackend: map[string]int{},
			Len: min(window, span-time.Duration(i)*window)}
	}
	for _, oc := range outs {
		var w *acc
		if nw > 0 {
			w = &ws[min(int(oc.at/window), nw-1)]
			w.w.Offered++
			res.Requests = append(res.Requests, Request{At: oc.at, Latency: oc.lat, Failed: oc.kind != ""})
		}
		if oc.kind != "" {
			res.Errors++
			res.ErrKinds[oc.kind]++
			if oc.kind == overflowKind {
				res.Overflow++
			}
			if !seen[oc.msg] && len(res.ErrSamples) < 5 {
				seen[oc.msg] = true
				res.ErrSamples = append(res.ErrSamples, oc.msg)
			}
			if w != nil {
				w.w.Errors++
				if oc.kind == overflowKind {
					w.w.Overflow++
				}
			}
			continue
		}
		res.OK++
		res.PerBackend[oc.backend]++
		lats = append(lats, oc.lat)
		if w != nil {
			w.w.OK++
			w.w.PerBackend[oc.backend]++
			w.lats = append(w.lats, oc.lat)
		}
	}
	res.P99All, res.P99Failed = p99All(lats, res.Errors, timeout)
	res.P50, res.P90, res.P99, res.Max = Percentile(lats, 0.5), Percentile(lats, 0.9), Percentile(lats, 0.99), Percentile(lats, 1)
	for i := range ws {
		w := &ws[i]
		w.w.P99All, w.w.P99Failed = p99All(w.lats, w.w.Errors, timeout)
		w.w.P99 = Percentile(w.lats, 0.99)
		res.Windows = append(res.Windows, w.w)
	}
	return res
}
