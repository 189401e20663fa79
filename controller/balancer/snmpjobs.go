package balancer

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"flowweight/collector/poll"
	"flowweight/collector/snmp"
	"flowweight/controller/config"
	"flowweight/internal/health"
)

// snmpJobs is what the collector polls itself (collector/poll): one job per snmp host, with
// its health check of the configured type (tcp, http, https or udp). The Runner restarts a
// job whose Spec changed at a reload.
func snmpJobs(cfg *config.Config) []poll.Job {
	c := cfg.Collector
	tm := snmpTiming{interval: c.PollInterval, timeout: c.HealthTimeout, fast: c.HealthFastInterval, rise: c.RiseThreshold}
	hosts := snmpHosts(cfg)
	jobs := make([]poll.Job, 0, len(hosts))
	for _, h := range hosts {
		jobs = append(jobs, h.job(tm))
	}
	return jobs
}

// snmpHosts is one SNMP source per snmp host, however many services it backs: its
// connection count is over the TCP ports of all of them.
func snmpHosts(cfg *config.Config) map[string]snmpHost {
	want := map[string]snmpHost{}
	ports := cfg.HostPorts()
	for _, s := range cfg.Services {
		for _, be := range s.Backends {
			if _, ok := want[be.Name]; !ok && be.Source == "snmp" {
				want[be.Name] = snmpHost{Backend: be, ports: ports[be.Name]}
			}
		}
	}
	return want
}

// snmpHost is an snmp backend and the service ports its connections are counted on.
type snmpHost struct {
	config.Backend
	ports []uint16
}

func (h snmpHost) target() snmp.Target { return snmpTarget(&h.Backend, h.ports) }

// snmpTiming is the part of [collector] an SNMP source runs with.
type snmpTiming struct {
	interval, timeout, fast time.Duration
	rise                    int
}

func (h snmpHost) job(tm snmpTiming) poll.Job {
	be := h.Backend
	return poll.Job{Name: h.Name, Target: h.target(), Interval: tm.interval, Fast: tm.fast, Rise: tm.rise, Spec: specOf(h, tm),
		Check: func(log *slog.Logger) (health.Prober, error) {
			p, err := healthProber(&be, tm.timeout)
			if err == nil {
				if hc := be.EffectiveHealth(); hc.TLSSkipVerify {
					log.Warn("health check does not verify the service's certificate (tls_skip_verify = true): anything that answers on the path passes it; set tls_ca instead", "check", hc.Type)
				}
			}
			return p, err
		}}
}

func specOf(be snmpHost, tm snmpTiming) string {
	t := be.target()
	return fmt.Sprint(t.ServicePorts) + "|" + t.Address + "|" + t.Version + "|" + t.Community + "|" + t.User + "|" + t.AuthPassphrase + "|" + t.PrivPassphrase +
		"|" + be.HealthKey() + "|" + tm.interval.String() + "|" + tm.timeout.String() + "|" + t.Timeout.String() +
		"|" + tm.fast.String() + "|" + strconv.Itoa(tm.rise)
}
