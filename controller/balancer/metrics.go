package balancer

import (
	"flowweight/controller/arp"
	"flowweight/controller/switchsync"
	"flowweight/controller/view"
	"flowweight/weights"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the controller's Prometheus collectors. Register them on an explicit
// registry with Register; names carry units and _total.
type Metrics struct {
	ls, c, al, computed, applied, state *prometheus.GaugeVec
	transitions                         *prometheus.CounterVec
	snmpErrors                          *prometheus.CounterVec
	switchUp                            *prometheus.GaugeVec
	rewrites, rewriteErrors, drift      prometheus.Counter
	contested                           *prometheus.CounterVec
	arpReplies                          prometheus.Counter
	arpRequests, arpRequestsDropped     prometheus.Counter
	arpRefused, arpChanges              *prometheus.CounterVec
	clamped                             *prometheus.GaugeVec
	clamps                              *prometheus.CounterVec
	arpFaults                           *prometheus.CounterVec
	barrierRTT                          prometheus.Histogram
	updateSeconds                       prometheus.Histogram
	followSeconds                       prometheus.Histogram // fast-loop steps that changed an intent
	dispatched, dispatchDropped         *prometheus.CounterVec
	dispatchSeconds                     prometheus.Histogram
	reloads                             *prometheus.CounterVec
	stateWrites                         *prometheus.CounterVec
	// board is where the balancer publishes what the scrape-time collectors read (the push
	// server's and the listener's counters, the election, the shares): view.Board.Collectors.
	board *view.Board
	// The headroom policy's view (docs/weights.md): the series exist only while the signal
	// does, so a dashboard shows a gap, not a zero, when a backend stops reporting its own CPU.
	serviceCPU, headroom *prometheus.GaugeVec
	fallback             *prometheus.GaugeVec
	// conns exists only once a backend has reported: a drain's progress, and the in-flight
	// panel of configs/grafana-dashboard.json.
	conns *prometheus.GaugeVec
	// warmup exists only while a backend ramps (docs/weights.md, "Warm-up that watches").
	warmup *prometheus.GaugeVec
}

// NewMetrics creates unregistered collectors.
func NewMetrics() *Metrics {
	sb := []string{"service", "backend"}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flowweight", Name: name, Help: help}, sb)
	}
	m := &Metrics{
		ls:       g("backend_load_ratio", "Composite load LS of a backend, 0..1."),
		c:        g("backend_capacity_ratio", "Capacity C of a backend relative to its pool mean (1 = average)."),
		al:       g("backend_adjusted_load_ratio", "AL = LS / C."),
		computed: g("backend_weight_computed", "Bucket weight computed at the last update."),
		applied:  g("backend_weight_applied", "Bucket weight last written to the switches."),
		serviceCPU: g("backend_service_cpu_ratio",
			"CPU the service's own processes use, as a fraction of the backend's CPUs (smoothed); absent while not reported."),
		conns: g("backend_connections",
			"Established connections on the backend's service ports, smoothed, as its probe or SNMP agent last reported; absent until it reports."),
		warmup: g("backend_warmup_ratio",
			"Fraction of its weight a ramping backend gets (warming, or up while a held watched ramp finishes); absent when it is not ramping."),
		headroom: g("backend_headroom_ratio", "Spare capacity C·(avail − own) of the headroom policy, in pool-mean units; absent when it did not run."),
		fallback: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flowweight", Name: "service_policy_fallback_backends",
			Help: "Live backends without the service's own CPU, for which the headroom policy ran as 1/AL at the last update; 0 when it did not fall back."}, []string{"service"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flowweight", Name: "backend_state",
			Help: "1 for the backend's current state, 0 for the others."}, []string{"service", "backend", "state"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "backend_transitions_total",
			Help: "Backend state changes, by the state entered."}, []string{"to"}),
		snmpErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "snmp_poll_errors_total",
			Help: "Failed SNMP polls, by backend."}, []string{"backend"}),
		switchUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flowweight", Name: "switch_connected",
			Help: "1 while the switch with this datapath id is connected; the series is removed when it disconnects."}, []string{"dpid"}),
		rewrites: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "rewrites_total",
			Help: "Plans applied to a switch and confirmed by barrier replies."}),
		rewriteErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "rewrite_errors_total",
			Help: "Plans that failed (OpenFlow error or barrier timeout) and led to a resync."}),
		drift: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "drift_repairs_total",
			Help: "Read-backs that found the switch different from what was applied."}),
		contested: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "ha_switch_contested_total",
			Help: "Claims by a switch that another controller is master while this one leads (HA): the switch is not written to until its next read-back, and the election is asked; reason is stale_role, role_status, is_slave or other_role."}, []string{"reason"}),
		arpReplies: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "arp_replies_total",
			Help: "ARP replies sent for VIPs."}),
		arpRequests: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "arp_requests_total",
			Help: "ARP requests sent to locate or re-confirm backends."}),
		arpRequestsDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "arp_requests_dropped_total",
			Help: "ARP requests not sent because the outstanding-request table was full."}),
		arpRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "arp_refused_total",
			Help: "ARP frames that changed no backend location, by reason (a fixed set, see controller/arp)."}, []string{"reason"}),
		arpChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "arp_location_changes_total",
			Help: "Closed ARP rounds that changed a backend location's state, by kind (learned, confirmed, moved, candidate, dropped, conflict)."}, []string{"kind"}),
		clamped: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flowweight", Name: "backend_capacity_clamped",
			Help: "1 while the backend's reported CPU count or memory (resource) exceeds weighting.max_capacity_ratio and is clamped."},
			[]string{"service", "backend", "resource"}),
		clamps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "capacity_clamps_total",
			Help: "Transitions of a backend into clamped reported capacity, by resource (cpu, mem)."}, []string{"resource"}),
		arpFaults: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "arp_faults_total",
			Help: "Packet-ins that were not valid ARP, and ARP packet-outs that could not be sent, by reason."}, []string{"reason"}),
		barrierRTT: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "flowweight", Name: "barrier_rtt_seconds",
			Help: "Time from sending a stage of messages to its barrier reply.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		updateSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "flowweight", Name: "update_duration_seconds",
			Help:    "Time one update takes from the pool's snapshot to the intent offered to every switch (switch I/O is not in it); it must stay well under update_period.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		followSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "flowweight", Name: "follow_duration_seconds",
			Help:    "Duration of fast-loop steps (weighting.in_flight_period) that changed the weights handed to the switches.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 9)}),
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "dispatched_connections_total",
			Help: "New connections of reactive services (dispatch = \"reactive\") the controller sent to a backend, by how it chose: least_conn (probes' in-flight counts) or round_robin (by weight, without counts)."},
			[]string{"service", "backend", "by"}),
		dispatchDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "dispatch_dropped_total",
			Help: "First frames of reactive services' new connections not sent on (the client retransmits), by reason: no_service, no_backend, truncated, not_sent."},
			[]string{"service", "reason"}),
		dispatchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "flowweight", Name: "dispatch_duration_seconds",
			Help:    "Time from a reactive service's packet-in to its packet-out queued (the choice and the encoding; the switch's and the socket's time are not in it).",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10)}),
		board: view.NewBoard(),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "config_reloads_total",
			Help: "Configuration reloads, by result: applied, refused_removal (would remove too much without -allow-removal), invalid."}, []string{"result"}),
		stateWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "state_writes_total",
			Help: "State file writes (drains, learned capacity, replay marks), by result: ok or error."}, []string{"result"}),
	}
	for _, r := range arp.Reasons {
		m.arpRefused.WithLabelValues(string(r)) // every reason shows, at 0, before it first happens
	}
	return m
}

// Register adds every collector to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, r := range []string{ReloadApplied, ReloadRefused, ReloadInvalid} {
		m.reloads.WithLabelValues(r) // exported as 0 before the first reload
	}
	m.stateWrites.WithLabelValues("ok")
	for _, r := range []string{switchsync.ContestStale, switchsync.ContestStatus, switchsync.ContestIsSlave, switchsync.ContestOtherRole} {
		m.contested.WithLabelValues(r)
	}
	m.stateWrites.WithLabelValues("error")
	for _, c := range []prometheus.Collector{m.ls, m.c, m.al, m.computed, m.applied, m.state, m.transitions, m.snmpErrors,
		m.switchUp, m.rewrites, m.rewriteErrors, m.drift, m.contested, m.arpReplies, m.arpFaults, m.barrierRTT, m.updateSeconds, m.followSeconds,
		m.arpRequests, m.arpRequestsDropped, m.arpRefused, m.arpChanges, m.clamped, m.clamps, m.reloads, m.stateWrites,
		m.serviceCPU, m.headroom, m.fallback, m.conns, m.warmup, m.dispatched, m.dispatchDropped, m.dispatchSeconds} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, c := range m.board.Collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// forgetBackend removes the series of a backend a reload took out of a service: the names
// are the operator's, and a series per name ever configured would grow with every rename.
func (m *Metrics) forgetBackend(service, backend string) {
	l := prometheus.Labels{"service": service, "backend": backend}
	for _, v := range []*prometheus.GaugeVec{m.ls, m.c, m.al, m.computed, m.applied, m.state, m.serviceCPU, m.headroom, m.clamped, m.conns, m.warmup} {
		v.DeletePartialMatch(l)
	}
}

// forgetService removes the series of a service a reload removed (its backends' too).
func (m *Metrics) forgetService(service string) {
	m.fallback.DeleteLabelValues(service)
	for _, v := range []*prometheus.GaugeVec{m.ls, m.c, m.al, m.computed, m.applied, m.state, m.serviceCPU, m.headroom, m.clamped, m.conns, m.warmup} {
		v.DeletePartialMatch(prometheus.Labels{"service": service})
	}
}

// forgetSwitch removes a disconnected switch's per-datapath series.
func (m *Metrics) forgetSwitch(dpid string) { m.switchUp.DeleteLabelValues(dpid) }

var stateNames = [...]string{"unknown", "warming", "up", "down", "stale", "drained"}

// observeService records one service's latest computation: the update loop writes the
// gauges (the services are its). Called with the balancer's lock held.
func (m *Metrics) observeService(s *service) {
	if s.tuning.Policy == weights.PolicyHeadroom {
		m.fallback.WithLabelValues(s.cfg.Name).Set(float64(s.result.Fallback))
	} else {
		m.fallback.DeleteLabelValues(s.cfg.Name)
	}
	// The series' handles are looked up once per service (a reload builds new services):
	// looking up a dozen label pairs per backend per update was 40 % of an update at 10,000
	// backends (BenchmarkUpdate).
	fresh := len(s.gauges) != len(s.result.Backends)
	if fresh {
		s.gauges = make([]backendGauges, len(s.result.Backends))
		for j := range s.gauges {
			g, name := &s.gauges[j], s.cfg.Backends[j].Name
			g.ls, g.c, g.al = m.ls.WithLabelValues(s.cfg.Name, name), m.c.WithLabelValues(s.cfg.Name, name), m.al.WithLabelValues(s.cfg.Name, name)
			g.computed = m.computed.WithLabelValues(s.cfg.Name, name)
			for k, st := range stateNames {
				g.state[k] = m.state.WithLabelValues(s.cfg.Name, name, st)
			}
		}
	}
	for j, e := range s.result.Backends {
		g, name := &s.gauges[j], s.cfg.Backends[j].Name
		g.ls.Set(e.LS)
		g.c.Set(e.C)
		g.al.Set(e.AL)
		g.computed.Set(float64(e.Weight))
		// These exist only while measured (a gap, not a zero, on a dashboard); fresh: delete a
		// series the service before a reload made.
		svc := s.cfg.Name
		setWhile(m.serviceCPU, &g.serviceCPU, e.Used == "service_cpu", e.Own, fresh, svc, name)
		setWhile(m.headroom, &g.headroom, e.Avail > 0, e.Headroom, fresh, svc, name)
		setWhile(m.warmup, &g.warmup, e.WarmupTimer > 0, e.Warmup, fresh, svc, name)
		hasConns := j < len(s.in) && s.in[j].HasMetrics
		conns := 0.0
		if hasConns {
			conns = s.in[j].Conns
		}
		setWhile(m.conns, &g.conns, hasConns, conns, fresh, svc, name)
		if out := s.out(); out != nil {
			if g.applied == nil {
				g.applied = m.applied.WithLabelValues(s.cfg.Name, name)
			}
			g.applied.Set(float64(out[j]))
		}
		for k, st := range stateNames {
			v := 0.0
			if st == e.Status {
				v = 1
			}
			g.state[k].Set(v)
		}
	}
}

// setWhile keeps a backend's series of vec at v while present, making it on first use, and
// deletes it once absent (or, fresh, whatever series the service before a reload left). g is
// the backend's handle, nil while the series does not exist.
func setWhile(vec *prometheus.GaugeVec, g *prometheus.Gauge, present bool, v float64, fresh bool, service, backend string) {
	switch {
	case present:
		if *g == nil {
			*g = vec.WithLabelValues(service, backend)
		}
		(*g).Set(v)
	case *g != nil || fresh:
		vec.DeleteLabelValues(service, backend)
		*g = nil
	}
}

// backendGauges are one backend's series; serviceCPU, headroom, applied, conns and warmup
// are nil while the series does not exist.
type backendGauges struct {
	ls, c, al, computed                          prometheus.Gauge
	serviceCPU, headroom, applied, conns, warmup prometheus.Gauge
	state                                        [len(stateNames)]prometheus.Gauge
}
