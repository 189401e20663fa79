package balancer

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"flowweight/collector/snmp"
	"flowweight/controller/config"
	"flowweight/internal/health"
	"flowweight/internal/report"
)

// The builders of runtime objects from the configuration's typed values: controller/config
// decodes and validates, and the wiring makes what runs from it (issue 23, "parse once").

// healthProber builds the collector's check of snmp backend be, each check bounded by
// timeout (collector.health_timeout), from the check Validate accepted (its payloads already
// parsed, tls_ca's certificates read by Load).
func healthProber(be *config.Backend, timeout time.Duration) (health.Prober, error) {
	h := be.EffectiveHealth()
	if h == nil {
		return nil, errors.New("no health check: neither [health] nor health_url")
	}
	port := be.Port
	if h.Port != 0 {
		port = h.Port
	}
	addr := net.JoinHostPort(be.IP, strconv.Itoa(port))
	switch h.Type {
	case config.HealthTCP:
		return health.NewTCP(health.TCPSpec{Addr: addr, Timeout: timeout})
	case config.HealthUDP:
		send, expect := h.Payloads()
		return health.NewUDP(health.UDPSpec{Addr: addr, Timeout: timeout, Send: send, Expect: expect})
	case config.HealthHTTP, config.HealthHTTPS:
		spec := health.Spec{URL: h.URL, Timeout: timeout, ExpectStatus: h.ExpectStatus, BodyContains: h.BodyContains,
			TLSSkipVerify: h.TLSSkipVerify, ServerName: h.ServerName}
		if spec.URL == "" {
			spec.URL = h.Type + "://" + addr + "/"
		}
		if spec.ExpectStatus == "" {
			spec.ExpectStatus = "200-399"
		}
		pool, err := h.RootCAs()
		if err != nil {
			return nil, fmt.Errorf("health.tls_ca: %w", err)
		}
		spec.RootCAs = pool
		return health.New(spec)
	}
	return nil, fmt.Errorf("health.type %q is not one of tcp, http, https, udp", h.Type)
}

// snmpTarget is what the collector polls for snmp backend be: its [snmp] table, its
// connections counted on ports (the TCP ports of every service the host backs), or on the
// backend's own service port when ports is empty.
func snmpTarget(be *config.Backend, ports []uint16) snmp.Target {
	t := be.SNMP.Target()
	t.ServicePorts = ports
	if len(ports) == 0 {
		t.ServicePorts = []uint16{uint16(be.Port)}
	}
	return t
}

// ProbeKey returns the push key of probe backend be: its own key_file, or the key derived
// from collector.secret_file, or collector.key_file in key_mode "shared". load reads a key
// file (report.LoadKey, or a cache of it); errors name the file and the backend. The
// controller binary uses it too (`controller key`, -check-config).
func ProbeKey(cfg *config.Config, be *config.Backend, load func(path string) ([]byte, error)) ([]byte, error) {
	// Each error names the key that names the file, as a validation error does.
	if be.KeyFile != "" {
		k, err := load(be.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("key_file: %w", err)
		}
		return k, nil
	}
	if cfg.Collector.EffectiveKeyMode() == config.KeyModeShared {
		k, err := load(cfg.Collector.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("collector.key_file: %w", err)
		}
		return k, nil
	}
	secret, err := load(cfg.Collector.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("collector.secret_file: %w", err)
	}
	return report.DeriveKey(secret, be.Name)
}
