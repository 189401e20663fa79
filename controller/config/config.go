// Package config loads and validates controller.toml. It owns the file's shape and its
// defaults (Default is the one place they are defined) and turns every mistake into an error
// naming the key, so an operator sees all problems in one run.
//
// It must not start anything: the controller binary and the lab wire what it describes.
package config

import (
	"errors"
	"fmt"

	"flowweight/internal/report"
	"math"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"flowweight/collector/snmp"
	"flowweight/configs"
	"flowweight/internal/httphost"
	"flowweight/internal/regfile"
	"flowweight/internal/secretfile"
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
}

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

// MinTokenLen is the shortest API token accepted, in bytes after trimming white space: a
// 16-byte random token cannot be guessed over HTTP. `openssl rand -hex 32` makes a good one.
const MinTokenLen = 16

// maxTokenFile bounds how much of a token file is read; a larger file is the wrong path.
const maxTokenFile = 4096

// Secret is a string that prints as "[redacted]", so a Config logged or dumped with %v never
// shows the token.
type Secret string

func (Secret) String() string   { return "[redacted]" }
func (Secret) GoString() string { return `"[redacted]"` }

// MarshalText keeps encoders (JSON, TOML) from writing the secret.
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// Reveal returns the secret itself, for the one place that compares it.
func (s Secret) Reveal() string { return string(s) }

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
	Name     string         `toml:"name"`     // unique; shows in cookies' meaning, logs and the API
	VIP      string         `toml:"vip"`      // IPv4 or IPv6 address answered by the controller's ARP or ND responder; on no host
	VIPMAC   string         `toml:"vip_mac"`  // optional; default derived from the VIP (locally administered)
	Protocol string         `toml:"protocol"` // "tcp" (default) or "udp"
	Port     int            `toml:"port"`     // 1-65535
	Mode     string         `toml:"mode"`     // "conntrack" (default, keeps connections across reweights) or "stateless"
	GroupID  int            `toml:"group_id"` // OpenFlow group id, unique, 1..0xffffff00
	Zone     int            `toml:"zone"`     // conntrack zone; default = group_id (must fit 16 bits)
	Policy   weights.Policy `toml:"policy"`   // overrides weighting.policy for this service
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
			BarrierTimeout: 5 * time.Second, EchoInterval: 5 * time.Second, Normal: true},
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

// ReadToken reads an API bearer token: the file's content less surrounding white space
// (editors and `echo` add a newline). The file passes the push key's checks (not readable by
// others, not writable by group or others, regular, at most 4 KiB). It refuses a file that
// holds only white space, which once turned authentication off, a token shorter than
// MinTokenLen, and bytes that cannot travel in an Authorization header. Errors name the path.
func ReadToken(path string) (Secret, error) {
	b, err := secretfile.Read(path, maxTokenFile)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return parseToken(path, b)
}

// parseToken is ReadToken's check of the file's content.
func parseToken(path string, b []byte) (Secret, error) {
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s holds no token (empty or only white space)", path)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] >= 0x7f {
			return "", fmt.Errorf("%s: byte %#02x at offset %d; a token is printable ASCII with no spaces (it travels in an Authorization header)", path, tok[i], i)
		}
	}
	if len(tok) < MinTokenLen {
		return "", fmt.Errorf("%s: token is %d bytes, want at least %d (openssl rand -hex 32 makes one)", path, len(tok), MinTokenLen)
	}
	return Secret(tok), nil
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
		if s.Zone == 0 {
			s.Zone = s.GroupID
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

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Validate checks every field and returns all problems joined, each naming its key.
func (c *Config) Validate() error {
	var p configs.Problems
	if path, ok := strings.CutPrefix(c.Controller.Listen, "unix:"); ok {
		if !strings.HasPrefix(path, "/") {
			p.Addf("controller.listen", "%q: a unix socket path must be absolute", c.Controller.Listen)
		}
	} else {
		p.Addr("controller.listen", c.Controller.Listen, configs.Addr{Port0: true})
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
	p.Positive("controller.update_period", c.Controller.UpdatePeriod)
	p.Positive("controller.readback_period", c.Controller.ReadbackPeriod)
	p.Positive("controller.barrier_timeout", c.Controller.BarrierTimeout)
	p.Positive("controller.echo_interval", c.Controller.EchoInterval)
	if c.API.Listen != "" {
		p.Addr("api.listen", c.API.Listen, configs.Addr{Port0: true})
		if !loopback(c.API.Listen) && c.API.TokenFile == "" {
			p.Addf("api.token_file", "required when api.listen (%s) is not a loopback address", c.API.Listen)
		}
	}
	if c.API.AllowUnauthenticatedWrites && c.API.TokenFile != "" {
		p.Addf("api.allow_unauthenticated_writes", "given with api.token_file: writes need the token, so this would be ignored; remove one of them")
	}
	if c.API.AllowUnauthenticatedWrites && c.API.Listen != "" && !loopback(c.API.Listen) {
		p.Addf("api.allow_unauthenticated_writes", "only on a loopback api.listen (%s is not): off loopback the token is required", c.API.Listen)
	}
	for i, h := range c.API.AllowedHosts {
		if _, err := httphost.Parse(h); err != nil {
			p.Addf(fmt.Sprintf("api.allowed_hosts[%d]", i), "%q: %v", h, err)
		}
	}
	p.Duration("api.read_timeout", c.API.ReadTimeout, 100*time.Millisecond, time.Hour)
	p.Duration("api.write_timeout", c.API.WriteTimeout, 100*time.Millisecond, time.Hour)
	p.Duration("api.idle_timeout", c.API.IdleTimeout, 100*time.Millisecond, time.Hour)
	if n := c.API.MaxHeaderBytes; n < 1024 || n > 1<<20 {
		p.Addf("api.max_header_bytes", "%d outside [1024,1048576]", n)
	}
	if n := c.API.MaxBodyBytes; n < 0 || n > 1<<20 {
		p.Addf("api.max_body_bytes", "%d outside [0,1048576]", n)
	}
	if n := c.API.MaxConnections; n < 1 || n > 10000 {
		p.Addf("api.max_connections", "%d outside [1,10000]", n)
	}
	p.Addr("collector.push_listen", c.Collector.PushListen, configs.Addr{Port0: true})
	p.Positive("collector.clock_skew", c.Collector.ClockSkew)
	p.Positive("collector.stale_after", c.Collector.StaleAfter)
	p.Positive("collector.poll_interval", c.Collector.PollInterval)
	p.Positive("collector.health_timeout", c.Collector.HealthTimeout)
	f := c.Collector.HealthFastInterval
	if f != c.Collector.PollInterval { // equal switches the fast pace off, whatever the interval
		p.Duration("collector.health_fast_interval", f, MinHealthFastInterval, math.MaxInt64)
	}
	if f >= MinHealthFastInterval && f > c.Collector.PollInterval && c.Collector.PollInterval > 0 {
		p.Addf("collector.health_fast_interval", "%v is longer than poll_interval %v: it is the faster pace after a failed check", f, c.Collector.PollInterval)
	}
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
	if c.HA != nil {
		c.HA.validate(&p)
	}
	for _, err := range c.Weighting.Validate() {
		p.Add("weighting", err)
	}

	needKey := c.validateHosts(&p) // probe hosts, and below probe backends, without a key_file of their own
	backendNames := map[string]string{}
	serviceNames := map[string]bool{}
	groups := map[int]string{}
	vips := map[string]string{}
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
		vip, err := parseIP(s.VIP)
		if err != nil {
			p.Addf(key+".vip", "%v", err)
		}
		if s.VIPMAC != "" {
			if _, err := parseMAC(s.VIPMAC); err != nil {
				p.Addf(key+".vip_mac", "%v", err)
			}
		}
		if s.Protocol != "tcp" && s.Protocol != "udp" {
			p.Addf(key+".protocol", "%q is not one of tcp, udp", s.Protocol)
		}
		checkPort(&p, key+".port", s.Port)
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
		seen := map[uint64]int{}
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
		}
		if len(s.Backends) == 0 {
			p.Addf(key+".backend", "a service needs at least one backend")
		}
		if len(s.Backends) > 1000 {
			p.Addf(key+".backend", "%d backends; at most 1000 per service", len(s.Backends))
		}
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
				if c.checkMachine(&p, bkey, b, b.Port) {
					needKey = append(needKey, b.Name)
				}
			}
			hkey := bkey
			if b.ref == "host" {
				hkey = fmt.Sprintf("%s (from host %q)", bkey, b.Name)
			}
			validateHealth(&p, hkey, s, b)
			ip, err := parseIP(b.IP)
			if err == nil && vip.IsValid() && ip.Is4() != vip.Is4() {
				p.Addf(hkey+".ip", "%s is not an %s address like the service's vip %s: a service is one address family", ip, family(vip), vip)
			} else if err == nil && ip == vip {
				p.Addf(bkey+".ip", "%s is the service's VIP; a VIP bound to a real backend balances nothing", ip)
			}
			checkPort(&p, bkey+".port", b.Port)
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
	}
	c.checkSharedEndpoints(&p)
	c.Collector.validateKeys(&p, needKey)
	return p.Err()
}

// Target turns the TOML form into the SNMP poller's.
func (s *SNMPSrc) target(port uint16) snmp.Target {
	return snmp.Target{Address: s.Address, Version: s.Version, Community: s.Community, User: s.User,
		AuthProtocol: s.AuthProtocol, AuthPassphrase: s.AuthPassphrase, PrivProtocol: s.PrivProtocol,
		PrivPassphrase: s.PrivPassphrase, Timeout: s.Timeout, Retries: s.Retries, ServicePorts: []uint16{port},
		MaxConnRows: s.MaxConnRows}
}

// SNMPTarget returns the poller target for an snmp backend.
func (b *Backend) SNMPTarget() snmp.Target { return b.SNMP.target(uint16(b.Port)) }

// ParsedDatapaths returns where the service is placed, nil for every switch; valid only
// after Validate.
func (s *Service) ParsedDatapaths() []uint64 {
	if len(s.Datapaths) == 0 {
		return nil
	}
	out := make([]uint64, 0, len(s.Datapaths))
	for _, d := range s.Datapaths {
		if id, err := ParseDatapathID(d); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// ParseDatapathID reads a datapath id as operators copy it: 16 hex digits as ovs-ofctl
// show prints it ("0000a2c4f1e3b64d"), or 0x-prefixed hex of any length up to 16 digits
// ("0x1a"). Bare short hex is refused: "10" could be read as decimal or hex.
func ParseDatapathID(s string) (uint64, error) {
	h, prefixed := strings.CutPrefix(strings.ToLower(s), "0x")
	switch {
	case h == "":
		return 0, fmt.Errorf("%q is not a datapath id (want 16 hex digits or 0x-prefixed hex)", s)
	case len(h) > 16:
		return 0, fmt.Errorf("%q is longer than a datapath id's 16 hex digits", s)
	case !prefixed && len(h) != 16:
		return 0, fmt.Errorf("%q is not a datapath id: write all 16 hex digits as ovs-ofctl shows them, or prefix 0x", s)
	}
	id, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a datapath id (want 16 hex digits or 0x-prefixed hex)", s)
	}
	return id, nil
}

// ParsedVIP returns the VIP; valid only after Validate.
func (s *Service) ParsedVIP() netip.Addr { a, _ := parseIP(s.VIP); return a }

// ParsedIP returns the backend address; valid only after Validate.
func (b *Backend) ParsedIP() netip.Addr { a, _ := parseIP(b.IP); return a }

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

// parseIP accepts an IPv4 or IPv6 host address that can sit behind a switch port. IPv6
// link-local addresses are refused: a VIP must be routable to its clients and a NAT to a
// link-local backend cannot answer a global client, and without a zone one is ambiguous.
// An IPv4-mapped IPv6 address is refused rather than silently read as IPv4.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 address nor an IPv6 address", s)
	}
	if a.Is6() {
		switch {
		case a.Zone() != "":
			return netip.Addr{}, fmt.Errorf("%q has a zone; write the address alone", s)
		case a.Is4In6():
			return netip.Addr{}, fmt.Errorf("%s is an IPv4-mapped IPv6 address; write %s", a, a.Unmap())
		case a.IsUnspecified() || a.IsMulticast():
			return netip.Addr{}, fmt.Errorf("%s cannot be a host address", a)
		case a.IsLinkLocalUnicast():
			return netip.Addr{}, fmt.Errorf("%s is IPv6 link-local; use a global or unique-local (fd00::/8) address", a)
		}
		return a, nil
	}
	if a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return netip.Addr{}, fmt.Errorf("%s cannot be a host address", a)
	}
	return a, nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
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

func checkPort(p *configs.Problems, key string, port int) {
	if port < 1 || port > 65535 {
		p.Addf(key, "%d outside 1-65535", port)
	}
}

// ValidName reports whether s can be a service or backend name; the API checks names in
// paths with it before looking them up.
func ValidName(s string) bool { return nameRE.MatchString(s) }

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

// Push key modes (collector.key_mode).
const (
	KeyModeDerived = "derived" // each probe's key from secret_file and the backend name
	KeyModeShared  = "shared"  // key_file is every probe's key
)

// EffectiveKeyMode is key_mode, or what it defaults to: derived when secret_file is set,
// shared when only key_file is (the configuration before key_mode existed), derived otherwise.
func (c *Collector) EffectiveKeyMode() string {
	switch {
	case c.KeyMode != "":
		return c.KeyMode
	case c.SecretFile == "" && c.KeyFile != "":
		return KeyModeShared
	}
	return KeyModeDerived
}

func (c *Collector) validateKeys(p *configs.Problems, needKey []string) {
	usesProbe := len(needKey) > 0
	switch c.KeyMode {
	case "", KeyModeDerived, KeyModeShared:
	default:
		p.Addf("collector.key_mode", "%q is not one of derived, shared", c.KeyMode)
		return
	}
	switch mode := c.EffectiveKeyMode(); {
	case c.SecretFile != "" && c.KeyFile != "":
		p.Addf("collector.key_file", "set secret_file (a key derived per backend) or key_file (one key shared by every probe), not both")
	case mode == KeyModeShared && c.SecretFile != "":
		p.Addf("collector.secret_file", "given but key_mode is \"shared\": the probes' key is key_file")
	case mode == KeyModeDerived && c.KeyFile != "":
		p.Addf("collector.key_file", "a key shared by every probe, but key_mode is \"derived\": set secret_file instead, or key_mode = \"shared\"")
	case usesProbe && mode == KeyModeDerived && c.SecretFile == "":
		p.Addf("collector.secret_file", "required: probe backend(s) %s have no key_file of their own and get their key derived from it "+
			"(head -c 32 /dev/urandom > FILE; chmod 600 FILE; then `controller key -config THIS BACKEND` for each probe); "+
			"or set key_mode = \"shared\" and collector.key_file", strings.Join(needKey, ", "))
	case usesProbe && mode == KeyModeShared && c.KeyFile == "":
		p.Addf("collector.key_file", "required with key_mode \"shared\": probe backend(s) %s have no key_file of their own", strings.Join(needKey, ", "))
	}
}

// Warnings are configurations that work but weaken the push protocol's authentication; the
// controller logs them at start and -check-config prints them. Each names the key and says how
// to rewrite it. Valid only after Validate.
func (c *Config) Warnings() []string {
	var w []string
	var shared []string
	byFile := map[string][]string{}
	var files []string
	listed := map[string]bool{} // a host backs several services but has one key
	for _, s := range c.Services {
		for _, b := range s.Backends {
			if b.Source != "probe" || listed[b.Name] {
				continue
			}
			listed[b.Name] = true
			if b.KeyFile == "" || (b.KeyFile == c.Collector.KeyFile && c.Collector.EffectiveKeyMode() == KeyModeShared) {
				shared = append(shared, b.Name)
				continue
			}
			if byFile[b.KeyFile] == nil {
				files = append(files, b.KeyFile)
			}
			byFile[b.KeyFile] = append(byFile[b.KeyFile], b.Name)
		}
	}
	if c.Collector.EffectiveKeyMode() == KeyModeShared && len(shared) > 0 {
		how := "key_mode is \"shared\""
		if c.Collector.KeyMode == "" {
			how = "no secret_file, so key_mode defaults to \"shared\""
		}
		w = append(w, fmt.Sprintf("collector.key_file: %s: the %d probe backend(s) %s all use the key in %s, so whoever holds one probe's key can forge reports for every backend "+
			"(and hold back their probes). To give each probe a key of its own: create a secret (head -c 32 /dev/urandom > /etc/flowweight/push.secret; chmod 600 it), "+
			"replace key_file = %q with secret_file = \"/etc/flowweight/push.secret\" in [collector], and install on each backend's probe the output of "+
			"`controller key -config FILE BACKEND -out KEYFILE` as its key_file",
			how, len(shared), strings.Join(shared, ", "), c.Collector.KeyFile, c.Collector.KeyFile))
	}
	for _, f := range files {
		if names := byFile[f]; len(names) > 1 {
			w = append(w, fmt.Sprintf("key_file %s is the key of the backends %s: each can forge reports for the others; give each its own file, or drop their key_file to use keys derived from collector.secret_file",
				f, strings.Join(names, ", ")))
		}
	}
	return append(w, c.hostWarnings()...)
}

// ProbeKey returns the push key of probe backend b: its own key_file, or the key derived from
// collector.secret_file, or collector.key_file in key_mode "shared". load reads a key file
// (report.LoadKey, or a cache of it); errors name the file and the backend.
func (c *Config) ProbeKey(b *Backend, load func(path string) ([]byte, error)) ([]byte, error) {
	if b.KeyFile != "" {
		return load(b.KeyFile)
	}
	if c.Collector.EffectiveKeyMode() == KeyModeShared {
		return load(c.Collector.KeyFile)
	}
	secret, err := load(c.Collector.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("collector.secret_file: %w", err)
	}
	return report.DeriveKey(secret, b.Name)
}
