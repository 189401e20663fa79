package balancer

import (
	"context"
	"time"

	"flowweight/collector"
	"flowweight/collector/snmp"
	"flowweight/controller/config"
	probecfg "flowweight/probe/config"
	"flowweight/probe/health"
)

// snmpSource polls one backend's snmpd and checks its HTTP health from the collector, for
// backends that run no probe.
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
	want := map[string]config.Backend{}
	for _, s := range b.cfg.Services {
		for _, be := range s.Backends {
			if be.Source == "snmp" {
				want[be.Name] = be
			}
		}
	}
	interval, timeout := b.cfg.Collector.PollInterval, b.cfg.Collector.HealthTimeout
	for name, src := range b.pollers {
		if be, ok := want[name]; !ok || specOf(be, interval, timeout) != src.spec {
			src.cancel()
			delete(b.pollers, name)
		}
	}
	for name, be := range want {
		if _, ok := b.pollers[name]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(b.ctx)
		b.pollers[name] = &snmpSource{cancel: cancel, spec: specOf(be, interval, timeout)}
		b.srcWG.Add(1)
		go func() {
			defer b.srcWG.Done()
			b.runSNMP(ctx, be, interval, timeout)
		}()
	}
}

func specOf(be config.Backend, interval, timeout time.Duration) string {
	t := be.SNMPTarget()
	return t.Address + "|" + t.Version + "|" + t.Community + "|" + t.User + "|" + t.AuthPassphrase + "|" + t.PrivPassphrase +
		"|" + be.HealthURL + "|" + interval.String() + "|" + timeout.String() + "|" + t.Timeout.String()
}

func (b *Balancer) runSNMP(ctx context.Context, be config.Backend, interval, timeout time.Duration) {
	log := b.log.With("backend", be.Name, "source", "snmp")
	poller, err := snmp.NewPoller(be.SNMPTarget())
	if err != nil {
		log.Error("snmp source not started", "err", err)
		return
	}
	defer poller.Close()
	checker, err := health.New(probecfg.Health{URL: be.HealthURL, Timeout: timeout, ExpectStatus: "200-399"})
	if err != nil {
		log.Error("health check not started", "err", err)
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, interval)
		s, err := poller.Poll(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// An unreachable or refusing agent counts as a failed check.
			b.metrics.snmpErrors.WithLabelValues(be.Name).Inc()
			log.Warn("snmp poll failed", "err", err)
			b.pool.CheckResult(be.Name, collector.Health{OK: false, Err: err.Error()})
		} else {
			b.pool.Observe(be.Name, collector.Sample{CPUUtil: s.CPUUtil, HasCPU: s.CPUKnown, MemUtil: s.MemUtil,
				Conns: float64(s.Conns), CPUCount: s.CPUCount, MemBytes: float64(s.MemBytes)})
			r := checker.Check(ctx)
			b.pool.CheckResult(be.Name, collector.Health{OK: r.OK, Status: int(r.Status), Latency: r.Latency, Err: r.Err})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
