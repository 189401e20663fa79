package view

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"flowweight/collector"
	"flowweight/collector/push"
	"flowweight/controller/dataplane"
	"flowweight/controller/dispatch"
	"flowweight/controller/intent"
	"flowweight/controller/ofswitch"
	"flowweight/controller/switchsync"
	"flowweight/weights"
)

// Snapshot is what the update loop published after an update: immutable, shared by every
// reader, never modified once published.
type Snapshot struct {
	// Services in configuration order.
	Services []Service
	// Intent is the update's intent (nil before the first update).
	Intent *intent.Intent
}

// Service is one service as an update left it. Base holds what only a reload changes (the
// name, VIP, backends' addresses); the slices are the update's own copies, in configuration
// order.
type Service struct {
	Base *ServiceView
	// Policy is the effective policy; Fallback why the headroom policy ran as 1/AL.
	Policy, Fallback string
	Panic            bool
	Total            int
	Result           []weights.Explanation
	// Base weights (the slow loop's, nil before the first write) and what the switches
	// get (nil: nothing yet); Followed while the fast loop corrects them by InFlight.
	Applied, Out []uint16
	Throughput   []float64
	Followed     bool
	InFlight     []weights.InFlight
	// Shadow is the service's shadow_policy ("" without one) and ShadowWeights the weights
	// it would have the switches hold (nil before its first computation): shown, never applied.
	Shadow        string
	ShadowWeights []uint16
}

// Registry is the connected switches' syncers by datapath id, as the balancer last changed
// it (a connect or a disconnect); each syncer publishes its own status.
type Registry map[uint64]*switchsync.Syncer

// Sources are the parts of the running controller a Board reads that are not the update's
// snapshot; each has its own lock or is immutable. Set once (Board.SetSources).
type Sources struct {
	Pool    *collector.Pool
	Now     func() time.Time
	Events  *Log
	History *History
	// Election is the HA election's view (the balancer's Lead).
	Election interface{ View(now time.Time) HAView }
	// Locate is the ARP learner's view of one switch, for a switch not planned yet.
	Locate func(dpid uint64) switchsync.Locator
	// Drain is the operator drain the API asks for (the balancer's drains).
	Drain func(name string, drained bool) error
	// Dispatched is what reactive dispatch sent each backend of a service, by name (nil:
	// not shown).
	Dispatched func(service string) map[string]dispatch.Sent
}

// Board is where the balancer publishes what its readers see: the API, the dashboard, the
// metrics collectors. Readers never take the balancer's lock; everything they read is a
// published immutable value, or an object with its own lock.
type Board struct {
	snap     atomic.Pointer[Snapshot]
	switches atomic.Pointer[Registry]
	src      atomic.Pointer[Sources]
	push     atomic.Pointer[push.Server]
	of       atomic.Pointer[ofswitch.Server]
}

// NewBoard returns an empty board: every reader sees nothing until the balancer publishes.
func NewBoard() *Board { return &Board{} }

// SetSources sets what the board reads besides the snapshot (the balancer's New).
func (b *Board) SetSources(s Sources) { b.src.Store(&s) }

// Publish makes s the snapshot readers see. s must not be modified afterwards.
func (b *Board) Publish(s *Snapshot) { b.snap.Store(s) }

// PublishSwitches makes r the registry readers see. r must not be modified afterwards.
func (b *Board) PublishSwitches(r Registry) { b.switches.Store(&r) }

// SetServers records the listeners once they exist (the balancer's Run).
func (b *Board) SetServers(of *ofswitch.Server, p *push.Server) {
	b.of.Store(of)
	b.push.Store(p)
}

// Latest is the last published snapshot (an empty one before the first).
func (b *Board) Latest() *Snapshot {
	if s := b.snap.Load(); s != nil {
		return s
	}
	return &Snapshot{}
}

func (b *Board) sources() *Sources {
	if s := b.src.Load(); s != nil {
		return s
	}
	return &Sources{Now: time.Now}
}

// Syncer is the published registry's syncer of the switch dpid, nil if none is connected.
func (b *Board) Syncer(dpid uint64) *switchsync.Syncer {
	if r := b.switches.Load(); r != nil {
		return (*r)[dpid]
	}
	return nil
}

// Switches lists the connected datapaths.
func (b *Board) Switches() []uint64 {
	r := b.switches.Load()
	if r == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(*r))
}

// syncers lists the connected switches' syncers by datapath id.
func (b *Board) syncers() []*switchsync.Syncer {
	r := b.switches.Load()
	if r == nil {
		return nil
	}
	out := make([]*switchsync.Syncer, 0, len(*r))
	for _, dpid := range slices.Sorted(maps.Keys(*r)) {
		out = append(out, (*r)[dpid])
	}
	return out
}

// SwitchStatuses returns every connected switch's latest syncer status, by datapath id.
func (b *Board) SwitchStatuses() []*switchsync.Status {
	sys := b.syncers()
	out := make([]*switchsync.Status, len(sys))
	for i, sy := range sys {
		out[i] = sy.Status()
	}
	return out
}

// SwitchViews lists the connected switches by datapath id.
func (b *Board) SwitchViews() []SwitchView {
	var latest uint64
	if in := b.Latest().Intent; in != nil {
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

// Services returns the current view of every service: the last update's weights and
// explanations, the backends' states as the pool holds them now, and the computed and
// realised shares (shares.go), and the shares the switches measured (measured.go).
func (b *Board) Services() []ServiceView {
	v := b.servicesView()
	b.realisedView(v)
	b.measuredView(v)
	return v
}

func (b *Board) servicesView() []ServiceView {
	src := b.sources()
	var snap []collector.State
	if src.Pool != nil {
		snap = src.Pool.Snapshot(nil)
	}
	byName := make(map[string]*collector.State, len(snap))
	for k := range snap {
		byName[snap[k].Name] = &snap[k]
	}
	now := src.Now()
	svcs := b.Latest().Services
	out := make([]ServiceView, 0, len(svcs))
	for i := range svcs {
		s := &svcs[i]
		v := *s.Base
		v.Policy, v.PolicyFallback, v.Panic, v.Total = s.Policy, s.Fallback, s.Panic, s.Total
		v.Backends = slices.Clone(s.Base.Backends)
		shadowView(&v, s)
		var sent map[string]dispatch.Sent
		if v.Dispatch == "reactive" && src.Dispatched != nil {
			sent = src.Dispatched(v.Name)
		}
		for j := range v.Backends {
			bv := &v.Backends[j]
			bv.State, bv.LastReportAge = "unknown", -1
			if j < len(s.Throughput) {
				bv.ThroughputBps = s.Throughput[j]
			}
			if st := byName[bv.Name]; st != nil {
				bv.State, bv.StateSince = st.Status.String(), st.Since
				bv.CPU, bv.Mem, bv.Conns, bv.CPUCount, bv.MemBytes = st.CPU, st.Mem, st.Conns, st.CPUCount, st.MemBytes
				if !st.LastReport.IsZero() {
					bv.LastReportAge = now.Sub(st.LastReport).Seconds()
				}
				bv.ProbeDrain, bv.OperatorDrain, bv.Slow = st.ProbeDrain, st.OperatorDrain, st.Slow
				signalsView(bv, st)
				if c := connectionsOf(st, bv.Source); c != nil {
					n, age := c.N, now.Sub(c.At).Seconds()
					bv.Connections, bv.ConnectionsSource, bv.ConnectionsAge = &n, c.Source, &age
				}
				switch {
				case st.LastHealth.OK:
					bv.Health = "ok"
				case st.LastHealth.Err != "":
					bv.Health = st.LastHealth.Err
				}
			}
			if j < len(s.Result) {
				bv.Explanation = s.Result[j]
				bv.ComputedWeight = s.Result[j].Weight
				bv.LearnedCapacity = s.Result[j].Learned
			}
			if j < len(s.Out) {
				bv.AppliedWeight = s.Out[j]
			}
			if j < len(s.Applied) {
				bv.BaseWeight = s.Applied[j]
			}
			if d, ok := sent[bv.Name]; ok {
				total, n := d.Total, d.InFlight
				bv.Dispatched, bv.DispatchInFlight = &total, &n
			}
			if j < len(s.InFlight) && s.Followed {
				bv.Followed = true
				if s.InFlight[j].OK {
					n := s.InFlight[j].N
					bv.InFlight = &n
				}
			}
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

// History returns recent weight and AL points per backend ("service/backend").
func (b *Board) History() map[string][]Point {
	if h := b.sources().History; h != nil {
		return h.All()
	}
	return map[string][]Point{}
}

// Events returns recent events, oldest first (Log.List).
func (b *Board) Events() []Event {
	if l := b.sources().Events; l != nil {
		return l.List()
	}
	return nil
}

// HA returns the election's state, with each connected switch's role for this controller.
func (b *Board) HA() HAView {
	src := b.sources()
	if src.Election == nil {
		return HAView{Role: "single"}
	}
	v := src.Election.View(src.Now())
	if !v.Enabled {
		return v
	}
	v.Switches = map[string]string{}
	for _, st := range b.SwitchStatuses() {
		v.Switches[fmt.Sprintf("%016x", st.DPID)] = st.Role
	}
	return v
}

// PushRejected returns the push server's rejection counters by reason (nil before Run).
func (b *Board) PushRejected() map[string]uint64 {
	srv := b.push.Load()
	if srv == nil {
		return nil
	}
	out := map[string]uint64{}
	for reason, n := range srv.Rejected() {
		out[string(reason)] = n
	}
	return out
}

// ErrNoBackend: the backend named is not configured (Drain).
var ErrNoBackend = errors.New("no such backend")

// Drain asks the balancer to drain or undrain a backend (its drains own the change). It fails
// with an error wrapping ErrNoBackend for an unknown name, and with another when the change
// could not be made (HA: etcd did not take it).
func (b *Board) Drain(name string, drained bool) error {
	if d := b.sources().Drain; d != nil {
		return d(name, drained)
	}
	return errors.New("the controller is not running")
}
