package config

import (
	"fmt"
	"net"
	"time"

	"flowweight/configs"
)

// Hosts and services apart.
//
// A [[host]] is one machine: one probe (its backend_id is the host's name), one identity,
// its address, how it is measured (source, snmp, key_file, health_url) and where it sits
// (mac, switch_port). A service lists it with `host = "NAME"` and says only what is the
// service's own: the port on the host (default: the service port) and, optionally, a
// capacity for this service (default: the host's). `backends_from = "SERVICE"` takes another
// service's whole list, each entry on this service's port: a VIP with several ports is
// several [[service]] tables (each its own select group) over one list.
//
// resolveHosts turns both forms into plain service backends carrying the host's fields, so
// everything after it (the balancer, the planner, the key derivation) sees one shape: a
// backend name is a host name, shared by every service the host backs. What it could not
// resolve it records in c.hostProblems, which Validate reports: fill runs before Validate
// and must not lose the keys at fault.

// hostProblem is a problem resolveHosts found, reported by Validate.
type hostProblem struct{ key, msg string }

// resolveHosts fills each host's defaults, then replaces every `host = "..."` reference by
// the host's fields and every backends_from by a copy of the named service's list.
func (c *Config) resolveHosts() {
	c.hostProblems = nil
	bad := func(key, format string, args ...any) {
		c.hostProblems = append(c.hostProblems, hostProblem{key, fmt.Sprintf(format, args...)})
	}
	hosts := map[string]*Backend{}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		fillMachine(h)
		if _, dup := hosts[h.Name]; !dup {
			hosts[h.Name] = h
		}
	}
	for i := range c.Services {
		s := &c.Services[i]
		key := serviceKey(i, s)
		for j := range s.Backends {
			b := &s.Backends[j]
			if b.Host == "" {
				if _, ok := hosts[b.Name]; ok && b.Name != "" {
					bad(fmt.Sprintf("%s.backend %q.name", key, b.Name), "%q is a [[host]]: list it with host = %q and drop the host's fields (ip, source, ...) here", b.Name, b.Name)
				}
				continue
			}
			bkey := fmt.Sprintf("%s.backend[%d]", key, j)
			h, ok := hosts[b.Host]
			if !ok {
				bad(bkey+".host", "no [[host]] named %q (declare it once with name = %q, ip = ..., then reference it)", b.Host, b.Host)
				b.Name, b.ref = b.Host, "host" // the file is refused; no further errors about it
				continue
			}
			bkey = fmt.Sprintf("%s.backend %q", key, b.Host)
			for _, f := range repeatedHostFields(b) {
				bad(bkey+"."+f, "given on a backend that references host %q: it is the host's, set it once in [[host]] name = %q", b.Host, b.Host)
			}
			port, capacity := b.Port, b.Capacity
			*b = *h
			b.Host, b.Port = h.Name, port
			if capacity != 0 {
				b.Capacity = capacity // this service's own capacity for the host
			}
			b.ref = "host"
		}
	}
	byName := map[string]*Service{}
	for i := range c.Services {
		if _, dup := byName[c.Services[i].Name]; !dup {
			byName[c.Services[i].Name] = &c.Services[i]
		}
	}
	for i := range c.Services {
		s := &c.Services[i]
		if s.BackendsFrom == "" {
			continue
		}
		key := serviceKey(i, s) + ".backends_from"
		src, ok := byName[s.BackendsFrom]
		switch {
		case !ok:
			bad(key, "no service named %q", s.BackendsFrom)
		case src.BackendsFrom != "":
			bad(key, "service %q takes its backends from service %q itself; name the service that lists them", s.BackendsFrom, src.BackendsFrom)
		case len(s.Backends) > 0:
			bad(key, "given together with [[service.backend]] entries: use one or the other")
		default:
			s.Backends = make([]Backend, len(src.Backends))
			for j, b := range src.Backends {
				b.Port = 0 // this service's port
				if b.ref == "" {
					b.ref = "backends_from"
				}
				s.Backends[j] = b
			}
		}
	}
}

// repeatedHostFields names the host fields a referencing backend sets (TOML keys).
func repeatedHostFields(b *Backend) []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(b.Name != "", "name")
	add(b.IP != "", "ip")
	add(b.Source != "", "source")
	add(b.MAC != "", "mac")
	add(b.SwitchPort != 0, "switch_port")
	add(b.KeyFile != "", "key_file")
	add(b.HealthURL != "", "health_url")
	add(b.Health != nil, "health")
	add(b.SNMP != nil, "snmp")
	return out
}

// validateHosts reports what resolveHosts recorded and checks the [[host]] tables; it
// returns the probe hosts that need a derived or shared key.
func (c *Config) validateHosts(p *configs.Problems) (needKey []string) {
	for _, hp := range c.hostProblems {
		p.Addf(hp.key, "%s", hp.msg)
	}
	seen := map[string]bool{}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		key := checkName(p, "host", i, h.Name, seen)
		if h.Port != 0 {
			p.Addf(key+".port", "a host has no port of its own: give it on each service's backend (port = %d under host = %q)", h.Port, h.Name)
		}
		if h.Host != "" {
			p.Addf(key+".host", "a host cannot reference another host")
		}
		if !(h.Capacity > 0 && h.Capacity <= 1000) {
			p.Addf(key+".capacity", "%v outside (0,1000]", h.Capacity)
		}
		if c.checkMachine(p, key, h, 0) {
			needKey = append(needKey, h.Name)
		}
	}
	return needKey
}

// checkMachine checks what a backend says about its machine (address, source, keys,
// health) under key; port is the service port for an SNMP target (0 for a host). It reports
// whether the backend is a probe that needs a derived or shared key.
func (c *Config) checkMachine(p *configs.Problems, key string, b *Backend, port int) (needKey bool) {
	if _, err := parseIP(b.IP); err != nil {
		p.Addf(key+".ip", "%v", err)
	}
	if b.MAC != "" {
		if _, err := parseMAC(b.MAC); err != nil {
			p.Addf(key+".mac", "%v", err)
		}
	}
	if b.SwitchPort < 0 || b.SwitchPort > 0xffffff00 {
		p.Addf(key+".switch_port", "%d outside [0,4294967040]", b.SwitchPort)
	}
	switch b.Source {
	case "probe":
		if b.KeyFile != "" && b.KeyFile == c.Collector.SecretFile {
			p.Addf(key+".key_file", "is collector.secret_file: that probe would hold the controller's secret, from which every backend's key is derived; drop the line to use this backend's derived key")
		}
		if b.SNMP != nil {
			p.Addf(key+".snmp", "given but source is \"probe\"")
		}
		return b.KeyFile == ""
	case "snmp":
		if b.SNMP == nil {
			p.Addf(key+".snmp", "source \"snmp\" needs a [snmp] table")
		} else {
			checkSNMPSecretKeys(p, key+".snmp", b.SNMP)
			t := b.SNMP.Target()
			if port != 0 {
				t.ServicePorts = []uint16{uint16(port)}
			}
			if b.SNMP.AuthPassphraseFile != "" && t.AuthPassphrase == "" {
				t.AuthPassphrase = placeholderPassphrase
			}
			if b.SNMP.PrivPassphraseFile != "" && t.PrivPassphrase == "" {
				t.PrivPassphrase = placeholderPassphrase
			}
			p.Add(key+".snmp", t.Validate())
		}

	default:
		p.Addf(key+".source", "%q is not one of probe, snmp", b.Source)
	}
	return false
}

// serviceKey is how errors name service i.
func serviceKey(i int, s *Service) string { return nameKey("service", i, s.Name) }

// nameKey is how errors name the i-th entry of a kind: by its name when it is a valid one,
// else by its index.
func nameKey(kind string, i int, name string) string {
	if nameRE.MatchString(name) {
		return fmt.Sprintf("%s %q", kind, name)
	}
	return fmt.Sprintf("%s[%d]", kind, i)
}

// checkName reports an invalid or repeated name of the i-th entry of a kind (seen: the names
// before it) and returns the key its other errors go under.
func checkName(p *configs.Problems, kind string, i int, name string, seen map[string]bool) string {
	key := nameKey(kind, i, name)
	if !nameRE.MatchString(name) {
		p.Addf(key+".name", "%q must be 1-64 characters of A-Z a-z 0-9 . _ -", name)
	} else if seen[name] {
		p.Addf(key+".name", "duplicate %s name", kind)
	}
	seen[name] = true
	return key
}

// fillMachine sets the defaults of a backend's or host's machine fields.
func fillMachine(b *Backend) {
	if b.Source == "" {
		b.Source = "probe"
	}
	if b.Capacity == 0 {
		b.Capacity = 1
	}
	if b.SNMP != nil {
		if b.SNMP.Address == "" && b.IP != "" {
			b.SNMP.Address = net.JoinHostPort(b.IP, "161")
		}
		if b.SNMP.Timeout == 0 {
			b.SNMP.Timeout = time.Second
		}
		if b.SNMP.Retries == 0 {
			b.SNMP.Retries = 1
		}
		if b.SNMP.Version == "v3" && b.SNMP.AuthProtocol == "" {
			b.SNMP.AuthProtocol = "SHA"
		}
		if b.SNMP.Version == "v3" && b.SNMP.PrivProtocol == "" {
			b.SNMP.PrivProtocol = "AES"
		}
	}
}

// HostPorts returns, per host (backend name), the service ports it serves over TCP across
// every service, in file order without repeats: an SNMP host's connection count is of all
// of them (there is one poller per host, not per service entry).
func (c *Config) HostPorts() map[string][]uint16 {
	out := map[string][]uint16{}
	for _, s := range c.Services {
		if s.Protocol != "tcp" {
			continue
		}
		for _, b := range s.Backends {
			port := uint16(b.Port)
			if !containsPort(out[b.Name], port) {
				out[b.Name] = append(out[b.Name], port)
			}
		}
	}
	return out
}

func containsPort(ps []uint16, p uint16) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// hostWarnings names the hosts no service lists: their probes' reports are refused as
// unknown, which is what a typo in a host reference looks like from the probe's side.
func (c *Config) hostWarnings() []string {
	used := map[string]bool{}
	for _, s := range c.Services {
		for _, b := range s.Backends {
			used[b.Name] = true
		}
	}
	var w []string
	for _, h := range c.Hosts {
		if !used[h.Name] {
			w = append(w, fmt.Sprintf("host %q: declared but no service lists it (host = %q); its probe's reports are refused as unknown", h.Name, h.Name))
		}
	}
	return w
}

// checkSharedEndpoints refuses a backend address, protocol and port in two services unless
// conntrack can tell their replies apart: the switch has one return flow per backend
// endpoint (docs/dataplane.md), which un-NATs in one zone, or in stateless mode rewrites the
// source to one VIP. Two services on one host:port (two VIPs over the same server) therefore
// need conntrack mode and the same zone. Hosts make such files easy to write, so the check
// names both services and the fix.
func (c *Config) checkSharedEndpoints(p *configs.Problems) {
	type user struct {
		service string
		zone    int
		mode    string
	}
	first := map[string]user{}
	for i := range c.Services {
		s := &c.Services[i]
		key := serviceKey(i, s)
		for _, b := range s.Backends {
			ep := fmt.Sprintf("%s %s port %d", b.IP, s.Protocol, b.Port)
			u, seen := first[ep]
			if !seen {
				first[ep] = user{s.Name, s.Zone, s.Mode}
				continue
			}
			if u.service == s.Name {
				continue // the service's own duplicate endpoint is reported there
			}
			if u.mode != "conntrack" || s.Mode != "conntrack" || u.zone != s.Zone {
				p.Addf(fmt.Sprintf("%s.backend %q.port", key, b.Name),
					"%s is also a backend of service %q (there mode %s, zone %d; here mode %s, zone %d): replies from it meet one return flow, so both services need mode \"conntrack\" and the same zone (zone = %d in both), or the host serves them on different ports",
					ep, u.service, u.mode, u.zone, s.Mode, s.Zone, u.zone)
			}
		}
	}
}
