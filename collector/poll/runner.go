package balancer

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"flowweight/collector"
	"flowweight/collector/snmp"
	"flowweight/controller/config"
	"flowweight/internal/health"
)

// snmpSource polls one backend's snmpd and checks its health from the collector (a check of
// the configured type: tcp, http, https or udp), for backends that run no probe.
type snmpSource struct {
	cancel context.CancelFunc
	spec   string // what it was started with; a reload that changes it restarts the source
}

// startSNMP starts a source for every snmp backend that has none (or whose settings changed)
// and stops the sources of backends that are gone.
func (b *Balancer) startSNMP() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return // Run has not started yet; it calls us again
	}
	want := snmpHosts(b.cfg)
	c := b.cfg.Collector
	tm := snmpTiming{interval: c.PollInterval, timeout: c.HealthTimeout, fast: c.HealthFastInterval, rise: c.RiseThreshold}
	for name, src := range b.pollers {
		if be, ok := want[name]; !ok || specOf(be, tm) != src.spec {
			src.cancel()
			delete(b.pollers, name)
		}
	}
	for name, be := range want {
		if _, ok := b.pollers[name]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(b.ctx)
		b.pollers[name] = &snmpSource{cancel: cancel, spec: specOf(be, tm)}
		b.srcWG.Add(1)
		go func() {
			defer b.srcWG.Done()
			b.runSNMP(ctx, be, tm)
		}()
	}
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

func (h snmpHost) target() snmp.Target {
	t := h.SNMPTarget()
	if len(h.ports) > 0 {
		t.ServicePorts = h.ports
	}
	return t
}

// snmpTiming is the part of [collector] an SNMP source runs with.
type snmpTiming struct {
	interval, timeout, fast time.Duration
	rise                    int
}

func specOf(be snmpHost, tm snmpTiming) string {
	t := be.target()
	return fmt.Sprint(t.ServicePorts) + "|" + t.Address + "|" + t.Version + "|" + t.Community + "|" + t.User + "|" + t.AuthPassphrase + "|" + t.PrivPassphrase +
		"|" + be.HealthKey() + "|" + tm.interval.String() + "|" + tm.timeout.String() + "|" + t.Timeout.String() +
		"|" + tm.fast.String() + "|" + strconv.Itoa(tm.rise)
}

// runSNMP polls be and runs its health check on the schedule of a checkPace until ctx ends.
func (b *Balancer) runSNMP(ctx context.Context, be snmpHost, tm snmpTiming) {
	log := b.log.With("backend", be.Name, "source", "snmp")
	poller, err := snmp.NewPoller(be.target())
	if err != nil {
		log.Error("snmp source not started", "err", err)
		return
	}
	defer poller.Close()
	checker, err := be.HealthChecker(tm.timeout)
	if err != nil {
		log.Error("health check not started", "err", err)
		return
	}
	if h := be.EffectiveHealth(); h.TLSSkipVerify {
		log.Warn("health check does not verify the service's certificate (tls_skip_verify = true): anything that answers on the path passes it; set tls_ca instead", "check", h.Type)
	}
	pace := newCheckPace(tm.interval, tm.fast, tm.rise)
	check := func() {
		r := checker.Check(ctx)
		if ctx.Err() != nil {
			return // stopping: a check cut short says nothing about the backend
		}
		pace.checked(r.OK)
		b.pool.CheckResult(be.Name, collector.Health{OK: r.OK, Status: int(r.Status), Latency: r.Latency, Err: r.Err,
			Timeout: !r.OK && r.Status == 0 && health.TimedOut(r.Err)})
	}
	for {
		if pace.step(time.Now()) {
			pctx, cancel := context.WithTimeout(ctx, tm.interval)
			s, err := poller.Poll(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				// An unreachable or refusing agent counts as a failed check.
				b.metrics.snmpErrors.WithLabelValues(be.Name).Inc()
				log.Warn("snmp poll failed", "err", err)
				pace.pollFailed()
				b.pool.CheckResult(be.Name, collector.Health{OK: false, Err: err.Error()})
			} else {
				b.pool.Observe(be.Name, collector.Sample{CPUUtil: s.CPUUtil, HasCPU: s.CPUKnown, MemUtil: s.MemUtil,
					Conns: float64(s.Conns), CPUCount: s.CPUCount, MemBytes: float64(s.MemBytes)})
				check()
			}
		} else {
			check() // the fast pace: the health check alone
		}
		t := time.NewTimer(pace.wait(time.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
