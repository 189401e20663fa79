package view

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the board's scrape-time collectors: the push server's and the OpenFlow
// listener's counters, the election and the shares. Each reads what was published, never
// the balancer.
func (b *Board) Collectors() []prometheus.Collector {
	return []prometheus.Collector{pushCollector{b}, ofCollector{b}, haCollector{b}, shareCollector{b}, measuredCollector{b}, connsCollector{b}, shadowCollector{b}}
}

// pushCollector exposes the push server's counters at scrape time.
type pushCollector struct{ b *Board }

var (
	pushAccepted = prometheus.NewDesc("flowweight_push_reports_accepted_total", "Probe reports verified and ingested.", nil, nil)
	pushRejected = prometheus.NewDesc("flowweight_push_reports_rejected_total", "Probe datagrams rejected, by reason.", []string{"reason"}, nil)
)

func (p pushCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pushAccepted; ch <- pushRejected }

func (p pushCollector) Collect(ch chan<- prometheus.Metric) {
	srv := p.b.push.Load()
	if srv == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(pushAccepted, prometheus.CounterValue, float64(srv.Accepted()))
	for reason, n := range srv.Rejected() {
		ch <- prometheus.MustNewConstMetric(pushRejected, prometheus.CounterValue, float64(n), string(reason))
	}
}

// ofCollector exposes the OpenFlow listener's fault counters at scrape time. The reason label
// takes the fixed set ofswitch.Faults, never a datapath id or address.
type ofCollector struct{ b *Board }

var ofFaults = prometheus.NewDesc("flowweight_openflow_faults_total",
	"Messages and connections from OpenFlow peers that were refused, dropped or logged as faults, by reason.", []string{"reason"}, nil)

func (o ofCollector) Describe(ch chan<- *prometheus.Desc) { ch <- ofFaults }

func (o ofCollector) Collect(ch chan<- prometheus.Metric) {
	srv := o.b.of.Load()
	if srv == nil {
		return
	}
	for f, n := range srv.Stats().Faults {
		ch <- prometheus.MustNewConstMetric(ofFaults, prometheus.CounterValue, float64(n), f.String())
	}
}

// haCollector exports the election at scrape time; nothing without HA.
type haCollector struct{ b *Board }

var (
	haLeaderDesc = prometheus.NewDesc("flowweight_ha_leader", "1 while this controller leads (and may write to switches), 0 as a standby.", nil, nil)
	haTermDesc   = prometheus.NewDesc("flowweight_ha_term", "The current leader's term: the generation id in its OpenFlow role requests (0: no leader known).", nil, nil)
	haLeaseDesc  = prometheus.NewDesc("flowweight_ha_lease_remaining_seconds", "On the leader, how long it may still write without a keep-alive answered; 0 on a standby.", nil, nil)
	haInfoDesc   = prometheus.NewDesc("flowweight_ha_info", "1, labelled with this controller's role and the leader's name.", []string{"role", "leader"}, nil)
)

func (c haCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- haLeaderDesc
	ch <- haTermDesc
	ch <- haLeaseDesc
	ch <- haInfoDesc
}

func (c haCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.b.HA()
	if !v.Enabled {
		return
	}
	leader := 0.0
	if v.Role == "leader" {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(haLeaderDesc, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(haTermDesc, prometheus.GaugeValue, float64(v.Term))
	ch <- prometheus.MustNewConstMetric(haLeaseDesc, prometheus.GaugeValue, v.LeaseRemaining)
	ch <- prometheus.MustNewConstMetric(haInfoDesc, prometheus.GaugeValue, 1, v.Role, v.Leader)
}

// connsCollector exports each backend's latest connection count as reported (not smoothed,
// unlike flowweight_backend_connections) and its age: what a drain waits to see reach 0.
// Absent until the backend reports a count.
type connsCollector struct{ b *Board }

var (
	liveConnsDesc = prometheus.NewDesc("flowweight_backend_live_connections",
		"Established connections on the backend's service ports in its latest sample, not smoothed, by source (probe or snmp); absent until reported.",
		[]string{"service", "backend", "source"}, nil)
	liveConnsAgeDesc = prometheus.NewDesc("flowweight_backend_live_connections_age_seconds",
		"Age of flowweight_backend_live_connections: seconds since the backend's latest count.", []string{"service", "backend"}, nil)
)

func (c connsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- liveConnsDesc
	ch <- liveConnsAgeDesc
}

func (c connsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.b.servicesView() {
		for _, be := range s.Backends {
			if be.Connections == nil {
				continue
			}
			ch <- prometheus.MustNewConstMetric(liveConnsDesc, prometheus.GaugeValue, *be.Connections, s.Name, be.Name, be.ConnectionsSource)
			ch <- prometheus.MustNewConstMetric(liveConnsAgeDesc, prometheus.GaugeValue, *be.ConnectionsAge, s.Name, be.Name)
		}
	}
}
