package balancer

import (
	"context"
	"fmt"
	"time"

	"flowweight/collector"
	"flowweight/controller/dataplane"
	"flowweight/weights"
)

// ServiceView is what the API, the dashboard and `controller status` show of one service.
type ServiceView struct {
	Name    string `json:"name"`
	VIP     string `json:"vip"`
	Port    int    `json:"port"`
	Mode    string `json:"mode"`
	GroupID int    `json:"group_id"`
	Policy  string `json:"policy"`
	// PolicyFallback says why the headroom policy ran as 1/AL (a backend without the
	// service's own CPU); empty when it did not.
	PolicyFallback string        `json:"policy_fallback,omitempty"`
	Panic          bool          `json:"panic"`
	Total          int           `json:"total"`
	Backends       []BackendView `json:"backends"`
	// SlotTable is the number of slots of the service's select-group table on the first
	// connected switch (docs/dataplane.md, "Exact shares"); 0 while no switch is connected.
	SlotTable int `json:"slot_table"`
	// SlotFallback is set when that switch would not build a table for the group (only
	// possible on Open vSwitch before 2.10): the split is then not proportional.
	SlotFallback bool `json:"slot_fallback"`
}

// BackendView is one backend: its state, smoothed metrics and the explanation of its weight.
type BackendView struct {
	Name          string    `json:"name"`
	IP            string    `json:"ip"`
	Port          int       `json:"port"`
	Source        string    `json:"source"`
	State         string    `json:"state"`
	StateSince    time.Time `json:"state_since"`
	CPU           float64   `json:"cpu"`
	Mem           float64   `json:"mem"`
	Conns         float64   `json:"conns"`
	CPUCount      float64   `json:"cpu_count"`
	MemBytes      float64   `json:"mem_bytes"`
	LastReportAge float64   `json:"last_report_age_seconds"` // -1 when none yet
	Health        string    `json:"health"`
	// Slow: the backend's health checks time out while it is busy; it serves at a reduced
	// share instead of being evicted (docs/weights.md, "Busy is not dead").
	Slow           bool    `json:"slow"`
	ProbeDrain     bool    `json:"probe_drain"`
	OperatorDrain  bool    `json:"operator_drain"`
	ThroughputBps  float64 `json:"throughput_bytes_per_second"`
	ComputedWeight uint16  `json:"computed_weight"`
	AppliedWeight  uint16  `json:"applied_weight"`
	// BaseWeight is the slow loop's weight (every update_period, from smoothed load); while
	// the fast loop runs (Followed), AppliedWeight is it corrected by InFlight, the backend's
	// work in flight as last read (nil: no fresh count, so it kept its base share).
	BaseWeight      uint16              `json:"base_weight"`
	Followed        bool                `json:"followed"`
	InFlight        *float64            `json:"in_flight"`
	Explanation     weights.Explanation `json:"explanation"`
	LearnedCapacity float64             `json:"learned_capacity"`
	// Share is the backend's share of new connections by the applied weights, 0..1.
	Share float64 `json:"share"`
	// Slots are the slots of the switch's table that send to the backend, and RealisedShare
	// is Slots / SlotTable: what the switch really does with new connections.
	Slots         int     `json:"slots"`
	RealisedShare float64 `json:"realised_share"`
	// Signals lists the optional signals of the backend's latest report ("service_cpu,
	// cpu_pressure"; "none"), and the values of those present: absent is not zero.
	Signals     string   `json:"signals"`
	ServiceCPU  *float64 `json:"service_cpu,omitempty"`
	CPUPressure *float64 `json:"cpu_pressure,omitempty"`
	// PressureScope is "cgroup" or "host", with CPUPressure.
	PressureScope string   `json:"pressure_scope,omitempty"`
	Throttled     *float64 `json:"throttled,omitempty"`
	// HealthLatency is the last health check's time in seconds, when measured.
	HealthLatency *float64 `json:"health_latency_seconds,omitempty"`
}

// SwitchView is one connected switch as its syncer last reported it: how far behind the
// latest intent it is, and when it last took a write.
type SwitchView struct {
	DPID string `json:"dpid"`
	// OVS is the Open vSwitch version from the switch's DESC, "" when it did not say.
	OVS string `json:"ovs,omitempty"`
	// Known: the controller has read back or written what the switch holds.
	Known bool `json:"known"`
	// Intent is the update whose intent the switch holds (0: none yet); Behind counts the
	// updates since (0: in step).
	Intent uint64 `json:"intent"`
	Behind uint64 `json:"behind"`
	// LastApply is when the last plan was confirmed by its barrier replies, with the time
	// the plan took.
	LastApply      time.Time `json:"last_apply"`
	LastApplyMicro int64     `json:"last_apply_us"`
	// Role is this controller's role on the switch as the switch confirmed it (equal without
	// HA, master or slave), Term the generation id, and Confirmed when the switch first
	// acknowledged a barrier from this controller as master in Term (omitted: not yet).
	Role      string     `json:"role"`
	Term      uint64     `json:"term,omitempty"`
	Confirmed *time.Time `json:"confirmed,omitempty"`
}

// SwitchViews lists the connected switches by datapath id.
func (b *Balancer) SwitchViews() []SwitchView {
	var latest uint64
	if in := b.Latest(); in != nil {
		latest = in.Seq
	}
	sts := b.SwitchStatuses()
	out := make([]SwitchView, 0, len(sts))
	for _, st := range sts {
		v := SwitchView{DPID: fmt.Sprintf("%016x", st.DPID), Known: st.Known, Intent: st.Seq,
			LastApply: st.LastApply, LastApplyMicro: st.LastRTT.Microseconds(), Role: st.Role, Term: st.Term}
		if !st.Confirmed.IsZero() {
			c := st.Confirmed
			v.Confirmed = &c
		}
		if st.OVS != (dataplane.OVSVersion{}) {
			v.OVS = st.OVS.String()
		}
		if latest > st.Seq {
			v.Behind = latest - st.Seq
		}
		out = append(out, v)
	}
	return out
}

// Point is one entry of a backend's recent history, for the dashboard's chart.
type Point struct {
	Time   time.Time `json:"t"`
	Weight uint16    `json:"w"`
	AL     float64   `json:"al"`
}

// Services returns the current view of every service, with the computed and realised
// shares (slots.go).
func (b *Balancer) Services() []ServiceView {
	v := b.servicesView()
	b.realisedView(v)
	return v
}

func (b *Balancer) servicesView() []ServiceView {
	snap := b.pool.Snapshot(nil)
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ServiceView, 0, len(b.services))
	for _, s := range b.services {
		v := ServiceView{Name: s.cfg.Name, VIP: s.cfg.VIP, Port: s.cfg.Port, Mode: s.cfg.Mode, GroupID: s.cfg.GroupID,
			Policy: string(s.tuning.Policy), PolicyFallback: s.result.FallbackReason(), Panic: s.result.Panic, Total: s.result.Total}
		for j, be := range s.cfg.Backends {
			bv := BackendView{Name: be.Name, IP: be.IP, Port: be.Port, Source: be.Source, State: "unknown", LastReportAge: -1,
				ThroughputBps: s.books[j].throughput}
			for k := range snap {
				if snap[k].Name != be.Name {
					continue
				}
				st := &snap[k]
				bv.State, bv.StateSince = st.Status.String(), st.Since
				bv.CPU, bv.Mem, bv.Conns, bv.CPUCount, bv.MemBytes = st.CPU, st.Mem, st.Conns, st.CPUCount, st.MemBytes
				if !st.LastReport.IsZero() {
					bv.LastReportAge = now.Sub(st.LastReport).Seconds()
				}
				bv.ProbeDrain, bv.OperatorDrain, bv.Slow = st.ProbeDrain, st.OperatorDrain, st.Slow
				signalsView(&bv, st)
				switch {
				case st.LastHealth.OK:
					bv.Health = "ok"
				case st.LastHealth.Err != "":
					bv.Health = st.LastHealth.Err
				}
			}
			if j < len(s.result.Backends) {
				bv.Explanation = s.result.Backends[j]
				bv.ComputedWeight = s.result.Backends[j].Weight
				bv.LearnedCapacity = s.result.Backends[j].Learned
			}
			if out := s.out(); out != nil {
				bv.AppliedWeight = out[j]
			}
			if s.applied != nil {
				bv.BaseWeight = s.applied[j]
			}
			if j < len(s.inflight) && s.followed != nil {
				bv.Followed = true
				if s.inflight[j].OK {
					n := s.inflight[j].N
					bv.InFlight = &n
				}
			}
			v.Backends = append(v.Backends, bv)
		}
		out = append(out, v)
	}
	return out
}

// signalsView fills the optional signals of the latest report, leaving absent ones nil.
func signalsView(bv *BackendView, st *collector.State) {
	sig := st.Signals
	bv.Signals = sig.Names()
	val := func(x float64) *float64 { return &x }
	if sig.HasServiceCPU {
		bv.ServiceCPU = val(sig.ServiceCPU)
	}
	if sig.HasPressure {
		bv.CPUPressure, bv.PressureScope = val(sig.CPUPressure), "host"
		if sig.PressureCgroup {
			bv.PressureScope = "cgroup"
		}
	}
	if sig.HasThrottled {
		bv.Throttled = val(sig.Throttled)
	}
	if sig.HasHealthLatency {
		bv.HealthLatency = val(st.LastHealth.Latency.Seconds())
	}
}

// Drain drains or undrains a backend by name (the API's call): ErrNoBackend when no backend
// has the name. With HA the drain is stored in etcd first, so every controller applies it and
// it holds after a failover; when etcd does not take it, nothing changes and the error says so.
func (b *Balancer) Drain(name string, drained bool) error {
	if _, ok := b.operatorDrainStates()[name]; !ok {
		return fmt.Errorf("%w named %q", ErrNoBackend, name)
	}
	if b.elector != nil {
		ctx, cancel := context.WithTimeout(b.context(), haTimeout)
		err := b.elector.SetDrain(ctx, name, drained)
		cancel()
		if err != nil {
			return fmt.Errorf("drain of %q not stored in etcd, so not made (every controller must see it): %w", name, err)
		}
	}
	if !b.pool.Drain(name, drained) {
		return fmt.Errorf("%w named %q", ErrNoBackend, name)
	}
	b.saveState() // before answering: a drain the API confirmed survives a restart
	b.Kick()
	return nil
}

// history keeps the last points per backend in fixed rings of compact points, allocated in
// full on a backend's first point, so memory does not grow with uptime (the soak test checks).
type history struct {
	max    int
	series map[string]*series
}

type point struct {
	unixMilli int64
	al        float32
	weight    uint16
}

type series struct {
	pts  []point
	next int // where the next point goes once the ring is full
}

func (h *history) add(name string, p Point) {
	if h.series == nil {
		h.series = map[string]*series{}
	}
	s := h.series[name]
	if s == nil {
		s = &series{pts: make([]point, 0, h.max)}
		h.series[name] = s
	}
	c := point{unixMilli: p.Time.UnixMilli(), al: float32(p.AL), weight: p.Weight}
	if len(s.pts) < h.max {
		s.pts = append(s.pts, c)
		return
	}
	s.pts[s.next] = c
	s.next = (s.next + 1) % h.max
}

// keep drops the series of backends that are no longer configured.
func (h *history) keep(names map[string]bool) {
	for n := range h.series {
		if !names[n] {
			delete(h.series, n)
		}
	}
}

func (s *series) points() []Point {
	out := make([]Point, 0, len(s.pts))
	for i := range s.pts {
		c := s.pts[(s.next+i)%len(s.pts)]
		out = append(out, Point{Time: time.UnixMilli(c.unixMilli), Weight: c.weight, AL: float64(c.al)})
	}
	return out
}

// History returns recent weight and AL points per backend ("service/backend").
func (b *Balancer) History() map[string][]Point {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][]Point, len(b.hist.series))
	for k, s := range b.hist.series {
		out[k] = s.points()
	}
	return out
}
