package config

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"flowweight/configs"
	"flowweight/internal/health"
	"flowweight/internal/report"
)

// DefaultPath is where the probe looks for its configuration when -config is not given.
const DefaultPath = "/etc/flowweight/probe.toml"

// Scopes: what the probe measures.
const (
	// ScopeHost measures the whole machine (gopsutil over /proc).
	ScopeHost = "host"
	// ScopeCgroup measures one cgroup (a container or a systemd service), taking CPU capacity
	// from its quota; use it whenever the backend shares the machine with other work.
	ScopeCgroup = "cgroup"
)

// The ways in-flight reports count (in_flight_count).
const (
	InFlightCalibrated = "calibrated"
	InFlightExact      = "exact"
)

// Bounds used by Validate. They are wide on purpose: they catch unit mistakes (an integer
// interval is read as nanoseconds) rather than encode taste.
const (
	MinInterval = 100 * time.Millisecond
	// MinInFlightInterval is the shortest in_flight_interval: each report costs a walk of the
	// kernel's TCP hash.
	MinInFlightInterval = 10 * time.Millisecond
	MaxInterval         = time.Hour
	MinTimeout          = 10 * time.Millisecond
	// MinFastInterval is the shortest health.fast_interval: below it a failing service is
	// checked so often that the checks, not the service, become the load.
	MinFastInterval = 10 * time.Millisecond
	// MaxFastRise bounds health.fast_rise as the collector bounds rise_threshold.
	MaxFastRise     = 100
	MaxJitter       = 0.5
	MaxBackendIDLen = report.MaxIDLen
	// MaxCollectors bounds collectors: each is one more datagram per report.
	MaxCollectors = 8
	// MaxCheckers bounds agent_check.checkers: a list is checked per connection.
	MaxCheckers = 64
)

// idChars are the characters the push protocol allows in a backend id.
const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

// Config is the probe's configuration file. Each field's comment gives its unit and default;
// Defaults returns the defaults in one place.
type Config struct {
	// BackendID names this backend to the collector; it must match the id in the
	// collector's backend list. Default: the host name. 1-64 bytes of [A-Za-z0-9._-].
	BackendID string `toml:"backend_id"`
	// Collector is the collector's push address, "host:port" (UDP). This or Collectors is
	// required, not both; no default.
	Collector string `toml:"collector"`
	// Collectors lists the push addresses of several collectors, each "host:port" (UDP),
	// 1-MaxCollectors of them, no two alike: every report goes to each (one controller each
	// in active/standby HA, so that every one holds the same backend state). Use it instead
	// of Collector, not with it. Default: empty.
	Collectors []string `toml:"collectors"`
	// KeyFile is the path of this backend's HMAC push key (the controller's `controller key`
	// writes it). Required; the key is never written inline
	// so that the config file can be world-readable while the key file is not.
	// Default: "/etc/flowweight/probe.key".
	KeyFile string `toml:"key_file"`
	// Interval between reports, a duration string. Default "5s".
	Interval time.Duration `toml:"interval"`
	// Jitter spreads reports of many probes: each wait is Interval·(1 ± Jitter·u), u uniform in
	// [0,1). A fraction in [0, 0.5]. Default 0.1.
	Jitter float64 `toml:"jitter"`
	// Scope is "host" (whole machine) or "cgroup" (one cgroup, see CgroupPath). Default "host".
	Scope string `toml:"scope"`
	// CgroupPath is the cgroup measured when Scope is "cgroup": an absolute directory under a
	// cgroup mount ("/sys/fs/cgroup/cpu/flowweight/web1" on v1, "/sys/fs/cgroup/system.slice/
	// web.service" on v2) or a path relative to the hierarchy root ("flowweight/web1"). The
	// cgroup version is detected from the mounts. Required for scope "cgroup"; no default.
	CgroupPath string `toml:"cgroup_path"`
	// ServicePorts lists the local TCP ports whose ESTABLISHED connections are counted
	// (IPv4 and IPv6). Empty: connections are not reported. Default: empty.
	ServicePorts []int `toml:"service_ports"`
	// ConnsInterval is how long a connection count is reused before the probe counts again.
	// Counting walks every bucket of the kernel's TCP hash, however few sockets it holds, and
	// at a 1 s interval that walk was three quarters of the probe's CPU; snmpd keeps its
	// tcpConnTable for about 5 s for the same reason (docs/benchmarks.md). "0s" counts for
	// every report; a value at or under interval does too. 0 or MinInterval-MaxInterval.
	// Default "5s".
	ConnsInterval time.Duration `toml:"conns_interval"`
	// InFlightInterval is how often, between full reports, the probe counts the service
	// ports' connections again and sends them alone in an in-flight report: the work in
	// flight the controller's fast loop follows (weighting.in_flight_period). Each costs a
	// read of /proc/net/snmp, or an exact count with in_flight_count "exact" (docs/probe.md,
	// "In-flight reports"). Needs service_ports. "0s" (the default) switches them off;
	// otherwise 10ms up to below interval, "50ms" with the controller's in_flight_period
	// "50ms".
	InFlightInterval time.Duration `toml:"in_flight_interval"`
	// InFlightCount is how the in-flight reports count: "calibrated" (the default) reads the
	// network namespace's running count of established connections (/proc/net/snmp
	// CurrEstab, a 2 KiB read, about 1 % of an exact count's cost) and subtracts the
	// namespace's other connections, measured by an exact count every interval; it falls back
	// to exact counts by itself when those other connections churn (docs/probe.md,
	// "In-flight reports"). "exact" counts the service ports every time.
	InFlightCount string `toml:"in_flight_count"`
	// NIC is the interface whose throughput is reported, e.g. "eth0". Empty: not reported.
	// Default: empty.
	NIC string `toml:"nic"`
	// NICSpeedMbps is the NIC's line rate in Mbit/s; 0 reads /sys/class/net/NIC/speed.
	// Default 0.
	NICSpeedMbps int `toml:"nic_speed_mbps"`
	// Health configures the HTTP check of the local service.
	Health Health `toml:"health"`
	// DrainFile: while this file exists the probe reports the backend as draining.
	// Default "/run/flowweight/drain".
	DrainFile string `toml:"drain_file"`
	// LogLevel is "debug", "info", "warn" or "error". Default "info".
	LogLevel string `toml:"log_level"`
	// AgentCheck configures the answer to HAProxy's agent check.
	AgentCheck AgentCheck `toml:"agent_check"`
	// Service names the service's own processes, whose CPU is reported as service_cpu so
	// the collector can tell the service's load from a neighbour's. Optional.
	Service Service `toml:"service"`
}

// Service says where the service's processes are: one of the keys, or none (no service_cpu).
type Service struct {
	// PIDFile is the absolute path of a file holding the service's main PID; that process
	// and its descendants are measured. Re-read every interval. Default: empty.
	PIDFile string `toml:"pidfile"`
	// Unit is a systemd service unit, "nginx" or "nginx.service"; the CPU of its cgroup,
	// system.slice/NAME.service under the cgroup mount, is measured. Default: empty.
	Unit string `toml:"unit"`
	// Cgroup is a cgroup directory whose CPU is measured, written as cgroup_path is (absolute,
	// or relative to the hierarchy root). Default: empty.
	Cgroup string `toml:"cgroup"`
}

// UnitMaxLen is systemd's limit on a unit name.
const UnitMaxLen = 255

// unitChars are the characters systemd allows in a unit name.
const unitChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.@\\"

// UnitCgroup is the cgroup of Unit relative to the hierarchy root: system.slice/NAME.service,
// where systemd puts system services. "" when Unit is not set.
func (s Service) UnitCgroup() string {
	if s.Unit == "" {
		return ""
	}
	name := s.Unit
	if !strings.HasSuffix(name, ".service") {
		name += ".service" // as systemctl reads a bare name
	}
	return "system.slice/" + name
}

// AgentCheck configures the TCP port that answers HAProxy's agent check (`agent-check
// agent-port N` on a server line) with up/down, ready/drain and a weight percentage
// max(FloorPercent, round(100·(1 − LS))), LS = CPU·cpu_util + Mem·mem_util +
// Conn·min(1, conns/MaxConns). See docs/probe.md, "HAProxy agent-check".
type AgentCheck struct {
	// Listen is the TCP address to answer on, "host:port" or ":port" (all addresses).
	// Empty: no agent check. Default: empty.
	Listen string `toml:"listen"`
	// CPU, Mem and Conn are the coefficients of the load LS; each in [0,1], summing to 1.
	// Defaults 0.7, 0.3, 0.
	CPU  float64 `toml:"cpu"`
	Mem  float64 `toml:"mem"`
	Conn float64 `toml:"conn"`
	// MaxConns is the number of established connections on service_ports that counts as
	// full load. Required (at least 1) when Conn > 0. Default 0.
	MaxConns int `toml:"max_conns"`
	// FloorPercent is the lowest percentage a healthy, undrained backend is given, so load
	// alone never takes it out of rotation. 0-100. Default 1.
	FloorPercent int `toml:"floor_percent"`
	// Checkers are the addresses HAProxy checks from: IP addresses ("10.0.0.5") or prefixes
	// ("10.0.0.0/29"), at most MaxCheckers. Of the port's 16 connection slots, 4 are kept
	// for them, and they are held to no per-source budget; every other source may hold at
	// most 4 connections at once. Empty: no slot is reserved, only the per-source budget
	// applies. Default: empty.
	Checkers []string `toml:"checkers"`
}

// Health configures the HTTP health check of the local service.
type Health struct {
	// URL is fetched with GET on every interval, over a new connection each time. Empty: no
	// check, and the backend counts as healthy while the probe runs. Default: empty.
	URL string `toml:"url"`
	// Timeout bounds the whole check (connect, headers, body); at most Interval.
	// Default (also "0s"): the smaller of DefaultHealthTimeout (2 s) and Interval, so that
	// every allowed interval is valid with it.
	Timeout time.Duration `toml:"timeout"`
	// ExpectStatus lists the HTTP status codes that count as healthy: comma-separated codes
	// or ranges, e.g. "200-399" or "200,204". Default "200-399".
	ExpectStatus string `toml:"expect_status"`
	// BodyContains, when not empty, must occur in the first 64 KiB of the body.
	// Default: empty.
	BodyContains string `toml:"body_contains"`
	// FastInterval is the time between checks, each with its own report, after a failed
	// check: the collector needs fail_threshold failures in a row to take the backend out,
	// and at the normal interval those take (fail_threshold−1) intervals longer than the
	// first failure. Checks stay this fast until FastRise checks in a row have passed, so a
	// recovery reaches the collector's rise_threshold quickly too (HAProxy's fastinter).
	// Between MinFastInterval and Interval; equal to Interval switches it off. Default
	// "100ms": with a 1 s interval and fail_threshold 3 the third failure then follows the
	// first by 0.2 s, and a dead service costs 10 refused connections and 10 datagrams a
	// second.
	FastInterval time.Duration `toml:"fast_interval"`
	// FastRise is how many checks in a row must pass after a failure before the probe goes
	// back to Interval. Set it to at least the collector's rise_threshold (default 2). 1-100.
	// Default 3: one more than rise_threshold's default, so one lost datagram does not leave
	// the last good check needed to the normal interval.
	FastRise int `toml:"fast_rise"`
}

// Defaults returns the configuration used for every key a file leaves out, with the defaults
// that depend on other keys (fill) taken for the default interval.
func Defaults() Config {
	c := unfilled()
	c.fill()
	return c
}

// unfilled is Defaults before fill: what a file is decoded over, so that fill sees which
// dependent keys the file left out (they are still 0).
func unfilled() Config {
	host, _ := os.Hostname()
	return Config{
		BackendID:     host,
		KeyFile:       "/etc/flowweight/probe.key",
		Interval:      5 * time.Second,
		ConnsInterval: 5 * time.Second,
		InFlightCount: InFlightCalibrated,
		Jitter:        0.1,
		Scope:         ScopeHost,
		Health: Health{
			// Timeout is 0 here: fill derives it from Interval (HealthTimeout).
			ExpectStatus: "200-399",
			FastInterval: 100 * time.Millisecond,
			FastRise:     3,
		},
		DrainFile: "/run/flowweight/drain",
		LogLevel:  "info",
		AgentCheck: AgentCheck{
			CPU:          0.7,
			Mem:          0.3,
			FloorPercent: 1,
		},
	}
}

// DefaultHealthTimeout is health.timeout's default when interval is at least as long.
const DefaultHealthTimeout = 2 * time.Second

// fill sets the defaults that depend on other keys: a default must be valid with every
// allowed value of the keys it is checked against (a 1 s interval once made the 2 s default
// timeout refuse to start).
func (c *Config) fill() {
	if c.Health.Timeout == 0 {
		c.Health.Timeout = c.HealthTimeout()
	}
}

// HealthTimeout is health.timeout's default for c's interval: the smaller of
// DefaultHealthTimeout and Interval.
func (c Config) HealthTimeout() time.Duration {
	if c.Interval > 0 && c.Interval < DefaultHealthTimeout {
		return c.Interval
	}
	return DefaultHealthTimeout
}

// Load decodes the file at path over the defaults, fills the defaults that depend on other
// keys and validates the result.
func Load(path string) (Config, error) {
	c := unfilled()
	if err := configs.DecodeFile(path, &c); err != nil {
		return Config{}, err
	}
	c.fill()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate reports every problem in c, each prefixed with the key it is about.
func (c Config) Validate() error {
	var p configs.Problems
	switch {
	case c.BackendID == "":
		p.Addf("backend_id", "empty (and the host name is unknown)")
	case len(c.BackendID) > MaxBackendIDLen:
		p.Addf("backend_id", "%d bytes, at most %d allowed", len(c.BackendID), MaxBackendIDLen)
	case strings.Trim(c.BackendID, idChars) != "":
		p.Addf("backend_id", "%q: only letters, digits, '.', '_' and '-' are allowed", c.BackendID)
	}
	c.validateCollectors(&p)
	if c.KeyFile == "" {
		p.Addf("key_file", "required: the path of this backend's push key file (`controller key` on the controller writes it)")
	}
	p.Duration("interval", c.Interval, MinInterval, MaxInterval)
	switch {
	case c.ConnsInterval != 0 && c.ConnsInterval < MinInterval:
		p.Addf("conns_interval", "%v: want \"0s\" (count for every report) or at least %v", c.ConnsInterval, MinInterval)
	case c.ConnsInterval > MaxInterval:
		p.Addf("conns_interval", "%v is above the maximum %v", c.ConnsInterval, MaxInterval)
	}
	switch {
	case c.InFlightInterval == 0:
	case c.InFlightInterval < MinInFlightInterval:
		p.Addf("in_flight_interval", "%v: want \"0s\" (off) or at least %v", c.InFlightInterval, MinInFlightInterval)
	case c.InFlightInterval >= c.Interval && c.Interval > 0:
		p.Addf("in_flight_interval", "%v is not below interval %v: in-flight reports go between full ones", c.InFlightInterval, c.Interval)
	}
	switch c.InFlightCount {
	case "", InFlightCalibrated, InFlightExact:
	default:
		p.Addf("in_flight_count", "%q: want %q or %q", c.InFlightCount, InFlightCalibrated, InFlightExact)
	}
	if c.Jitter < 0 || c.Jitter > MaxJitter || c.Jitter != c.Jitter {
		p.Addf("jitter", "%v is outside [0, %v]", c.Jitter, MaxJitter)
	}
	switch c.Scope {
	case ScopeHost:
	case ScopeCgroup:
		if c.CgroupPath == "" {
			p.Addf("cgroup_path", "required when scope is %q", ScopeCgroup)
		}
	default:
		p.Addf("scope", "%q is not %q or %q", c.Scope, ScopeHost, ScopeCgroup)
	}
	seen := map[int]bool{}
	for i, port := range c.ServicePorts {
		key := fmt.Sprintf("service_ports[%d]", i)
		switch {
		case port < 1 || port > 65535:
			p.Addf(key, "port %d is outside 1-65535", port)
		case seen[port]:
			p.Addf(key, "port %d is listed twice", port)
		}
		seen[port] = true
	}
	if c.NIC != "" && (strings.ContainsAny(c.NIC, "/ ") || c.NIC == "." || c.NIC == "..") {
		p.Addf("nic", "%q is not an interface name", c.NIC)
	}
	if c.NICSpeedMbps < 0 {
		p.Addf("nic_speed_mbps", "%d is negative (0 reads the speed from sysfs)", c.NICSpeedMbps)
	}
	if c.Health.URL != "" {
		// The URL may hold a password: every message shows it redacted.
		u, err := url.Parse(c.Health.URL)
		shown := health.RedactURL(c.Health.URL)
		switch {
		case err != nil:
			p.Addf("health.url", "%s", health.RedactError(err, c.Health.URL))
		case u.Scheme != "http" && u.Scheme != "https":
			p.Addf("health.url", "%q: scheme must be http or https", shown)
		case u.Host == "":
			p.Addf("health.url", "%q has no host", shown)
		}
	}
	p.Duration("health.timeout", c.Health.Timeout, MinTimeout, MaxInterval)
	// Only a check that runs can delay reports: without a URL the default timeout is moot.
	if c.Health.URL != "" && c.Health.Timeout > c.Interval && c.Interval > 0 {
		p.Addf("health.timeout", "%v is longer than interval %v: a hanging service would delay reports", c.Health.Timeout, c.Interval)
	}
	p.Duration("health.fast_interval", c.Health.FastInterval, MinFastInterval, MaxInterval)
	if c.Health.FastInterval > c.Interval && c.Interval > 0 {
		p.Addf("health.fast_interval", "%v is longer than interval %v: it is the faster pace after a failed check", c.Health.FastInterval, c.Interval)
	}
	if c.Health.FastRise < 1 || c.Health.FastRise > MaxFastRise {
		p.Addf("health.fast_rise", "%d is outside 1-%d", c.Health.FastRise, MaxFastRise)
	}
	if _, err := health.ParseStatusRanges(c.Health.ExpectStatus); err != nil {
		p.Add("health.expect_status", err)
	}
	if c.DrainFile == "" {
		p.Addf("drain_file", "empty")
	} else if !filepath.IsAbs(c.DrainFile) {
		p.Addf("drain_file", "%q is not an absolute path", c.DrainFile)
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		p.Add("log_level", err)
	}
	c.validateAgentCheck(&p)
	c.validateService(&p)
	return p.Err()
}

// CollectorAddrs is the list of collectors every report goes to: Collectors, or Collector
// alone. Call it on a validated Config.
func (c Config) CollectorAddrs() []string {
	if len(c.Collectors) > 0 {
		return c.Collectors
	}
	if c.Collector != "" {
		return []string{c.Collector}
	}
	return nil
}

// validateCollectors checks collector and collectors: exactly one of them, each address as a
// destination (with a host), at most MaxCollectors, none twice.
func (c Config) validateCollectors(p *configs.Problems) {
	switch {
	case c.Collector != "" && c.Collectors != nil:
		p.Addf("collectors", "set together with collector: use one (collector for one address, collectors for several)")
		return
	case c.Collector != "":
		p.Addr("collector", c.Collector, configs.Addr{Host: true})
		return
	case c.Collectors == nil:
		p.Addf("collector", "required: the collector's UDP address as host:port, or collectors = [\"host:port\", ...] to report to several")
		return
	case len(c.Collectors) == 0:
		p.Addf("collectors", "empty: give 1-%d UDP addresses as host:port", MaxCollectors)
		return
	case len(c.Collectors) > MaxCollectors:
		p.Addf("collectors", "%d addresses, at most %d allowed", len(c.Collectors), MaxCollectors)
	}
	first := map[string]int{}
	for i, addr := range c.Collectors {
		key := fmt.Sprintf("collectors[%d]", i)
		p.Addr(key, addr, configs.Addr{Host: true})
		var q configs.Problems // whether that recorded a problem: only valid ones are compared
		if q.Addr(key, addr, configs.Addr{Host: true}); q.Err() != nil {
			continue
		}
		k := sameAddr(addr)
		if j, seen := first[k]; seen {
			p.Addf(key, "%q is collectors[%d] (%q) again", addr, j, c.Collectors[j])
			continue
		}
		first[k] = i
	}
}

// sameAddr is a form of a valid host:port in which two spellings of one address (host name
// case, IP notation, leading zeros in the port) are equal.
func sameAddr(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.String()
	} else {
		host = strings.ToLower(strings.TrimSuffix(host, "."))
	}
	n, _ := strconv.Atoi(port)
	return net.JoinHostPort(host, strconv.Itoa(n))
}

// validateService checks [service]: at most one way of finding the processes, each well formed.
func (c Config) validateService(p *configs.Problems) {
	s := c.Service
	var set []string
	for _, k := range []struct{ key, v string }{{"pidfile", s.PIDFile}, {"unit", s.Unit}, {"cgroup", s.Cgroup}} {
		if k.v != "" {
			set = append(set, k.key)
		}
	}
	if len(set) > 1 {
		p.Addf("service", "%s are all set: give one of pidfile, unit and cgroup", strings.Join(set, " and "))
	}
	if s.PIDFile != "" && !filepath.IsAbs(s.PIDFile) {
		p.Addf("service.pidfile", "%q is not an absolute path", s.PIDFile)
	}
	if u := s.Unit; u != "" {
		base, suffix, dotted := u, "", false
		if i := strings.LastIndexByte(u, '.'); i >= 0 {
			base, suffix, dotted = u[:i], u[i+1:], true
		}
		switch {
		case len(u) > UnitMaxLen:
			p.Addf("service.unit", "%d bytes, at most %d allowed", len(u), UnitMaxLen)
		case strings.Trim(u, unitChars) != "":
			p.Addf("service.unit", "%q: a unit name has only letters, digits and \":-_.@\\\"", u)
		case base == "" || strings.HasSuffix(base, "@"):
			p.Addf("service.unit", "%q has no name (a template needs an instance: name@instance)", u)
		case dotted && suffix != "service":
			p.Addf("service.unit", "%q: only service units are looked up (as system.slice/NAME.service); give another unit's cgroup directory as service.cgroup", u)
		}
	}
	if cg := s.Cgroup; cg != "" {
		for _, part := range strings.Split(cg, "/") {
			if part == ".." {
				p.Addf("service.cgroup", "%q: \"..\" is not allowed in a cgroup path", cg)
				break
			}
		}
	}
}

// validateAgentCheck checks [agent_check] whether or not listen is set, so that a table
// written before it is switched on is already known to be right.
func (c Config) validateAgentCheck(p *configs.Problems) {
	a := c.AgentCheck
	if a.Listen != "" {
		p.Addr("agent_check.listen", a.Listen, configs.Addr{})
	}
	ok := true
	for _, k := range []struct {
		key string
		v   float64
	}{{"agent_check.cpu", a.CPU}, {"agent_check.mem", a.Mem}, {"agent_check.conn", a.Conn}} {
		if !(k.v >= 0 && k.v <= 1) {
			p.Addf(k.key, "coefficient %v outside [0,1]", k.v)
			ok = false
		}
	}
	if s := a.CPU + a.Mem + a.Conn; ok && math.Abs(s-1) > 1e-9 {
		p.Addf("agent_check", "coefficients cpu+mem+conn sum to %g, want 1", s)
	}
	switch {
	case a.MaxConns < 0:
		p.Addf("agent_check.max_conns", "%d is negative", a.MaxConns)
	case a.Conn > 0 && a.MaxConns == 0:
		p.Addf("agent_check.max_conns", "required (at least 1) when agent_check.conn is %v", a.Conn)
	}
	if a.Conn > 0 && len(c.ServicePorts) == 0 {
		p.Addf("agent_check.conn", "%v, but service_ports is empty: no connections are counted", a.Conn)
	}
	if a.FloorPercent < 0 || a.FloorPercent > 100 {
		p.Addf("agent_check.floor_percent", "%d is outside 0-100", a.FloorPercent)
	}
	if len(a.Checkers) > MaxCheckers {
		p.Addf("agent_check.checkers", "%d entries, at most %d allowed", len(a.Checkers), MaxCheckers)
	} else if _, err := ParseCheckers(a.Checkers); err != nil {
		p.Addf("agent_check.checkers", "%v", err)
	}
}
