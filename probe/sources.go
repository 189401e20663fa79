package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"

	"github.com/shirou/gopsutil/v4/mem"

	"flowweight/internal/health"
	"flowweight/probe/agent"
	"flowweight/probe/config"
	"flowweight/probe/sample"
)

// buildSources turns the config into the list of samplers the agent runs, and returns the
// cgroup measured (zero in host scope) for the start-up log.
func buildSources(cfg config.Config) ([]agent.Source, sample.Cgroup, error) {
	var srcs []agent.Source
	var cg sample.Cgroup
	switch cfg.Scope {
	case config.ScopeCgroup:
		var err error
		cg, err = sample.LoadCgroup(cfg.CgroupPath)
		if err != nil {
			return nil, cg, fmt.Errorf("cgroup_path: %w", err)
		}
		ctx := context.Background()
		cpus, err := sample.HostCPUCount(ctx)
		if err != nil {
			return nil, cg, fmt.Errorf("host cpu count: %w", err)
		}
		vm, err := mem.VirtualMemoryWithContext(ctx)
		if err != nil {
			return nil, cg, fmt.Errorf("host memory: %w", err)
		}
		// PSI per cgroup exists only on v2; a v1 cgroup gets the host's pressure.
		psi := &sample.Pressure{File: sample.HostPressureFile, Scope: sample.ScopeHost}
		if cg.Version == 2 {
			psi = &sample.Pressure{File: path.Join(cg.Dir, "cpu.pressure"), Scope: sample.ScopeCgroup}
		}
		srcs = append(srcs,
			agent.Source{Name: "cgroup_cpu", Sampler: &sample.CgroupCPU{Cgroup: cg, HostCPUs: float64(cpus)}},
			agent.Source{Name: "cgroup_mem", Sampler: &sample.CgroupMem{Cgroup: cg, HostMem: vm.Total}},
			agent.Source{Name: "cpu_throttle", Sampler: &sample.CgroupThrottle{Cgroup: cg}},
			agent.Source{Name: "cpu_pressure", Sampler: psi})
	default:
		srcs = append(srcs,
			agent.Source{Name: "host_cpu", Sampler: sample.NewHostCPU()},
			agent.Source{Name: "host_mem", Sampler: sample.NewHostMem()},
			agent.Source{Name: "cpu_pressure", Sampler: &sample.Pressure{File: sample.HostPressureFile, Scope: sample.ScopeHost}})
	}
	if len(cfg.ServicePorts) > 0 {
		conns := sample.NewConns(servicePorts(cfg))
		conns.MaxAge = cfg.ConnsInterval
		srcs = append(srcs, agent.Source{Name: "conns", Sampler: conns})
	}
	if cfg.NIC != "" {
		srcs = append(srcs, agent.Source{Name: "nic", Sampler: &sample.NIC{Name: cfg.NIC, SpeedMbps: cfg.NICSpeedMbps}})
	}
	svc, err := buildService(cfg.Service)
	if err != nil {
		return nil, cg, err
	}
	if svc != nil {
		srcs = append(srcs, agent.Source{Name: "service_cpu", Sampler: svc})
	}
	return srcs, cg, nil
}

// buildService returns the sampler of the service's own CPU, or nil when [service] names no
// processes. A unit or cgroup is resolved against the mounts now, so a probe without a cgroup
// file system says so at start; whether the cgroup exists is checked every interval, since a
// unit may be started after the probe.
func buildService(svc config.Service) (*sample.ServiceCPU, error) {
	switch {
	case svc.PIDFile != "":
		return &sample.ServiceCPU{PIDFile: svc.PIDFile}, nil
	case svc.Unit != "":
		cg, err := sample.LoadCgroup(svc.UnitCgroup())
		if err != nil {
			return nil, fmt.Errorf("service.unit: %w", err)
		}
		return &sample.ServiceCPU{Cgroup: cg}, nil
	case svc.Cgroup != "":
		cg, err := sample.LoadCgroup(svc.Cgroup)
		if err != nil {
			return nil, fmt.Errorf("service.cgroup: %w", err)
		}
		return &sample.ServiceCPU{Cgroup: cg}, nil
	}
	return nil, nil
}

// buildHealth returns the health checker, or nil when no URL is configured.
func buildHealth(cfg config.Config) (*health.Checker, error) {
	if cfg.Health.URL == "" {
		return nil, nil
	}
	h := cfg.Health
	return health.New(health.Spec{URL: h.URL, Timeout: h.Timeout, ExpectStatus: h.ExpectStatus, BodyContains: h.BodyContains})
}

func randFloat() float64 { return rand.Float64() }

// servicePorts is the configured service ports as a set.
func servicePorts(cfg config.Config) *sample.PortSet {
	ports := make([]uint16, len(cfg.ServicePorts))
	for i, p := range cfg.ServicePorts {
		ports[i] = uint16(p) // validated to 1-65535
	}
	return sample.NewPortSet(ports...)
}

// recountConns counts the service ports' ESTABLISHED connections exactly, for a report whose
// health check timed out (agent.Agent.Recount); nil without service ports.
func recountConns(cfg config.Config) sample.Sampler {
	if len(cfg.ServicePorts) == 0 {
		return nil
	}
	return sample.NewConns(servicePorts(cfg))
}

// inFlightCounter counts the service ports' connections at every call (the full reports'
// counter may reuse a count for conns_interval): for in-flight reports, and for a report whose
// health check timed out. It is exact, or (in_flight_count "calibrated") the namespace's
// running count corrected by an exact count every second (sample.InFlight). Nil when there
// are no service ports to count.
func inFlightCounter(cfg config.Config) sample.Sampler {
	if len(cfg.ServicePorts) == 0 {
		return nil
	}
	if cfg.InFlightCount == config.InFlightExact {
		return sample.NewConns(servicePorts(cfg))
	}
	return &sample.InFlight{Exact: sample.NewInFlightConns(servicePorts(cfg))}
}
