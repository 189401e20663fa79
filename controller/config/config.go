// Package config loads and validates controller.toml. It owns the file's shape and its
// defaults (Default is the one place they are defined) and turns every mistake into an error
// naming the key, so an operator sees all problems in one run.
//
// It must not start anything: the controller binary and the lab wire what it describes.
package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"flowweight/collector/snmp"
	"flowweight/configs"
	"flowweight/weights"
)

// Config is the whole controller.toml.
type Config struct {
	Controller Controller     `toml:"controller"`
	API        API            `toml:"api"`
	Collector  Collector      `toml:"collector"`
	Weighting  weights.Tuning `toml:"weighting"`
	Services   []Service      `toml:"service"`
}

// Controller configures the OpenFlow side.
type Controller struct {
	Listen         string        `toml:"listen"`          // OpenFlow listen address, or "unix:/path"; default ":6653" (the IANA port Open vSwitch uses)
	TLSCert        string        `toml:"tls_cert"`        // optional PEM certificate; with tls_key enables TLS
	TLSKey         string        `toml:"tls_key"`         // optional PEM key, not readable by others
	TLSCA          string        `toml:"tls_ca"`          // optional PEM CA bundle: switches must present a certificate it signed
	TLSNamesDPID   bool          `toml:"tls_names_dpid"`  // with tls_ca: a switch's certificate CN (or a DNS SAN) must be its datapath id in 16 hex digits; default false (the id is bound to the first certificate that claims it)
	UpdatePeriod   time.Duration `toml:"update_period"`   // how often weights are recomputed; default "5s"
	ReadbackPeriod time.Duration `toml:"readback_period"` // how often groups are read back to repair drift; default "30s"
	BarrierTimeout time.Duration `toml:"barrier_timeout"` // wait for a barrier reply; default "5s"
	EchoInterval   time.Duration `toml:"echo_interval"`   // OpenFlow keepalive; default "5s"
	Normal         bool          `toml:"normal"`          // lowest-priority NORMAL flow for non-VIP traffic; default true
}

// API configures the HTTP API, metrics and dashboard.
type API struct {
	Listen    string `toml:"listen"`     // default "127.0.0.1:9090"; "" disables the HTTP server
	TokenFile string `toml:"token_file"` // bearer token for changes; required when listen is not loopback
}

// Collector configures the metric sources and the backend state machine.
type Collector struct {
	PushListen     string        `toml:"push_listen"`     // UDP address for probe reports; default ":7946"
	KeyFile        string        `toml:"key_file"`        // HMAC key shared with probes (a backend may override); required if any backend uses source "probe"
	ClockSkew      time.Duration `toml:"clock_skew"`      // accepted difference between probe and collector clocks; default "30s"
	StaleAfter     time.Duration `toml:"stale_after"`     // no report for this long -> stale (weight 0); default "15s"
	FailThreshold  int           `toml:"fail_threshold"`  // consecutive failed health checks -> down; default 3
	RiseThreshold  int           `toml:"rise_threshold"`  // consecutive good checks to come back (into warm-up); default 2
	PollInterval   time.Duration `toml:"poll_interval"`   // SNMP poll and collector-side health check period; default "5s"
	HealthTimeout  time.Duration `toml:"health_timeout"`  // collector-side HTTP health check timeout; default "2s"
	ThroughputFrom string        `toml:"throughput_from"` // "switch" (per-backend flow counters, default) or "none"
}

// Service is one virtual IP balanced over backends.
type Service struct {
	Name     string         `toml:"name"`     // unique; shows in cookies' meaning, logs and the API
	VIP      string         `toml:"vip"`      // IPv4 address answered by the controller's ARP responder; on no host
	VIPMAC   string         `toml:"vip_mac"`  // optional; default derived from the VIP (locally administered)
	Protocol string         `toml:"protocol"` // "tcp" (default)
	Port     int            `toml:"port"`     // 1-65535
	Mode     string         `toml:"mode"`     // "conntrack" (default, keeps connections across reweights) or "stateless"
	GroupID  int            `toml:"group_id"` // OpenFlow group id, unique, 1..0xffffff00
	Zone     int            `toml:"zone"`     // conntrack zone; default = group_id (must fit 16 bits)
	Policy   weights.Policy `toml:"policy"`   // overrides weighting.policy for this service
	Backends []Backend      `toml:"backend"`
}

// Backend is one real server behind a service.
type Backend struct {
	Name       string   `toml:"name"`        // unique across the file; the probe's backend_id
	IP         string   `toml:"ip"`          // IPv4 address
	Port       int      `toml:"port"`        // service port on the backend; default = the service port
	Source     string   `toml:"source"`      // "probe" (default) or "snmp"
	MAC        string   `toml:"mac"`         // optional; learned by ARP when empty
	SwitchPort int      `toml:"switch_port"` // optional OpenFlow port; learned with the MAC when 0
	Capacity   float64  `toml:"capacity"`    // operator capacity factor; default 1
	KeyFile    string   `toml:"key_file"`    // optional per-backend push key, overrides collector.key_file
	HealthURL  string   `toml:"health_url"`  // for snmp backends: the collector checks this URL
	SNMP       *SNMPSrc `toml:"snmp"`        // for snmp backends
}

// SNMPSrc is how the collector polls a backend's snmpd.
type SNMPSrc struct {
	Address        string        `toml:"address"` // host:port; default ip:161
	Version        string        `toml:"version"` // "v2c" or "v3"
	Community      string        `toml:"community"`
	User           string        `toml:"user"`
	AuthProtocol   string        `toml:"auth_protocol"` // SHA (default), SHA256, SHA512
	AuthPassphrase string        `toml:"auth_passphrase"`
	PrivProtocol   string        `toml:"priv_protocol"` // AES (default)
	PrivPassphrase string        `toml:"priv_passphrase"`
	Timeout        time.Duration `toml:"timeout"` // default "1s"
	Retries        int           `toml:"retries"` // default 1
}

// Default returns a configuration with every default filled in and no services.
func Default() Config {
	return Config{
		Controller: Controller{Listen: ":6653", UpdatePeriod: 5 * time.Second, ReadbackPeriod: 30 * time.Second,
			BarrierTimeout: 5 * time.Second, EchoInterval: 5 * time.Second, Normal: true},
		API: API{Listen: "127.0.0.1:9090"},
		Collector: Collector{PushListen: ":7946", ClockSkew: 30 * time.Second, StaleAfter: 15 * time.Second,
			FailThreshold: 3, RiseThreshold: 2, PollInterval: 5 * time.Second, HealthTimeout: 2 * time.Second,
			ThroughputFrom: "switch"},
		Weighting: weights.DefaultTuning(),
	}
}

// Load reads, decodes strictly, fills defaults and validates path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load without the file system, for tests and reloads.
func Parse(name string, data []byte) (*Config, error) {
	c := Default()
	if err := configs.Decode(name, data, &c); err != nil {
		return nil, err
	}
	c.fill()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: invalid configuration:\n%w", name, err)
	}
	return &c, nil
}

// fill sets per-service and per-backend defaults that depend on other fields.
func (c *Config) fill() {
	for i := range c.Services {
		s := &c.Services[i]
		if s.Protocol == "" {
			s.Protocol = "tcp"
		}
		if s.Mode == "" {
			s.Mode = "conntrack"
		}
		if s.Zone == 0 {
			s.Zone = s.GroupID
		}
		for j := range s.Backends {
			b := &s.Backends[j]
			if b.Port == 0 {
				b.Port = s.Port
			}
			if b.Source == "" {
				b.Source = "probe"
			}
			if b.Capacity == 0 {
				b.Capacity = 1
			}
			if b.SNMP != nil {
				if b.SNMP.Address == "" {
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
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Validate checks every field and returns all problems joined, each naming its key.
func (c *Config) Validate() error {
	var p configs.Problems
	if path, ok := strings.CutPrefix(c.Controller.Listen, "unix:"); ok {
		if !strings.HasPrefix(path, "/") {
			p.Addf("controller.listen", "%q: a unix socket path must be absolute", c.Controller.Listen)
		}
	} else {
		checkAddr(&p, "controller.listen", c.Controller.Listen, false)
	}
	if (c.Controller.TLSCert == "") != (c.Controller.TLSKey == "") {
		p.Addf("controller.tls_cert", "tls_cert and tls_key must be given together")
	}
	if c.Controller.TLSCA != "" && c.Controller.TLSCert == "" {
		p.Addf("controller.tls_ca", "verifying switch certificates needs TLS: set tls_cert and tls_key too")
	}
	if c.Controller.TLSNamesDPID && c.Controller.TLSCA == "" {
		p.Addf("controller.tls_names_dpid", "checking that certificates name the datapath needs switch certificates: set tls_ca too")
	}
	if strings.HasPrefix(c.Controller.Listen, "unix:") && c.Controller.TLSCert != "" {
		p.Addf("controller.tls_cert", "TLS over a unix socket listener (%q) is not supported: Open vSwitch's unix: target is plain", c.Controller.Listen)
	}
	positive(&p, "controller.update_period", c.Controller.UpdatePeriod)
	positive(&p, "controller.readback_period", c.Controller.ReadbackPeriod)
	positive(&p, "controller.barrier_timeout", c.Controller.BarrierTimeout)
	positive(&p, "controller.echo_interval", c.Controller.EchoInterval)
	if c.API.Listen != "" {
		checkAddr(&p, "api.listen", c.API.Listen, false)
		if !loopback(c.API.Listen) && c.API.TokenFile == "" {
			p.Addf("api.token_file", "required when api.listen (%s) is not a loopback address", c.API.Listen)
		}
	}
	checkAddr(&p, "collector.push_listen", c.Collector.PushListen, false)
	positive(&p, "collector.clock_skew", c.Collector.ClockSkew)
	positive(&p, "collector.stale_after", c.Collector.StaleAfter)
	positive(&p, "collector.poll_interval", c.Collector.PollInterval)
	positive(&p, "collector.health_timeout", c.Collector.HealthTimeout)
	if c.Collector.FailThreshold < 1 || c.Collector.FailThreshold > 100 {
		p.Addf("collector.fail_threshold", "%d outside [1,100]", c.Collector.FailThreshold)
	}
	if c.Collector.RiseThreshold < 1 || c.Collector.RiseThreshold > 100 {
		p.Addf("collector.rise_threshold", "%d outside [1,100]", c.Collector.RiseThreshold)
	}
	switch c.Collector.ThroughputFrom {
	case "switch", "none":
	default:
		p.Addf("collector.throughput_from", "%q is not one of switch, none", c.Collector.ThroughputFrom)
	}
	for _, err := range c.Weighting.Validate() {
		p.Add("weighting", err)
	}

	backendNames := map[string]string{}
	serviceNames := map[string]bool{}
	groups := map[int]string{}
	vips := map[string]string{}
	usesProbe := false
	for i := range c.Services {
		s := &c.Services[i]
		key := fmt.Sprintf("service[%d]", i)
		if nameRE.MatchString(s.Name) {
			key = fmt.Sprintf("service %q", s.Name)
		}
		if !nameRE.MatchString(s.Name) {
			p.Addf(key+".name", "%q must be 1-64 characters of A-Z a-z 0-9 . _ -", s.Name)
		} else if serviceNames[s.Name] {
			p.Addf(key+".name", "duplicate service name")
		}
		serviceNames[s.Name] = true
		vip, err := parseIPv4(s.VIP)
		if err != nil {
			p.Addf(key+".vip", "%v", err)
		}
		if s.VIPMAC != "" {
			if _, err := parseMAC(s.VIPMAC); err != nil {
				p.Addf(key+".vip_mac", "%v", err)
			}
		}
		if s.Protocol != "tcp" {
			p.Addf(key+".protocol", "%q: only tcp is supported", s.Protocol)
		}
		checkPort(&p, key+".port", s.Port)
		if err == nil {
			id := fmt.Sprintf("%s/%s/%d", vip, s.Protocol, s.Port)
			if other, dup := vips[id]; dup {
				p.Addf(key+".vip", "%s port %d already used by service %q", vip, s.Port, other)
			}
			vips[id] = s.Name
		}
		switch s.Mode {
		case "conntrack", "stateless":
		default:
			p.Addf(key+".mode", "%q is not one of conntrack, stateless", s.Mode)
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
		if s.Policy != "" {
			p.Add(key+".policy", s.Policy.Validate())
		}
		if len(s.Backends) == 0 {
			p.Addf(key+".backend", "a service needs at least one backend")
		}
		if len(s.Backends) > 1000 {
			p.Addf(key+".backend", "%d backends; at most 1000 per service", len(s.Backends))
		}
		endpoints := map[string]string{}
		for j := range s.Backends {
			b := &s.Backends[j]
			bkey := fmt.Sprintf("%s.backend[%d]", key, j)
			if nameRE.MatchString(b.Name) {
				bkey = fmt.Sprintf("%s.backend %q", key, b.Name)
			}
			if !nameRE.MatchString(b.Name) {
				p.Addf(bkey+".name", "%q must be 1-64 characters of A-Z a-z 0-9 . _ -", b.Name)
			} else if other, dup := backendNames[b.Name]; dup {
				p.Addf(bkey+".name", "duplicate backend name (also in service %q); backend names identify probes", other)
			}
			backendNames[b.Name] = s.Name
			ip, err := parseIPv4(b.IP)
			if err != nil {
				p.Addf(bkey+".ip", "%v", err)
			} else if ip == vip {
				p.Addf(bkey+".ip", "%s is the service's VIP; a VIP bound to a real backend balances nothing", ip)
			}
			checkPort(&p, bkey+".port", b.Port)
			ep := fmt.Sprintf("%s:%d", b.IP, b.Port)
			if other, dup := endpoints[ep]; dup {
				p.Addf(bkey+".ip", "duplicate backend %s (also %q)", ep, other)
			}
			endpoints[ep] = b.Name
			if b.MAC != "" {
				if _, err := parseMAC(b.MAC); err != nil {
					p.Addf(bkey+".mac", "%v", err)
				}
			}
			if b.SwitchPort < 0 || b.SwitchPort > 0xffffff00 {
				p.Addf(bkey+".switch_port", "%d outside [0,4294967040]", b.SwitchPort)
			}
			if !(b.Capacity > 0 && b.Capacity <= 1000) {
				p.Addf(bkey+".capacity", "%v outside (0,1000]", b.Capacity)
			}
			switch b.Source {
			case "probe":
				usesProbe = usesProbe || b.KeyFile == ""
				if b.SNMP != nil {
					p.Addf(bkey+".snmp", "given but source is \"probe\"")
				}
			case "snmp":
				if b.SNMP == nil {
					p.Addf(bkey+".snmp", "source \"snmp\" needs a [snmp] table")
				} else {
					p.Add(bkey+".snmp", b.SNMP.target(uint16(b.Port)).Validate())
				}
				if b.HealthURL == "" {
					p.Addf(bkey+".health_url", "required for source \"snmp\": the collector checks health itself")
				} else if !strings.HasPrefix(b.HealthURL, "http://") && !strings.HasPrefix(b.HealthURL, "https://") {
					p.Addf(bkey+".health_url", "%q is not an http(s) URL", b.HealthURL)
				}
			default:
				p.Addf(bkey+".source", "%q is not one of probe, snmp", b.Source)
			}
		}
	}
	if usesProbe && c.Collector.KeyFile == "" {
		p.Addf("collector.key_file", "required: backends with source \"probe\" and no key_file of their own")
	}
	return p.Err()
}

// Target turns the TOML form into the SNMP poller's.
func (s *SNMPSrc) target(port uint16) snmp.Target {
	return snmp.Target{Address: s.Address, Version: s.Version, Community: s.Community, User: s.User,
		AuthProtocol: s.AuthProtocol, AuthPassphrase: s.AuthPassphrase, PrivProtocol: s.PrivProtocol,
		PrivPassphrase: s.PrivPassphrase, Timeout: s.Timeout, Retries: s.Retries, ServicePorts: []uint16{port}}
}

// SNMPTarget returns the poller target for an snmp backend.
func (b *Backend) SNMPTarget() snmp.Target { return b.SNMP.target(uint16(b.Port)) }

// ParsedVIP returns the VIP; valid only after Validate.
func (s *Service) ParsedVIP() netip.Addr { a, _ := parseIPv4(s.VIP); return a }

// ParsedIP returns the backend address; valid only after Validate.
func (b *Backend) ParsedIP() netip.Addr { a, _ := parseIPv4(b.IP); return a }

// ParsedMAC returns the configured MAC or nil.
func (b *Backend) ParsedMAC() net.HardwareAddr { m, _ := parseMAC(b.MAC); return m }

// ParsedVIPMAC returns the configured VIP MAC or nil.
func (s *Service) ParsedVIPMAC() net.HardwareAddr { m, _ := parseMAC(s.VIPMAC); return m }

// EffectivePolicy is the service's policy or the global one.
func (c *Config) EffectivePolicy(s *Service) weights.Policy {
	if s.Policy != "" {
		return s.Policy
	}
	return c.Weighting.Policy
}

func parseIPv4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 address", s)
	}
	if a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return netip.Addr{}, fmt.Errorf("%s cannot be a host address", a)
	}
	return a, nil
}

func parseMAC(s string) (net.HardwareAddr, error) {
	if s == "" {
		return nil, nil
	}
	m, err := net.ParseMAC(s)
	if err != nil || len(m) != 6 {
		return nil, fmt.Errorf("%q is not an Ethernet MAC address", s)
	}
	if m[0]&1 == 1 {
		return nil, fmt.Errorf("%s is a multicast MAC address", m)
	}
	return m, nil
}

func checkAddr(p *configs.Problems, key, addr string, needHost bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.Addf(key, "%q is not host:port: %v", addr, err)
		return
	}
	if needHost && host == "" {
		p.Addf(key, "%q needs a host", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		p.Addf(key, "port %q outside 0-65535", port)
	}
}

func checkPort(p *configs.Problems, key string, port int) {
	if port < 1 || port > 65535 {
		p.Addf(key, "%d outside 1-65535", port)
	}
}

func positive(p *configs.Problems, key string, d time.Duration) {
	if d <= 0 {
		p.Addf(key, "%v must be a positive duration", d)
	}
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
