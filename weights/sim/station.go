package sim

import (
	"cmp"
	"math"
	"slices"
)

// station is one backend: k FCFS servers fed from one queue. Because service is FCFS and the
// speed schedule is known in advance (it is part of the scenario, not of what any policy
// sees), a job's start and finish are fixed when it arrives; the station keeps only what the
// dispatcher and the probe can observe later: jobs still in the system and, per sample
// interval, busy server-seconds and completed work.
type station struct {
	k    int
	free []float64 // per server: when it finishes its last assigned job
	// inSys holds finish times of jobs not yet finished at the last look: a FIFO from head
	// on when k = 1 (FCFS on one server finishes jobs in arrival order), else a min-heap.
	inSys  []float64
	head   int
	seg    []segment // speed schedule, by start time
	sample float64
	busy   []float64 // per sample interval: busy server-seconds
	work   []float64 // per sample interval: work units of jobs that finished in it
	jobs   []int32   // per sample interval: jobs that finished in it
	nb     float64   // the neighbour's fixed share of the CPU (Backend.Neighbour)
	// A CFS quota (Backend.CFSPeriod): period and burst speed, the work one period allows,
	// and how much of it the period cfsAt has used. Only for k = 1, where jobs are served in
	// arrival order, so the quota is consumed in the order finish computes it.
	cfs             bool
	cfsP, cfsBurst  float64
	cfsBudget       float64
	cfsAt           int
	cfsUsed, nomSpd float64
}

// segment: from t on, the backend's total speed is speed (until the next segment).
type segment struct{ t, speed float64 }

func newStation(b Backend, steps []Step, idx int, sample float64) *station {
	k := max(b.Servers, 1)
	st := &station{k: k, free: make([]float64, k), sample: sample, seg: []segment{{0, b.effective()}}, nb: b.Neighbour}
	if b.CFSPeriod > 0 {
		st.cfs, st.cfsP, st.cfsBurst = true, b.CFSPeriod.Seconds(), cmp.Or(b.Burst, 1)
		st.cfsBudget, st.cfsAt, st.nomSpd = b.Speed*st.cfsP, -1, b.Speed
	}
	var mine []Step
	for _, s := range steps {
		if s.Backend == idx {
			mine = append(mine, s)
		}
	}
	slices.SortStableFunc(mine, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
	sp := b.effective()
	for _, s := range mine {
		sp *= s.Factor
		t := s.At.Seconds()
		if last := &st.seg[len(st.seg)-1]; last.t == t {
			last.speed = sp
		} else {
			st.seg = append(st.seg, segment{t, sp})
		}
	}
	return st
}

// speedAt returns the backend's total true speed at time t.
func (st *station) speedAt(t float64) float64 {
	i, _ := slices.BinarySearchFunc(st.seg, t, func(s segment, t float64) int {
		switch {
		case s.t < t:
			return -1
		case s.t > t:
			return 1
		}
		return 0
	})
	// i is the first segment starting at or after t; the one in force is i-1 unless one
	// starts exactly at t.
	if i < len(st.seg) && st.seg[i].t == t {
		return st.seg[i].speed
	}
	return st.seg[max(i-1, 0)].speed
}

// finish returns when a job of size z started at t on one server completes, integrating the
// per-server speed (total speed / k) over the schedule.
func (st *station) finish(t, z float64) float64 {
	if st.cfs {
		return st.finishCFS(t, z, false)
	}
	if len(st.seg) == 1 {
		return t + z*float64(st.k)/st.seg[0].speed
	}
	need := z * float64(st.k) // in units of total-speed·seconds
	for i := range st.seg {
		if i+1 < len(st.seg) && st.seg[i+1].t <= t {
			continue
		}
		sp := st.seg[i].speed
		if i+1 == len(st.seg) {
			return t + need/sp
		}
		room := (st.seg[i+1].t - t) * sp
		if need <= room {
			return t + need/sp
		}
		need -= room
		t = st.seg[i+1].t
	}
	return math.Inf(1) // unreachable: the last segment lasts for ever
}

// addCPU records cpu core-seconds used over [from, to) under a quota, in quota-seconds: a
// probe under a quota reads the CPU used over the quota, not the wall time a throttled job
// spends in the system. (It once added the wall time of a job's last z/quota seconds, cut at
// its start: a job run in a burst counted as its CPU over one core, a fraction of the quota
// it used, and the headroom policy saw a loaded small backend as idle.)
func (st *station) addCPU(from, to, cpu float64) { st.addBusyAmount(from, to, cpu/st.nomSpd) }

// finishCFS is finish under a CFS quota: the job runs at the burst speed while the period's
// budget lasts, and waits for the next period when it is used up. With record (serve; a bare
// finish, as tests call it, records nothing) it records the CPU of each stretch it runs.
func (st *station) finishCFS(t, z float64, record bool) float64 {
	need := z
	// The period is tracked as an index, never re-derived from t alone at a boundary: a
	// float division at (p+1)·P can land on p again and loop for ever.
	if p := int(math.Floor(t / st.cfsP)); p > st.cfsAt {
		st.cfsAt, st.cfsUsed = p, 0
	}
	for {
		end := float64(st.cfsAt+1) * st.cfsP
		left := st.cfsBudget - st.cfsUsed
		if left <= 1e-15 || end-t <= 1e-15 {
			t = max(t, end)
			st.cfsAt, st.cfsUsed = st.cfsAt+1, 0
			continue
		}
		run := min(end-t, left/st.cfsBurst) // seconds it may run in this period
		if need <= run*st.cfsBurst {
			st.cfsUsed += need
			if record {
				st.addCPU(t, t+need/st.cfsBurst, need)
			}
			return t + need/st.cfsBurst
		}
		need -= run * st.cfsBurst
		st.cfsUsed += run * st.cfsBurst
		if record {
			st.addCPU(t, t+run, run*st.cfsBurst)
		}
		t += run
	}
}

// serve queues a job of size z arriving at t and returns its finish time.
func (st *station) serve(t, z float64) float64 {
	j := 0
	for i := 1; i < st.k; i++ {
		if st.free[i] < st.free[j] {
			j = i
		}
	}
	start := max(t, st.free[j])
	var f float64
	if st.cfs {
		f = st.finishCFS(start, z, true)
	} else {
		f = st.finish(start, z)
	}
	st.free[j] = f
	st.push(f)
	if !st.cfs { // a quota's CPU was recorded as it ran (finishCFS)
		st.addBusy(start, f)
	}
	b := st.bin(f)
	st.grow(b)
	st.work[b] += z
	st.jobs[b]++
	return f
}

// inSystem returns the number of jobs queued or in service at time t (jobs finishing exactly
// at t have left). Calls must come with non-decreasing t.
func (st *station) inSystem(t float64) int {
	if st.k == 1 {
		for st.head < len(st.inSys) && st.inSys[st.head] <= t {
			st.head++
		}
		if st.head > 4096 && 2*st.head > len(st.inSys) { // reclaim the consumed front
			st.inSys = append(st.inSys[:0], st.inSys[st.head:]...)
			st.head = 0
		}
		return len(st.inSys) - st.head
	}
	for len(st.inSys) > 0 && st.inSys[0] <= t {
		st.pop()
	}
	return len(st.inSys)
}

func (st *station) bin(t float64) int { return int(t / st.sample) }

func (st *station) grow(b int) {
	if b >= len(st.busy) {
		n := max(b+1, 2*len(st.busy), 64)
		st.busy = append(st.busy, make([]float64, n-len(st.busy))...)
		st.work = append(st.work, make([]float64, n-len(st.work))...)
		st.jobs = append(st.jobs, make([]int32, n-len(st.jobs))...)
	}
}

func (st *station) addBusy(from, to float64) { st.addBusyAmount(from, to, to-from) }

// addBusyAmount adds amount busy server-seconds spread evenly over [from, to).
func (st *station) addBusyAmount(from, to, amount float64) {
	if to <= from {
		b := st.bin(from)
		st.grow(b)
		st.busy[b] += amount
		return
	}
	rate := amount / (to - from)
	for from < to {
		b := st.bin(from)
		end := min(to, float64(b+1)*st.sample)
		if end <= from { // rounding at a bin edge
			end = min(to, float64(b+2)*st.sample)
			b++
		}
		st.grow(b)
		st.busy[b] += (end - from) * rate
		from = end
	}
}

// util returns the busy fraction of sample interval b.
func (st *station) util(b int) float64 {
	if b >= len(st.busy) {
		return 0
	}
	return st.busy[b] / (st.sample * float64(st.k))
}

// cpu returns what a probe reads for sample interval b: the CPU's whole use (the neighbour's
// and the service's) and the service's own, both as fractions of the backend's CPU.
func (st *station) cpu(b int) (busy, own float64) {
	own = (1 - st.nb) * st.util(b)
	return st.nb + own, own
}

// workIn returns the work completed in sample intervals [from, to).
func (st *station) workIn(from, to int) float64 {
	w := 0.0
	for b := from; b < to && b < len(st.work); b++ {
		w += st.work[b]
	}
	return w
}

// utilisation returns the busy fraction over intervals [from, to) and the largest of any one.
func (st *station) utilisation(from, to int) (mean, peak float64) {
	if to <= from {
		return 0, 0
	}
	sum := 0.0
	for b := from; b < to; b++ {
		u := st.util(b)
		sum += u
		peak = max(peak, u)
	}
	return sum / float64(to-from), peak
}

// completedIn returns the jobs finished in intervals [from, to).
func (st *station) completedIn(from, to int) int {
	n := 0
	for b := from; b < to && b < len(st.jobs); b++ {
		n += int(st.jobs[b])
	}
	return n
}

func (st *station) push(f float64) {
	if st.k == 1 {
		st.inSys = append(st.inSys, f)
		return
	}
	h := append(st.inSys, f)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	st.inSys = h
}

func (st *station) pop() {
	h := st.inSys
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && h[r] < h[l] {
			c = r
		}
		if h[i] <= h[c] {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	st.inSys = h
}
