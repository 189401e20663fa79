package sim

import (
	"fmt"
	"io"
	"time"

	"flowweight/weights"
)

// The fast-loop table asks how often weights computed from work in flight must be
// recomputed to come near per-request least connections (what HAProxy's leastconn does), in
// the lab's shape: three single-server backends of 0.125, 0.25 and 0.5 core, jobs of 2 ms of
// CPU on average, Poisson arrivals. It is the simulator's side of the lab's finding that at
// 80 % load a proxy's weighted leastconn gave a p99 of about 100 ms, a fixed split about
// 1 s, and flowweight's 1 Hz loop seconds (docs/weights.md, "Busy is not dead").
var (
	// FastLoopPool is the lab's pool: speeds in cores, a job's mean size in core-seconds.
	FastLoopPool = []Backend{{Name: "be1", Speed: 0.125, Declared: 0.125}, {Name: "be2", Speed: 0.25, Declared: 0.25},
		{Name: "be3", Speed: 0.5, Declared: 0.5}}
	// FastLoopPoolCFS is the same pool run as the lab runs it: each backend a cgroup with a
	// CPU quota in 100 ms periods (the kernel's default cfs_period_us), bursting at one core.
	FastLoopPoolCFS = []Backend{
		{Name: "be1", Speed: 0.125, Declared: 0.125, CFSPeriod: 100 * time.Millisecond},
		{Name: "be2", Speed: 0.25, Declared: 0.25, CFSPeriod: 100 * time.Millisecond},
		{Name: "be3", Speed: 0.5, Declared: 0.5, CFSPeriod: 100 * time.Millisecond},
	}
	// FastLoopPeriods are the update periods tried, each with a report every period.
	FastLoopPeriods = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, time.Second}
	// FastLoopLoads are the offered loads.
	FastLoopLoads = []float64{0.4, 0.8, 0.95}
)

// fastLoopJobSize is the mean job size: 2 ms of one core.
const fastLoopJobSize = 0.002

// FastLoopRow is one policy (and period) at one load, over every seed.
type FastLoopRow struct {
	Pool   string // "FCFS" (one server each) or "CFS quota"
	Load   float64
	Label  string
	Period time.Duration // 0 for per-request and fixed dispatch
	Runs   []Result
}

// FastLoopTuning is least_conn on work in flight with nothing slowing it: no smoothing, no
// damping, no dead-band or step limit, so the table measures the period alone.
func FastLoopTuning() weights.Tuning {
	t := weights.DefaultTuning()
	t.Policy = weights.PolicyLeastConn
	t.Load = weights.Load{CPU: 1}
	t.Capacity = weights.Capacity{CPU: 1}
	t.Alpha, t.Gain, t.DeadBand, t.MaxStep = 1, 1, 0, 1
	return t
}

// FastLoop runs the table: per load, per-request least connections, the oracle fixed split,
// and weights.PolicyLeastConn recomputed every FastLoopPeriods.
func FastLoop(o TableOptions) ([]FastLoopRow, error) {
	lt := newLabTable(o)
	for _, pool := range []struct {
		name     string
		backends []Backend
	}{{"FCFS", FastLoopPool}, {"CFS quota", FastLoopPoolCFS}} {
		fastLoopRows(func(load float64, label string, period time.Duration, c Config) {
			lt.add(pool.name, pool.backends, load, label, period, c)
		})
	}
	return lt.run()
}

// labTable collects the rows of a table on the lab's pool and their runs, one per seed.
type labTable struct {
	o    TableOptions
	rows []FastLoopRow
	cfgs []Config
}

func newLabTable(o TableOptions) *labTable {
	o.defaults()
	return &labTable{o: o}
}

// add is one row: c on backends at load, with the lab's job size and the table's jobs, seeds
// and slot model.
func (lt *labTable) add(pool string, backends []Backend, load float64, label string, period time.Duration, c Config) {
	lt.rows = append(lt.rows, FastLoopRow{Pool: pool, Load: load, Label: label, Period: period})
	for _, seed := range lt.o.Seeds {
		c.Backends, c.Load, c.MeanSize, c.Jobs, c.Seed, c.OVSSlots = backends, load, fastLoopJobSize, lt.o.Jobs, seed, lt.o.OVSSlots
		c.Warmup = 30 * time.Second
		lt.cfgs = append(lt.cfgs, c)
	}
}

// run runs every row's configs and hands each row its runs.
func (lt *labTable) run() ([]FastLoopRow, error) {
	rs, err := RunAll(lt.cfgs)
	if err != nil {
		return nil, err
	}
	k := len(lt.o.Seeds)
	for i := range lt.rows {
		lt.rows[i].Runs = rs[i*k : (i+1)*k]
	}
	return lt.rows, nil
}

// fastLoopRows adds one pool's rows.
func fastLoopRows(add func(load float64, label string, period time.Duration, c Config)) {
	for _, load := range FastLoopLoads {
		add(load, "least connections, per request", 0, Config{Policy: LeastConn})
		add(load, "oracle fixed split", 0, Config{Policy: Oracle})
		for _, p := range FastLoopPeriods {
			add(load, "least_conn weights every "+p.String(), p, Config{Policy: WeightsLeastConn, Tuning: FastLoopTuning(), Sample: p, Update: p})
		}
		add(load, "headroom every 1s", time.Second, Config{Policy: Headroom, ServiceCPU: true, Sample: time.Second, Update: time.Second})
		for _, p := range FastLoopPeriods[:4] {
			add(load, "headroom every 1s, in flight every "+p.String(), p, Config{Policy: Headroom, ServiceCPU: true,
				Sample: time.Second, Update: time.Second, InFlight: p})
		}
	}
}

// A stale count is one that no longer describes the queue it is used on. The fast-loop table
// reads every backend's jobs at the moment the loop runs; in the lab a count is taken by the
// probe every in_flight_interval, travels to the controller, waits for the loop's next tick
// and then for the switch's rewrite, and it counts connections, which outlive their work by
// the handshake, the answer and the close. FastLoopStaleness prices each, and the reference
// the count is judged against (the other backends' counts, or the backend's own average),
// the lab's pool under CFS quotas only (docs/weights.md, "The fast loop: work in flight").
var FastLoopStale = []struct {
	Period, Report, Delay, Linger time.Duration
	Own                           bool
}{
	{20 * time.Millisecond, 0, 0, 0, false},
	{20 * time.Millisecond, 20 * time.Millisecond, 0, 0, false},
	{20 * time.Millisecond, 20 * time.Millisecond, 5 * time.Millisecond, 0, false},
	{20 * time.Millisecond, 20 * time.Millisecond, 5 * time.Millisecond, 0, true},
	{20 * time.Millisecond, 20 * time.Millisecond, 5 * time.Millisecond, 3 * time.Millisecond, false},
	{20 * time.Millisecond, 20 * time.Millisecond, 5 * time.Millisecond, 3 * time.Millisecond, true},
	{10 * time.Millisecond, 10 * time.Millisecond, 5 * time.Millisecond, 0, false},
	{50 * time.Millisecond, 0, 0, 0, false},
	{50 * time.Millisecond, 50 * time.Millisecond, 0, 0, false},
	{50 * time.Millisecond, 50 * time.Millisecond, 5 * time.Millisecond, 0, false},
	{50 * time.Millisecond, 50 * time.Millisecond, 5 * time.Millisecond, 3 * time.Millisecond, false},
	{50 * time.Millisecond, 50 * time.Millisecond, 5 * time.Millisecond, 3 * time.Millisecond, true},
	{50 * time.Millisecond, 20 * time.Millisecond, 5 * time.Millisecond, 0, false},
}

// FastLoopStaleness runs the staleness table: per load of 80 and 95 %, per-request least
// connections, the oracle fixed split, headroom alone, and headroom with the fast loop at each
// FastLoopStale period, probe interval and delay.
func FastLoopStaleness(o TableOptions) ([]FastLoopRow, error) {
	lt := newLabTable(o)
	add := func(load float64, label string, period time.Duration, c Config) {
		lt.add("CFS quota", FastLoopPoolCFS, load, label, period, c)
	}
	for _, load := range FastLoopLoads[1:] {
		add(load, "least connections, per request", 0, Config{Policy: LeastConn})
		add(load, "oracle fixed split", 0, Config{Policy: Oracle})
		add(load, "headroom every 1s", time.Second, Config{Policy: Headroom, ServiceCPU: true, Sample: time.Second, Update: time.Second})
		for _, f := range FastLoopStale {
			label := fmt.Sprintf("headroom every 1s, in flight every %v, read as the loop runs", f.Period)
			if f.Report > 0 {
				label = fmt.Sprintf("headroom every 1s, in flight every %v, counted every %v", f.Period, f.Report)
			}
			if f.Delay > 0 {
				label += fmt.Sprintf(", %v late", f.Delay)
			}
			if f.Linger > 0 {
				label += fmt.Sprintf(", connections outlive their job by %v", f.Linger)
			}
			if f.Own {
				label += ", against its own average"
			}
			add(load, label, f.Period,
				Config{Policy: Headroom, ServiceCPU: true, Sample: time.Second, Update: time.Second, InFlight: f.Period,
					InFlightReport: f.Report, InFlightDelay: f.Delay, InFlightLinger: f.Linger, InFlightOwn: f.Own})
		}
	}
	return lt.run()
}

// WriteFastLoop prints the table: p99 and its ratio to per-request least connections.
func WriteFastLoop(w io.Writer, rows []FastLoopRow) {
	fmt.Fprintln(w, "| backends | load | dispatch | mean ms | p99 ms | p99 / per-request least connections | rewrites per second |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|")
	for i, c := range labCells(rows) {
		r := rows[i]
		rw := "—"
		if r.Period > 0 {
			rw = fmt.Sprintf("%.1f", meanOf(r.Runs, func(x Result) float64 { return float64(x.Rewrites) / x.Window }))
		}
		fmt.Fprintf(w, "| %s | %.0f %% | %s | %.1f | %.1f | %s | %s |\n", r.Pool, 100*r.Load, r.Label, c.mean, c.p99, c.ratio, rw)
	}
}

// labCell is what every lab table shows of a row: its mean and p99 over the seeds, in ms,
// and the p99 over that of the last row labelled per-request least connections above it.
type labCell struct {
	mean, p99 float64
	ratio     string
}

func labCells(rows []FastLoopRow) []labCell {
	out := make([]labCell, len(rows))
	var ref float64
	for i, r := range rows {
		p := meanOf(r.Runs, func(x Result) float64 { return x.P99 })
		if r.Label == "least connections, per request" {
			ref = p
		}
		out[i] = labCell{mean: 1000 * meanOf(r.Runs, func(x Result) float64 { return x.Mean }), p99: 1000 * p, ratio: "—"}
		if ref > 0 {
			out[i].ratio = fmt.Sprintf("%.2f", p/ref)
		}
	}
	return out
}

func meanOf(rs []Result, f func(Result) float64) float64 {
	var s float64
	for _, r := range rs {
		s += f(r)
	}
	return s / float64(max(len(rs), 1))
}
