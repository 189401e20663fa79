// Package config loads and validates controller.toml. It owns the file's shape and its
// defaults (Default is the one place they are defined) and turns every mistake into an error
// naming the key, so an operator sees all problems in one run.
//
// It holds typed values, their defaults and their validation, and must not start or build
// anything: the runtime objects made from them (the collector's health checks, the SNMP
// poller's targets, the probes' push keys) are built by the wiring (controller/balancer,
// build.go), and the controller binary and the lab wire what it describes. Where
// validation has to parse a value to check it (a udp check's hex payload, a tls_ca
// bundle, an [snmp] table as snmp.Target), it keeps the parsed value for the builder.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"flowweight/collector/snmp"
	"flowweight/configs"
	"flowweight/internal/regfile"
	"flowweight/weights"
)

// Config is the whole controller.toml.
type Config struct {
	Controller Controller     `toml:"controller"`
	API        API            `toml:"api"`
	Collector  Collector      `toml:"collector"`
	Weighting  weights.Tuning `toml:"weighting"`
	Services   []Service      `toml:"service"`
	// Hosts are machines that services reference with backend.host (hosts.go): one probe
	// each, however many services they back.
	Hosts []Backend `toml:"host"`
	// HA is nil without an [ha] section: one controller, no etcd.
	HA *HA `toml:"ha"`

	hostProblems []hostProblem // found by resolveHosts, reported by Validate
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
	// ConfigHistory is how many applied configurations are kept next to the state file for
	// `controller history` and `controller rollback`; default 5, [MinConfigHistory,
	// MaxConfigHistory].
	ConfigHistory int `toml:"config_history"`
}

// Bounds of controller.config_history: one is the running configuration alone; a hundred
// files of up to 16 MiB is as much of the state directory as a history should take.
const (
	MinConfigHistory = 1
	MaxConfigHistory = 100
)

// API configures the HTTP API, metrics and dashboard. The limits bound what one client can
// hold: every connection costs a goroutine and buffers until a timeout frees it.
type API struct {
	Listen         string        `toml:"listen"`           // default "127.0.0.1:9090"; "" disables the HTTP server
	TokenFile      string        `toml:"token_file"`       // bearer token for changes (>= MinTokenLen bytes); required when listen is not loopback
	AllowedHosts   []string      `toml:"allowed_hosts"`    // Host names served besides the listen address's IP and localhost: "name" (any port) or "name:port"
	ReadTimeout    time.Duration `toml:"read_timeout"`     // whole request, headers and body; default "10s"
	WriteTimeout   time.Duration `toml:"write_timeout"`    // from the end of the request headers to the end of the answer; default "10s"
	IdleTimeout    time.Duration `toml:"idle_timeout"`     // keep-alive connection with no request; default "30s"
	MaxHeaderBytes int           `toml:"max_header_bytes"` // request line and headers; default 32768
	MaxBodyBytes   int64         `toml:"max_body_bytes"`   // request body; default 4096
	MaxConnections int           `toml:"max_connections"`  // open connections; more are answered 503 and closed; default 64
	// AllowUnauthenticatedWrites lets any local client drain without a token, on a loopback
	// listener without token_file only. Off by default: without a token, writes are refused,
	// since every local user (and every process, whatever its user) can reach loopback.
	AllowUnauthenticatedWrites bool `toml:"allow_unauthenticated_writes"`

	// Token is token_file's content, read and checked by Load (Parse leaves it empty).
	Token Secret `toml:"-"`
}

// MinHealthFastInterval is the shortest collector.health_fast_interval: below it the checks of
// a backend that is down, not the backend, become the load.
const MinHealthFastInterval = 10 * time.Millisecond

// Collector configures the metric sources and the backend state machine.
type Collector struct {
	PushListen     string        `toml:"push_listen"`     // UDP address for probe reports; default ":7946"
	KeyFile        string        `toml:"key_file"`        // one HMAC key shared by every probe without a key_file of its own (key_mode "shared"; warned: any probe's key then speaks for every backend)
	SecretFile     string        `toml:"secret_file"`     // controller secret: each probe's key is derived from it and the backend name (`controller key` prints it); key_mode "derived"
	KeyMode        string        `toml:"key_mode"`        // "derived" (secret_file) or "shared" (key_file); default: derived when secret_file is set, shared when only key_file is
	ClockSkew      time.Duration `toml:"clock_skew"`      // accepted difference between probe and collector clocks; default "30s"
	StaleAfter     time.Duration `toml:"stale_after"`     // no report for this long -> stale (weight 0); default "15s"
	FailThreshold  int           `toml:"fail_threshold"`  // consecutive failed health checks -> down; default 3
	RiseThreshold  int           `toml:"rise_threshold"`  // consecutive good checks to come back (into warm-up); default 2
	PollInterval   time.Duration `toml:"poll_interval"`   // SNMP poll and collector-side health check period; default "5s"
	HealthTimeout  time.Duration `toml:"health_timeout"`  // collector-side health check timeout; default (or "0s") the smaller of "2s" and poll_interval
	ThroughputFrom string        `toml:"throughput_from"` // "switch" (per-backend flow counters, default) or "none"

	// HealthFastInterval is how often the collector re-checks an SNMP backend's health URL
	// (the URL alone; SNMP is still polled every PollInterval) after a failed check, until
	// RiseThreshold checks in a row pass: fail_threshold failures then take
	// (fail_threshold−1) of these rather than of poll intervals (HAProxy's fastinter).
	// [10ms, poll_interval]; equal to poll_interval switches it off. Default (or "0s") the
	// smaller of "250ms" and poll_interval; "250ms" because the
	// first failure is still poll_interval/2 away on average (2.5 s at the default), so a
	// faster pace would win little, while each SNMP backend that is down costs the
	// collector 4 checks a second over the network.
	HealthFastInterval time.Duration `toml:"health_fast_interval"`
}

// MaxAffinityTimeout is the largest affinity_timeout: Open vSwitch's learn action carries its
// timeouts as 16-bit seconds.
const MaxAffinityTimeout = 65535 * time.Second

// Service is one virtual IP balanced over backends.
type Service struct {
	Name     string             `toml:"name"`     // unique; shows in cookies' meaning, logs and the API
	VIP      string             `toml:"vip"`      // IPv4 or IPv6 address answered by the controller's ARP or ND responder; on no host
	VIPMAC   string             `toml:"vip_mac"`  // optional; default derived from the VIP (locally administered)
	Protocol string             `toml:"protocol"` // "tcp" (default) or "udp"
	Port     int                `toml:"port"`     // 1-65535
	Mode     string             `toml:"mode"`     // "conntrack" (default, keeps connections across reweights) or "stateless"
	GroupID  int                `toml:"group_id"` // OpenFlow group id, unique, 1..0xffffff00
	Zone     int                `toml:"zone"`     // conntrack zone; default = group_id (must fit 16 bits)
	Policy   weights.PolicyName `toml:"policy"`   // overrides weighting.policy for this service
	// ShadowPolicy names a second policy computed at every update from the same inputs and
	// shown beside the live weights (API, status, metrics), never applied: a new policy is
	// watched on real traffic before it is trusted (docs/weights.md, "Shadow policy").
	// Empty (default): none. It may not be the service's effective policy.
	ShadowPolicy weights.PolicyName `toml:"shadow_policy"`
	// CanaryDatapaths applies the shadow policy's weights on these switches (datapath ids as
	// in Datapaths), and the live policy's everywhere else: a candidate on a slice of the
	// traffic before the whole fleet (docs/weights.md, "Canary"). It needs shadow_policy, and
	// each switch must be one the service is placed on.
	CanaryDatapaths []string `toml:"canary_datapaths"`
	// Datapaths places the service on these switches only (datapath ids as ovs-ofctl shows
	// them: 16 hex digits, or 0x-prefixed hex); empty places it on every connected switch.
	Datapaths []string  `toml:"datapaths"`
	Backends  []Backend `toml:"backend"`
	// BackendsFrom takes the backend list of the named service, each entry on this
	// service's port: another port of the same VIP without repeating the list (hosts.go).
	BackendsFrom string `toml:"backends_from"`

	// AffinityTimeout turns on client affinity (conntrack mode): a client address keeps its
	// backend while its new connections come less than this apart. 0 (default) is off; whole
	// seconds up to 65535 s, what Open vSwitch's learn action holds.
	AffinityTimeout time.Duration `toml:"affinity_timeout"`

	// Dispatch is who chooses each new connection's backend: "group" (default) the switch,
	// hashing into the select group by the weights; "reactive" the controller, per
	// connection, by weighted least connections over the probes' in-flight counts
	// (docs/dataplane.md, "Reactive dispatch"). Reactive needs mode "conntrack" without
	// affinity, and costs one packet-in and one packet-out per new connection.
	Dispatch string `toml:"dispatch"`

	// UDPHash is how the switch hashes a UDP service's new flows (group dispatch): "per_flow"
	// (default) by the 5-tuple, ports included, so one client address's flows spread over
	// the backends; "per_address" by the addresses only, the select group's own hash, so a
	// client keeps one backend for all its flows and no new flow costs the switch an upcall
	// (docs/dataplane.md, "UDP per flow"). Only for protocol "udp"; affinity and reactive
	// dispatch choose otherwise and take no udp_hash.
	UDPHash string `toml:"udp_hash"`

	// ShareCorrection is whether each switch moves the group's slots so that the measured
	// share of all new connections meets the weights when client affinity pins part of them
	// past the group (a heavy client would otherwise add its whole share to its backend's):
	// "on" (default) or "off" (docs/dataplane.md, "Correcting the measured share"). Only a
	// service with affinity_timeout is corrected; the others are measured only.
	ShareCorrection string `toml:"share_correction"`

	// Parsed once by Validate, read by the accessors (ParsedVIP, ...).
	vip       netip.Addr
	vipMAC    net.HardwareAddr
	datapaths []uint64
	canary    []uint64
}

// Backend is one real server behind a service.
type Backend struct {
	Name       string   `toml:"name"`        // unique across the file; the probe's backend_id (a host's name for a host reference)
	Host       string   `toml:"host"`        // a [[host]] this backend is: its fields come from there (hosts.go)
	IP         string   `toml:"ip"`          // IPv4 or IPv6 address, the family of the service's vip
	Port       int      `toml:"port"`        // service port on the backend; default = the service port
	Source     string   `toml:"source"`      // "probe" (default) or "snmp"
	MAC        string   `toml:"mac"`         // optional; learned by ARP when empty
	SwitchPort int      `toml:"switch_port"` // optional OpenFlow port; learned with the MAC when 0
	Capacity   float64  `toml:"capacity"`    // operator capacity factor; default 1
	KeyFile    string   `toml:"key_file"`    // optional per-backend push key, overrides collector.key_file
	HealthURL  string   `toml:"health_url"`  // for snmp backends: the collector checks this URL (an http(s) [health] with only url)
	SNMP       *SNMPSrc `toml:"snmp"`        // for snmp backends
	// Health is how the collector checks an snmp backend by type (health.go); health_url
	// is the older form of an http(s) check.
	Health *HealthCheck `toml:"health"`

	// Parsed once by Validate, read by ParsedIP and ParsedMAC.
	ip  netip.Addr
	mac net.HardwareAddr

	// ref is how resolveHosts made the entry: "" declared inline, "host" from a [[host]],
	// "backends_from" copied from another service's inline entry.
	ref string
}

// SNMPSrc is how the collector polls a backend's snmpd.
type SNMPSrc struct {
	Address        string `toml:"address"` // host:port; default ip:161
	Version        string `toml:"version"` // "v2c" or "v3"
	Community      string `toml:"community"`
	User           string `toml:"user"`
	AuthProtocol   string `toml:"auth_protocol"` // SHA (default), SHA256, SHA512
	AuthPassphrase string `toml:"auth_passphrase"`
	PrivProtocol   string `toml:"priv_protocol"` // AES (default)
	PrivPassphrase string `toml:"priv_passphrase"`
	// AuthPassphraseFile and PrivPassphraseFile hold the passphrases instead of the lines
	// above (one form per passphrase), in files checked as key files (snmpsecrets.go).
	AuthPassphraseFile string        `toml:"auth_passphrase_file"`
	PrivPassphraseFile string        `toml:"priv_passphrase_file"`
	Timeout            time.Duration `toml:"timeout"` // default "1s"
	Retries            int           `toml:"retries"` // default 1

	// MaxConnRows is how many rows one walk of a TCP connection table may return before the
	// poll fails (a bounded answer, not a silently huge count); default 0 = 100000.
	MaxConnRows int `toml:"max_conn_rows"`

	loaded bool // the passphrase files have been read into the passphrases
}

// Default returns a configuration with every default filled in and no services.
func Default() Config {
	return Config{
		Controller: Controller{Listen: ":6653", UpdatePeriod: 5 * time.Second, ReadbackPeriod: 30 * time.Second,
			BarrierTimeout: 5 * time.Second, EchoInterval: 5 * time.Second, Normal: true, ConfigHistory: 5},
		API: API{Listen: "127.0.0.1:9090", ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
			IdleTimeout: 30 * time.Second, MaxHeaderBytes: 32 << 10, MaxBodyBytes: 4 << 10, MaxConnections: 64},
		Collector: Collector{PushListen: ":7946", ClockSkew: 30 * time.Second, StaleAfter: 15 * time.Second,
			FailThreshold: 3, RiseThreshold: 2, PollInterval: 5 * time.Second, HealthTimeout: 2 * time.Second,
			HealthFastInterval: 250 * time.Millisecond, ThroughputFrom: "switch"},
		Weighting: weights.DefaultTuning(),
	}
}

// Load reads, decodes strictly, fills defaults and validates path.
func Load(path string) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, data, true)
}

// MaxFileSize bounds a configuration file: it is kilobytes, and a path pointed by mistake at
// a huge file must not exhaust memory.
const MaxFileSize = 16 << 20

// ReadFile reads a configuration file: a regular file only, opened without blocking (a FIFO
// at the path is refused, not waited on), at most MaxFileSize bytes. Errors name the path.
func ReadFile(path string) ([]byte, error) {
	data, err := regfile.Read(path, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return data, nil
}

// Parse is Load without the file system, for tests. It does not read api.token_file, so
// API.Token stays empty.
func Parse(name string, data []byte) (*Config, error) { return parse(name, data, false) }

// LoadData is Load of content already read (a reload reads the file once, whole, and
// parses exactly that); the files it names, such as api.token_file, are read.
func LoadData(name string, data []byte) (*Config, error) { return parse(name, data, true) }

func parse(name string, data []byte, readFiles bool) (*Config, error) {
	c := Default()
	// Left out, these two are derived from poll_interval (derived.go).
	c.Collector.HealthTimeout, c.Collector.HealthFastInterval = 0, 0
	if err := configs.Decode(name, data, &c); err != nil {
		return nil, err
	}
	c.Collector.fillCollectorTiming()
	c.fill()
	err := c.Validate()
	if readFiles && err == nil {
		err = c.readHealthFiles()
	}
	if readFiles && err == nil {
		err = c.readSNMPSecrets()
	}
	if readFiles && c.API.TokenFile != "" {
		tok, terr := ReadToken(c.API.TokenFile)
		if terr != nil {
			err = errors.Join(err, fmt.Errorf("api.token_file: %w", terr))
		}
		c.API.Token = tok
	}
	if err != nil {
		return nil, fmt.Errorf("%s: invalid configuration:\n%w", name, err)
	}
	return &c, nil
}

// fill sets per-service and per-backend defaults that depend on other fields.
func (c *Config) fill() {
	if c.HA != nil {
		c.HA.fill()
	}
	c.resolveHosts()
	for i := range c.Services {
		s := &c.Services[i]
		if s.Protocol == "" {
			s.Protocol = "tcp"
		}
		if s.Mode == "" {
			s.Mode = "conntrack"
		}
		if s.Dispatch == "" {
			s.Dispatch = "group"
		}
		if s.UDPHash == "" && s.Protocol == "udp" && s.Dispatch == "group" && s.AffinityTimeout == 0 {
			s.UDPHash = "per_flow"
		}
		if s.Zone == 0 {
			s.Zone = s.GroupID
		}
		if s.ShareCorrection == "" {
			s.ShareCorrection = "on"
		}
		for j := range s.Backends {
			b := &s.Backends[j]
			if b.Port == 0 {
				b.Port = s.Port
			}
			fillMachine(b)
		}
	}
}

// Target is the [snmp] table as the poller's typed value, which Validate checks
// (snmp.Target.Validate), with the passphrases read from their files after Load. It has no
// service ports: which ports a host's connections are counted on is the wiring's choice
// (controller/balancer, build.go).
func (s *SNMPSrc) Target() snmp.Target {
	return snmp.Target{Address: s.Address, Version: s.Version, Community: s.Community, User: s.User,
		AuthProtocol: s.AuthProtocol, AuthPassphrase: s.AuthPassphrase, PrivProtocol: s.PrivProtocol,
		PrivPassphrase: s.PrivPassphrase, Timeout: s.Timeout, Retries: s.Retries, MaxConnRows: s.MaxConnRows}
}

// ParsedDatapaths returns where the service is placed, nil for every switch; valid only
// after Validate.
func (s *Service) ParsedDatapaths() []uint64 { return s.datapaths }

// ParsedCanary returns the switches that hold the shadow policy's weights (canary_datapaths),
// nil for none; valid only after Validate.
func (s *Service) ParsedCanary() []uint64 { return s.canary }

// ParsedVIP returns the VIP; valid only after Validate.
func (s *Service) ParsedVIP() netip.Addr { return s.vip }

// ParsedVIPMAC returns the configured VIP MAC or nil; valid only after Validate.
func (s *Service) ParsedVIPMAC() net.HardwareAddr { return s.vipMAC }

// ParsedIP returns the backend address; valid only after Validate.
func (b *Backend) ParsedIP() netip.Addr { return b.ip }

// ParsedMAC returns the configured MAC or nil; valid only after Validate.
func (b *Backend) ParsedMAC() net.HardwareAddr { return b.mac }

// EffectivePolicy is the service's policy or the global one.
func (c *Config) EffectivePolicy(s *Service) weights.PolicyName {
	if s.Policy != "" {
		return s.Policy
	}
	return c.Weighting.Policy
}
