package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/shirou/gopsutil/v4/mem"

	"flowweight/probe/agent"
	"flowweight/probe/config"
	"flowweight/probe/health"
	"flowweight/probe/sample"
)

// buildSources turns the config into the list of samplers the agent runs.
func buildSources(cfg config.Config) ([]agent.Source, error) {
	var srcs []agent.Source
	switch cfg.Scope {
	case config.ScopeCgroup:
		cg, err := sample.LoadCgroup(cfg.CgroupPath)
		if err != nil {
			return nil, fmt.Errorf("cgroup_path: %w", err)
		}
		ctx := context.Background()
		cpus, err := sample.HostCPUCount(ctx)
		if err != nil {
			return nil, fmt.Errorf("host cpu count: %w", err)
		}
		vm, err := mem.VirtualMemoryWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("host memory: %w", err)
		}
		srcs = append(srcs,
			agent.Source{Name: "cgroup_cpu", Sampler: &sample.CgroupCPU{Cgroup: cg, HostCPUs: float64(cpus)}},
			agent.Source{Name: "cgroup_mem", Sampler: &sample.CgroupMem{Cgroup: cg, HostMem: vm.Total}})
	default:
		srcs = append(srcs,
			agent.Source{Name: "host_cpu", Sampler: sample.NewHostCPU()},
			agent.Source{Name: "host_mem", Sampler: sample.NewHostMem()})
	}
	if len(cfg.ServicePorts) > 0 {
		ports := make([]uint16, len(cfg.ServicePorts))
		for i, p := range cfg.ServicePorts {
			ports[i] = uint16(p) // validated to 1-65535
		}
		srcs = append(srcs, agent.Source{Name: "conns", Sampler: &sample.Conns{Ports: sample.NewPortSet(ports...)}})
	}
	if cfg.NIC != "" {
		srcs = append(srcs, agent.Source{Name: "nic", Sampler: &sample.NIC{Name: cfg.NIC, SpeedMbps: cfg.NICSpeedMbps}})
	}
	return srcs, nil
}

// buildHealth returns the health checker, or nil when no URL is configured.
func buildHealth(cfg config.Config) (*health.Checker, error) {
	if cfg.Health.URL == "" {
		return nil, nil
	}
	return health.New(cfg.Health)
}

func randFloat() float64 { return rand.Float64() }
