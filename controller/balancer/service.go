package balancer

import (
	"iter"
	"math"
	"time"

	"flowweight/collector"
	"flowweight/controller/config"
	"flowweight/controller/view"
	"flowweight/weights"
)

// service is one VIP's running state: the weights computed and applied for its backends.
type service struct {
	cfg     config.Service
	index   uint16
	tuning  weights.Tuning
	books   []book // one per backend, in config order
	result  weights.Result
	applied []uint16 // weights last written to the switches, in config order; nil before the first write
	in      []weights.Backend
	// hold: the controller started less than stale_after ago and some backend of this service
	// has not reported yet (or a connected switch was not read back yet); its group is kept as
	// the switch holds it (intent.Service.Held, switchsync.Hold).
	hold bool
	// clamps: per backend name, its capacity clamping as last logged (noteClamps).
	clamps map[string]*clampState
	// gauges are the backends' metric series, looked up once (Metrics.observeService).
	gauges []backendGauges
	// base is the part of its view only a reload changes (publish.go).
	base *view.ServiceView
	// seed is the weights to start from at the end of the start-up hold, in config order: the
	// state file's, or those the switches agree on (Balancer.takeSeedsLocked, seed.go); nil
	// when there is none.
	seed []uint16
	// The fast loop (follow.go): names are the backends' names in config order; inflight the
	// counts it last followed; followed the weights it corrected applied to (what the group
	// holds while it is not nil); inflightMean each backend's average count (the reference
	// of weighting.in_flight_reference "own"); fast and followNext its scratch.
	names        []string
	inflight     []weights.InFlight
	inflightMean weights.InFlightTracker
	followed     []uint16
	followNext   []uint16
	fast         weights.Result
	// seedFrom says where seed came from (logged); seedWhy why no switch seed was taken;
	// seedNoted that the start-up source was logged (seed.go).
	seedFrom, seedWhy string
	seedNoted         bool
	// shadow is the service's shadow_policy, computed beside the live weights and never
	// applied (shadow.go), except on its canary switches (canary_datapaths); nil without one.
	shadow *shadow
	// canaryMoved: the last computation moved the weights the canary switches hold.
	canaryMoved bool
}

// adoptSeed starts the service from the weights the switch holds, as if this controller had
// written them: the first update after a restart is then damped and step-limited from what
// the switch serves, exactly as a controller that never stopped would move. Without it a
// restart jumped straight to the target (a jump the running controller would have taken in
// max_step steps), and in stateless mode re-hashed the connections that jump moves.
func (s *service) adoptSeed() {
	var sum float64
	for _, w := range s.seed {
		sum += float64(w)
	}
	if sum == 0 || len(s.seed) != len(s.books) {
		s.seed = nil
		return
	}
	// The switch holds slot counts (docs/dataplane.md): scale them to the weights' total, so
	// that the dead-band and the panic rule compare like with like.
	s.applied = make([]uint16, len(s.seed))
	for j, w := range s.seed {
		s.books[j].prevShare = float64(w) / sum
		s.applied[j] = uint16(math.Round(float64(w) / sum * float64(s.tuning.Total)))
	}
	s.seed = nil
}

func (s *service) anyUnknown(states map[string]*collector.State) bool {
	for _, be := range s.cfg.Backends {
		if st := states[be.Name]; st == nil || st.Status == weights.StatusUnknown {
			return true
		}
	}
	return false
}

// book is what weights needs from one update to the next for one backend.
type book struct {
	learned   float64
	prevShare float64
	// warm and warmAt carry a watched warm-up from period to period: the ramp fraction the
	// last period computed and the backend's WarmupElapsed then (weights.Backend.PrevWarmup).
	warm       float64
	warmAt     time.Duration
	throughput float64 // bytes/s measured from the switch's per-backend return flow, smoothed
	// thr smooths the throughput like the pool smooths the CPU it is divided by when capacity
	// is learned: a raw period's bytes over a smoothed utilisation made the learned factors
	// noisy enough to overload the fastest backend near saturation (docs/weights.md).
	thr weights.EWMA
}

func newService(cfg *config.Config, s *config.Service, i int, old *service) *service {
	svc := &service{cfg: *s, tuning: cfg.Weighting}
	svc.tuning.Policy = cfg.EffectivePolicy(s)
	svc.index = uint16(i)
	if s.GroupID < 0xffff {
		svc.index = uint16(s.GroupID) // stable across reorderings of the file
	}
	svc.books = make([]book, len(s.Backends))
	for _, be := range s.Backends {
		svc.names = append(svc.names, be.Name)
	}
	for j := range svc.books {
		svc.books[j].thr = weights.NewEWMA(svc.tuning.Alpha)
	}
	svc.in = make([]weights.Backend, len(s.Backends))
	svc.shadow = newShadow(s, svc.tuning, old)
	if old != nil {
		// Keep what was learned for backends that remain, so a reload does not reset capacity
		// learning or warm shares.
		if len(old.applied) > 0 {
			svc.applied = make([]uint16, len(s.Backends))
		}
		for j, k := range remaining(old.cfg.Backends, s.Backends) {
			svc.books[j] = old.books[k]
			if svc.applied != nil {
				svc.applied[j] = old.applied[k]
			}
		}
	}
	return svc
}

// remaining yields, for each backend of next that was in prev (by name), its index in next
// and in prev: what a reload carries over.
func remaining(prev, next []config.Backend) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		at := make(map[string]int, len(prev))
		for k, be := range prev {
			at[be.Name] = k
		}
		for j, be := range next {
			if k, ok := at[be.Name]; ok && !yield(j, k) {
				return
			}
		}
	}
}

// compute runs weights.Compute for the service from the pool's snapshot (indexed by name) and
// reports whether to write the result: it is worth a rewrite and the service is not held.
//
// Only a periodic update is a sampling period: it alone advances the learned capacity. The
// shares the damping and step limit start from next time move when the result is written
// (the switch then holds them) or at a period; a kick that writes nothing leaves them, so the
// next period's step starts from what the switch holds.
func (s *service) compute(states map[string]*collector.State, periodic bool) (apply bool) {
	for j, be := range s.cfg.Backends {
		st := states[be.Name]
		in := weights.Backend{Name: be.Name, Status: weights.StatusUnknown, Factor: be.Capacity,
			Learned: s.books[j].learned, PrevShare: s.books[j].prevShare, Throughput: s.books[j].throughput,
			PrevWarmup: s.books[j].warm, PrevWarmupElapsed: s.books[j].warmAt}
		if s.applied != nil {
			in.PrevWeight = s.applied[j]
		}
		if st != nil {
			in.Status, in.WarmupElapsed, in.HasMetrics, in.Slow = st.Status, st.WarmupElapsed, st.HasMetrics, st.Slow
			in.CPU, in.Mem, in.Net, in.Conns = st.CPU, st.Mem, st.Net, st.Conns
			in.CPUCount, in.MemBytes = st.CPUCount, st.MemBytes
			in.ServiceCPU, in.HasServiceCPU = st.Signals.ServiceCPU, st.Signals.HasServiceCPU
			in.CPUPressure, in.HasPressure = st.Signals.CPUPressure, st.Signals.HasPressure
		}
		s.in[j] = in
	}
	weights.Compute(s.in, s.tuning, &s.result)
	if s.shadow != nil {
		s.canaryMoved = s.shadow.compute(s.in, periodic) && s.cfg.ParsedCanary() != nil
	}
	apply = (s.applied == nil || weights.Worth(s.applied, &s.result, s.tuning)) && !s.hold
	advance(s.books, s.in, &s.result, periodic, apply)
	return apply
}

// advance moves books on after a computation r: the learned capacity at a period only, the
// share damping and the step limit start from at a period or a write (service.compute).
func advance(books []book, in []weights.Backend, r *weights.Result, periodic, apply bool) {
	for j := range books {
		e := &r.Backends[j]
		if periodic {
			books[j].learned = e.Learned
			switch {
			case e.WarmupTimer > 0: // ramping: the next period continues from here
				books[j].warm, books[j].warmAt = e.Warmup, in[j].WarmupElapsed
			case in[j].Status.Live(): // live and done ramping
				books[j].warm, books[j].warmAt = 0, 0
			}
			// Not live (stale, drained, down): the carry stays, so a ramp a stale report or
			// a drain interrupted resumes where it was; one the backend's death ended starts
			// again, its warm-up having begun since (weights.Backend.PrevWarmupElapsed).
		}
		if periodic || apply {
			books[j].prevShare = e.Full
		}
	}
}
