package balancer

import (
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
	arpReplies                          prometheus.Counter
	barrierRTT                          prometheus.Histogram
	reloads                             *prometheus.CounterVec
	stateWrites                         *prometheus.CounterVec
	push                                *pushCollector
}

// NewMetrics creates unregistered collectors.
func NewMetrics() *Metrics {
	sb := []string{"service", "backend"}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flowweight", Name: name, Help: help}, sb)
	}
	return &Metrics{
		ls:       g("backend_load_ratio", "Composite load LS of a backend, 0..1."),
		c:        g("backend_capacity_ratio", "Capacity C of a backend relative to its pool mean (1 = average)."),
		al:       g("backend_adjusted_load_ratio", "AL = LS / C."),
		computed: g("backend_weight_computed", "Bucket weight computed at the last update."),
		applied:  g("backend_weight_applied", "Bucket weight last written to the switches."),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flowweight", Name: "backend_state",
			Help: "1 for the backend's current state, 0 for the others."}, []string{"service", "backend", "state"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "backend_transitions_total",
			Help: "Backend state changes, by the state entered."}, []string{"to"}),
		snmpErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "snmp_poll_errors_total",
			Help: "Failed SNMP polls, by backend."}, []string{"backend"}),
		switchUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flowweight", Name: "switch_connected",
			Help: "1 while the switch with this datapath id is connected."}, []string{"dpid"}),
		rewrites: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "rewrites_total",
			Help: "Plans applied to a switch and confirmed by barrier replies."}),
		rewriteErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "rewrite_errors_total",
			Help: "Plans that failed (OpenFlow error or barrier timeout) and led to a resync."}),
		drift: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "drift_repairs_total",
			Help: "Read-backs that found the switch different from what was applied."}),
		arpReplies: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowweight", Name: "arp_replies_total",
			Help: "ARP replies sent for VIPs."}),
		barrierRTT: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "flowweight", Name: "barrier_rtt_seconds",
			Help: "Time from sending a stage of messages to its barrier reply.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		push: &pushCollector{},
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "config_reloads_total",
			Help: "Configuration reloads, by result: applied, refused_removal (would remove too much without -allow-removal), invalid."}, []string{"result"}),
		stateWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowweight", Name: "state_writes_total",
			Help: "State file writes (drains, learned capacity, replay marks), by result: ok or error."}, []string{"result"}),
	}
}

// Register adds every collector to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, r := range []string{ReloadApplied, ReloadRefused, ReloadInvalid} {
		m.reloads.WithLabelValues(r) // exported as 0 before the first reload
	}
	m.stateWrites.WithLabelValues("ok")
	m.stateWrites.WithLabelValues("error")
	for _, c := range []prometheus.Collector{m.ls, m.c, m.al, m.computed, m.applied, m.state, m.transitions, m.snmpErrors,
		m.switchUp, m.rewrites, m.rewriteErrors, m.drift, m.arpReplies, m.barrierRTT, m.push, m.reloads, m.stateWrites} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) bind(b *Balancer) { m.push.b = b }

var stateNames = []string{"unknown", "warming", "up", "down", "stale", "drained"}

// observeService records one service's latest computation. Called with b.mu held.
func (m *Metrics) observeService(s *service) {
	for j, e := range s.result.Backends {
		name := s.cfg.Backends[j].Name
		m.ls.WithLabelValues(s.cfg.Name, name).Set(e.LS)
		m.c.WithLabelValues(s.cfg.Name, name).Set(e.C)
		m.al.WithLabelValues(s.cfg.Name, name).Set(e.AL)
		m.computed.WithLabelValues(s.cfg.Name, name).Set(float64(e.Weight))
		if s.applied != nil {
			m.applied.WithLabelValues(s.cfg.Name, name).Set(float64(s.applied[j]))
		}
		for _, st := range stateNames {
			v := 0.0
			if st == e.Status {
				v = 1
			}
			m.state.WithLabelValues(s.cfg.Name, name, st).Set(v)
		}
	}
}

// pushCollector exposes the push server's counters at scrape time.
type pushCollector struct{ b *Balancer }

var (
	pushAccepted = prometheus.NewDesc("flowweight_push_reports_accepted_total", "Probe reports verified and ingested.", nil, nil)
	pushRejected = prometheus.NewDesc("flowweight_push_reports_rejected_total", "Probe datagrams rejected, by reason.", []string{"reason"}, nil)
)

func (p *pushCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pushAccepted; ch <- pushRejected }

func (p *pushCollector) Collect(ch chan<- prometheus.Metric) {
	if p.b == nil {
		return
	}
	p.b.mu.Lock()
	srv := p.b.pushsrv
	p.b.mu.Unlock()
	if srv == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(pushAccepted, prometheus.CounterValue, float64(srv.Accepted()))
	for reason, n := range srv.Rejected() {
		ch <- prometheus.MustNewConstMetric(pushRejected, prometheus.CounterValue, float64(n), string(reason))
	}
}
