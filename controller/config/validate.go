package config

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"flowweight/configs"
	"flowweight/internal/httphost"
)

// Validate checks every field and returns all problems joined, each naming its key. Each
// section checks itself; what spans sections (keys needed by probe backends, endpoints
// shared between services) is checked here. It also keeps the values it parsed (addresses,
// MACs, datapath ids), so the accessors such as Service.ParsedVIP never parse again: a
// Config is valid, and fully parsed, once Validate returns nil.
func (c *Config) Validate() error {
	var p configs.Problems
	c.Controller.validate(&p)
	c.API.validate(&p)
	c.Collector.validate(&p)
	if c.HA != nil {
		c.HA.validate(&p)
	}
	for _, err := range c.Weighting.Validate() {
		p.Add("weighting", err)
	}
	needKey := c.validateHosts(&p) // probe hosts, and below probe backends, without a key_file of their own
	needKey = append(needKey, c.validateServices(&p)...)
	c.checkSharedEndpoints(&p)
	c.Collector.validateKeys(&p, needKey)
	return p.Err()
}

func (c *Controller) validate(p *configs.Problems) {
	if path, ok := strings.CutPrefix(c.Listen, "unix:"); ok {
		if !strings.HasPrefix(path, "/") {
			p.Addf("controller.listen", "%q: a unix socket path must be absolute", c.Listen)
		}
	} else {
		p.Addr("controller.listen", c.Listen, configs.Addr{Port0: true})
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		p.Addf("controller.tls_cert", "tls_cert and tls_key must be given together")
	}
	if c.TLSCA != "" && c.TLSCert == "" {
		p.Addf("controller.tls_ca", "verifying switch certificates needs TLS: set tls_cert and tls_key too")
	}
	if c.TLSNamesDPID && c.TLSCA == "" {
		p.Addf("controller.tls_names_dpid", "checking that certificates name the datapath needs switch certificates: set tls_ca too")
	}
	if strings.HasPrefix(c.Listen, "unix:") && c.TLSCert != "" {
		p.Addf("controller.tls_cert", "TLS over a unix socket listener (%q) is not supported: Open vSwitch's unix: target is plain", c.Listen)
	}
	p.Positive("controller.update_period", c.UpdatePeriod)
	p.Positive("controller.readback_period", c.ReadbackPeriod)
	p.Positive("controller.barrier_timeout", c.BarrierTimeout)
	p.Positive("controller.echo_interval", c.EchoInterval)
	if c.ConfigHistory < MinConfigHistory || c.ConfigHistory > MaxConfigHistory {
		p.Addf("controller.config_history", "%d: keep between %d and %d versions", c.ConfigHistory, MinConfigHistory, MaxConfigHistory)
	}
}

func (a *API) validate(p *configs.Problems) {
	if a.Listen != "" {
		p.Addr("api.listen", a.Listen, configs.Addr{Port0: true})
		if !loopback(a.Listen) && a.TokenFile == "" {
			p.Addf("api.token_file", "required when api.listen (%s) is not a loopback address", a.Listen)
		}
	}
	if a.AllowUnauthenticatedWrites && a.TokenFile != "" {
		p.Addf("api.allow_unauthenticated_writes", "given with api.token_file: writes need the token, so this would be ignored; remove one of them")
	}
	if a.AllowUnauthenticatedWrites && a.Listen != "" && !loopback(a.Listen) {
		p.Addf("api.allow_unauthenticated_writes", "only on a loopback api.listen (%s is not): off loopback the token is required", a.Listen)
	}
	for i, h := range a.AllowedHosts {
		if _, err := httphost.Parse(h); err != nil {
			p.Addf(fmt.Sprintf("api.allowed_hosts[%d]", i), "%q: %v", h, err)
		}
	}
	p.Duration("api.read_timeout", a.ReadTimeout, 100*time.Millisecond, time.Hour)
	p.Duration("api.write_timeout", a.WriteTimeout, 100*time.Millisecond, time.Hour)
	p.Duration("api.idle_timeout", a.IdleTimeout, 100*time.Millisecond, time.Hour)
	if n := a.MaxHeaderBytes; n < 1024 || n > 1<<20 {
		p.Addf("api.max_header_bytes", "%d outside [1024,1048576]", n)
	}
	if n := a.MaxBodyBytes; n < 0 || n > 1<<20 {
		p.Addf("api.max_body_bytes", "%d outside [0,1048576]", n)
	}
	if n := a.MaxConnections; n < 1 || n > 10000 {
		p.Addf("api.max_connections", "%d outside [1,10000]", n)
	}
}

func (c *Collector) validate(p *configs.Problems) {
	p.Addr("collector.push_listen", c.PushListen, configs.Addr{Port0: true})
	p.Positive("collector.clock_skew", c.ClockSkew)
	p.Positive("collector.stale_after", c.StaleAfter)
	p.Positive("collector.poll_interval", c.PollInterval)
	p.Positive("collector.health_timeout", c.HealthTimeout)
	f := c.HealthFastInterval
	if f != c.PollInterval { // equal switches the fast pace off, whatever the interval
		p.Duration("collector.health_fast_interval", f, MinHealthFastInterval, math.MaxInt64)
	}
	if f >= MinHealthFastInterval && f > c.PollInterval && c.PollInterval > 0 {
		p.Addf("collector.health_fast_interval", "%v is longer than poll_interval %v: it is the faster pace after a failed check", f, c.PollInterval)
	}
	if c.FailThreshold < 1 || c.FailThreshold > 100 {
		p.Addf("collector.fail_threshold", "%d outside [1,100]", c.FailThreshold)
	}
	if c.RiseThreshold < 1 || c.RiseThreshold > 100 {
		p.Addf("collector.rise_threshold", "%d outside [1,100]", c.RiseThreshold)
	}
	switch c.ThroughputFrom {
	case "switch", "none":
	default:
		p.Addf("collector.throughput_from", "%q is not one of switch, none", c.ThroughputFrom)
	}
}

// validateServices checks the services and their inline backends, keeps what it parsed, and
// returns the inline probe backends that have no key_file of their own.
func (c *Config) validateServices(p *configs.Problems) (needKey []string) {
	backendNames := map[string]string{}
	serviceNames := map[string]bool{}
	groups := map[int]string{}
	vips := map[string]string{}
	for i := range c.Services {
		s := &c.Services[i]
		key := checkName(p, "service", i, s.Name, serviceNames)
		vip, err := parseIP(s.VIP)
		if err != nil {
			p.Addf(key+".vip", "%v", err)
		}
		s.vip = vip
		vipMAC, merr := parseMAC(s.VIPMAC)
		if merr != nil {
			p.Addf(key+".vip_mac", "%v", merr)
		}
		s.vipMAC = vipMAC
		if s.Protocol != "tcp" && s.Protocol != "udp" {
			p.Addf(key+".protocol", "%q is not one of tcp, udp", s.Protocol)
		}
		checkPort(p, key+".port", s.Port)
		if err == nil {
			id := fmt.Sprintf("%s/%s/%d", vip, s.Protocol, s.Port)
			if other, dup := vips[id]; dup {
				p.Addf(key+".port", "%s %s port %d is also service %q's: each VIP, protocol and port is one service", vip, s.Protocol, s.Port, other)
			}
			vips[id] = s.Name
		}
		switch s.Mode {
		case "conntrack", "stateless":
		default:
			p.Addf(key+".mode", "%q is not one of conntrack, stateless", s.Mode)
		}
		switch {
		case s.Dispatch != "group" && s.Dispatch != "reactive":
			p.Addf(key+".dispatch", "%q is not one of group, reactive", s.Dispatch)
		case s.Dispatch == "reactive" && s.Mode == "stateless":
			p.Addf(key+".dispatch", "\"reactive\" needs mode \"conntrack\": the switch's connection tracking carries each connection the controller placed")
		case s.Dispatch == "reactive" && s.AffinityTimeout != 0:
			p.Addf(key+".dispatch", "\"reactive\" cannot be combined with affinity_timeout (the controller chooses every connection; affinity would have the switch choose)")
		}
		switch {
		case s.UDPHash == "":
		case s.UDPHash != "per_flow" && s.UDPHash != "per_address":
			p.Addf(key+".udp_hash", "%q is not one of per_flow, per_address", s.UDPHash)
		case s.Protocol != "udp":
			p.Addf(key+".udp_hash", "only a udp service is hashed per flow or per address (protocol is %q)", s.Protocol)
		case s.Dispatch == "reactive":
			p.Addf(key+".udp_hash", "reactive dispatch chooses every flow itself: it takes no udp_hash")
		case s.AffinityTimeout != 0:
			p.Addf(key+".udp_hash", "affinity_timeout keeps a client address on one backend: it takes no udp_hash")
		}
		if s.ShareCorrection != "on" && s.ShareCorrection != "off" {
			p.Addf(key+".share_correction", "%q is not one of on, off", s.ShareCorrection)
		}
		if s.GroupID < 1 || s.GroupID > 0xffffff00 {
			p.Addf(key+".group_id", "%d outside [1,4294967040]", s.GroupID)
		} else if other, dup := groups[s.GroupID]; dup {
			p.Addf(key+".group_id", "%d already used by service %q", s.GroupID, other)
		}
		groups[s.GroupID] = s.Name
		if s.Zone < 1 || s.Zone > 65535 {
			p.Addf(key+".zone", "%d outside [1,65535] (set zone explicitly when group_id exceeds 16 bits)", s.Zone)
		}
		if a := s.AffinityTimeout; a != 0 {
			switch {
			case a < 0:
				p.Addf(key+".affinity_timeout", "%v is negative (0 turns affinity off)", a)
			case a%time.Second != 0:
				p.Addf(key+".affinity_timeout", "%v is not a whole number of seconds (Open vSwitch's learned-flow timeouts are)", a)
			case a > MaxAffinityTimeout:
				p.Addf(key+".affinity_timeout", "%v above %v (65535 s, the largest timeout an Open vSwitch learn action holds)", a, MaxAffinityTimeout)
			case s.Mode == "stateless":
				p.Addf(key+".affinity_timeout", "needs mode \"conntrack\": stateless mode has no connection tracking to pin a client's backend with")
			}
		}
		if s.Policy != "" {
			p.Add(key+".policy", s.Policy.Validate())
		}
		c.validateShadow(p, key, s)
		seen := map[uint64]int{}
		s.datapaths = nil
		for j, d := range s.Datapaths {
			id, err := ParseDatapathID(d)
			if err != nil {
				p.Addf(fmt.Sprintf("%s.datapaths[%d]", key, j), "%v", err)
				continue
			}
			if k, dup := seen[id]; dup {
				p.Addf(fmt.Sprintf("%s.datapaths[%d]", key, j), "%q is datapaths[%d] again", d, k)
			}
			seen[id] = j
			s.datapaths = append(s.datapaths, id)
		}
		c.validateCanary(p, key, s)
		if len(s.Backends) == 0 {
			p.Addf(key+".backend", "a service needs at least one backend")
		}
		if len(s.Backends) > 1000 {
			p.Addf(key+".backend", "%d backends; at most 1000 per service", len(s.Backends))
		}
		needKey = append(needKey, c.validateBackends(p, key, s, backendNames)...)
	}
	return needKey
}

// validateBackends checks one service's backends, keeps what it parsed, and returns its inline
// probe backends without a key_file of their own. backendNames, across services, is where each
// inline backend name was declared first.
func (c *Config) validateBackends(p *configs.Problems, key string, s *Service, backendNames map[string]string) (needKey []string) {
	vip := s.vip
	endpoints := map[string]string{}
	hostAt := map[string]int{}
	for j := range s.Backends {
		b := &s.Backends[j]
		bkey := fmt.Sprintf("%s.backend[%d]", key, j)
		if nameRE.MatchString(b.Name) {
			bkey = fmt.Sprintf("%s.backend %q", key, b.Name)
		}
		if k, dup := hostAt[b.Name]; dup && b.ref != "" {
			p.Addf(bkey, "%q is backend[%d] of this service too: a host is listed once per service (a second port on it is a second service)", b.Name, k)
		}
		hostAt[b.Name] = j
		if b.ref == "" {
			if !nameRE.MatchString(b.Name) {
				p.Addf(bkey+".name", "%q must be 1-64 characters of A-Z a-z 0-9 . _ -", b.Name)
			} else if other, dup := backendNames[b.Name]; dup && other == s.Name {
				p.Addf(bkey+".name", "duplicate backend name (also in this service)")
			} else if dup {
				p.Addf(bkey+".name", "duplicate backend name (also in service %q); a backend name is one probe's backend_id, so a machine that backs several services is declared once, "+
					"as [[host]] with name = %q, ip = %q and its other fields (source, capacity, key_file, ...), and each service lists it as [[service.backend]] host = %q "+
					"(with port = ... where it differs from the service's port); `controller -check-config` checks the result", other, b.Name, b.IP, b.Name)
			}
			backendNames[b.Name] = s.Name
			if c.checkMachine(p, bkey, b, b.Port) {
				needKey = append(needKey, b.Name)
			}
		}
		hkey := bkey
		if b.ref == "host" {
			hkey = fmt.Sprintf("%s (from host %q)", bkey, b.Name)
		}
		validateHealth(p, hkey, s, b)
		ip, err := parseIP(b.IP)
		b.ip = ip
		b.mac, _ = parseMAC(b.MAC) // reported by checkMachine, for the backend or its host
		if err == nil && vip.IsValid() && ip.Is4() != vip.Is4() {
			p.Addf(hkey+".ip", "%s is not an %s address like the service's vip %s: a service is one address family", ip, family(vip), vip)
		} else if err == nil && ip == vip {
			p.Addf(bkey+".ip", "%s is the service's VIP; a VIP bound to a real backend balances nothing", ip)
		}
		checkPort(p, bkey+".port", b.Port)
		ep := fmt.Sprintf("%s:%d", b.IP, b.Port)
		if ip.IsValid() {
			ep = netip.AddrPortFrom(ip, uint16(b.Port)).String() // canonical, so fd00::01 and fd00::1 collide
		}
		if other, dup := endpoints[ep]; dup {
			p.Addf(bkey+".ip", "duplicate backend %s (also %q)", ep, other)
		}
		endpoints[ep] = b.Name
		if !(b.Capacity > 0 && b.Capacity <= 1000) {
			p.Addf(bkey+".capacity", "%v outside (0,1000]", b.Capacity)
		}
	}
	return needKey
}
