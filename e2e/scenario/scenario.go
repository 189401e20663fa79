package scenario

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"flowweight/e2e/lab"
)

// Modes of a service, as controller.toml spells them.
const (
	ModeConntrack = "conntrack"
	ModeStateless = "stateless"
)

// Fixed host numbers inside the scenario's /24 and the service's ports.
const (
	ctlHost     = 2
	clientHost  = 10
	backendBase = 11
	vipHost     = 100
	// VIPPort is the service port clients connect to.
	VIPPort = 80
	// BackendPort is where every backendd listens.
	BackendPort = 8080
	// PushPort is the controller's UDP push port inside "ctl".
	PushPort = 7946
	// APIAddr is the controller's API address inside "ctl".
	APIAddr = "127.0.0.1:9090"
	// GroupID is the service's select group.
	GroupID = 1
)

// Options describe one scenario. Zero values take the defaults documented on each field.
type Options struct {
	// Dir holds the lab (OVS database, sockets, logs), the configs and, when Bins is empty,
	// the built binaries. Required; keep it short (unix socket paths are limited to 107 bytes).
	Dir string
	// ID is the lab id (see lab.NewWithID); empty: random.
	ID string
	// Net is the third octet of the scenario's 10.77.N.0/24; default 0. Tests running one
	// after the other pick different ones so that a leftover never answers for another.
	Net uint8
	// Mode is the service mode, ModeConntrack (default) or ModeStateless.
	Mode string
	// AffinityTimeout is the service's affinity_timeout (whole seconds); 0 (default) is off.
	AffinityTimeout time.Duration
	// Quotas are the backends' CPU quotas in cores, one backend per entry; default
	// 0.25, 0.5, 1.0.
	Quotas []float64
	// Capacities are the operator capacity factors per backend (controller.toml
	// service.backend.capacity); default 1 each.
	Capacities []float64
	// Work is backendd's SHA-256 rounds per GET /; default 20000.
	Work int
	// ProbeInterval is the probes' report interval; default 1s.
	ProbeInterval time.Duration
	// ProbeFastInterval is the probes' health.fast_interval, the pace after a failed check;
	// 0 leaves the probe's default (100ms).
	ProbeFastInterval time.Duration
	// ProbeHealthTimeout is the probes' health.timeout; 0: half the probe interval, at most
	// 1 s.
	ProbeHealthTimeout time.Duration
	// NoServiceCPU leaves the [service] table out of the probes' configs, so they report no
	// service_cpu and the headroom policy (the controller's default) falls back to 1/AL for
	// the whole pool. By default (false) each probe's [service] pidfile is the backend's
	// PIDFile, which names its backendd: the probe then reports the service's own CPU apart
	// from anything else charged to the backend's cgroup.
	NoServiceCPU bool
	// UpdatePeriod, ReadbackPeriod, StaleAfter, Warmup: controller tuning; defaults
	// 1s, 2s, 4s, 6s.
	UpdatePeriod, ReadbackPeriod, StaleAfter, Warmup time.Duration
	// FailThreshold and RiseThreshold: defaults 3 and 2.
	FailThreshold, RiseThreshold int
	// DeadBand is weighting.dead_band; default 0.01.
	DeadBand float64
	// InFlight is both the probes' in_flight_interval and the controller's
	// weighting.in_flight_period: the fast loop (docs/weights.md). Default 0: off, so that
	// the tests that compare the switch with the applied weights see them settle under
	// load; the benchmarks and the fast loop's own tests turn it on.
	InFlight time.Duration
	// Weighting holds extra [weighting] keys as raw TOML values, e.g. {"policy": `"static"`}.
	Weighting map[string]string
	// ServiceKeys holds extra keys of service "web" as raw TOML values, e.g.
	// {"shadow_policy": `"equal"`}.
	ServiceKeys map[string]string
	// ExtraTOML is appended to controller.toml verbatim (new tables only).
	ExtraTOML string
	// FlowMonitor allows OpenFlow 1.4 on the bridge besides 1.3, so that MonitorFlows can
	// watch every flow change (1.3 has no flow monitor); the controller still speaks 1.3.
	FlowMonitor bool
	// Bins are prebuilt binaries; empty fields are built into Dir/bin.
	Bins Binaries
	// Log receives the lab's log; nil discards it.
	Log io.Writer
	// Controllers is how many controllers run; 2 or more run them in HA on an etcd-server
	// started inside "ctl" (docs/ha.md): controller i listens on its own socket, push port
	// PushPort+i and API port 9090+i, and every probe reports to all of them. Default 1,
	// without etcd.
	Controllers int
	// Lease is the HA lease (whole seconds); default 1s.
	Lease time.Duration
	// EtcdMembers is the size of the etcd cluster with Controllers > 1: 1 (default) or 3.
	EtcdMembers int
	// Hosts writes each backend once as a [[host]] (name, ip, capacity) and the service's
	// backends as references to them (host = "beN"), so services in ExtraTOML can take the
	// same hosts (backends_from = "web"); default false: inline backends.
	Hosts bool
	// AlsoPorts are more TCP ports each backendd serves its HTTP handler on (backendd
	// -also-ports), for services of other ports in ExtraTOML.
	AlsoPorts []int
	// UDPPort, when not 0, is the UDP port each backendd answers datagrams on with
	// "NAME PAYLOAD" (backendd -udp-port).
	UDPPort int
	// APIToken makes the controller's API need a bearer token for writes (api.token_file,
	// a random token the scenario writes to TokenFile) instead of allowing them without one;
	// APIPost sends it. Default false: the lab's writes need no token.
	APIToken bool
	// IPv6 gives every host, the VIP and the backends addresses in fd00:77:0:Net::/64
	// (host numbers as in IPv4: the VIP is ::64, be1 ::b) instead of 10.77.Net.0/24, so the
	// client resolves the VIP by neighbour discovery and the probes push to the
	// controller's IPv6 address.
	IPv6 bool
}

func (o *Options) fill() error {
	if o.Dir == "" {
		return errors.New("scenario: Options.Dir is empty")
	}
	if o.Mode == "" {
		o.Mode = ModeConntrack
	}
	if o.Mode != ModeConntrack && o.Mode != ModeStateless {
		return fmt.Errorf("scenario: Options.Mode %q: want %q or %q", o.Mode, ModeConntrack, ModeStateless)
	}
	if len(o.Quotas) == 0 {
		o.Quotas = []float64{0.25, 0.5, 1.0}
	}
	if len(o.Quotas) > vipHost-backendBase {
		return fmt.Errorf("scenario: %d backends: at most %d", len(o.Quotas), vipHost-backendBase)
	}
	if len(o.Capacities) == 0 {
		o.Capacities = make([]float64, len(o.Quotas))
		for i := range o.Capacities {
			o.Capacities[i] = 1
		}
	}
	if len(o.Capacities) != len(o.Quotas) {
		return fmt.Errorf("scenario: %d capacities for %d quotas", len(o.Capacities), len(o.Quotas))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ProbeInterval, time.Second)
	def(&o.UpdatePeriod, time.Second)
	def(&o.ReadbackPeriod, 2*time.Second)
	def(&o.StaleAfter, 4*time.Second)
	def(&o.Warmup, 6*time.Second)
	if o.FailThreshold == 0 {
		o.FailThreshold = 3
	}
	if o.RiseThreshold == 0 {
		o.RiseThreshold = 2
	}
	if o.DeadBand == 0 {
		o.DeadBand = 0.01
	}
	if o.Work == 0 {
		o.Work = 20000
	}
	if o.Controllers == 0 {
		o.Controllers = 1
	}
	if o.Controllers < 1 || o.Controllers > 9 {
		return fmt.Errorf("scenario: Options.Controllers %d outside [1,9]", o.Controllers)
	}
	def(&o.Lease, time.Second)
	if o.EtcdMembers == 0 {
		o.EtcdMembers = 1
	}
	if o.EtcdMembers != 1 && o.EtcdMembers != 3 {
		return fmt.Errorf("scenario: Options.EtcdMembers %d: want 1 or 3", o.EtcdMembers)
	}
	return nil
}

// Addr returns 10.77.Net.host, or fd00:77:0:Net::host with IPv6.
func (o *Options) addr(host int) netip.Addr {
	if o.IPv6 {
		return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x77, 0, 0, 0, o.Net, 15: byte(host)})
	}
	return netip.AddrFrom4([4]byte{10, 77, o.Net, byte(host)})
}

// prefix is the host's address with the scenario's prefix length.
func (o *Options) prefix(host int) netip.Prefix {
	if o.IPv6 {
		return netip.PrefixFrom(o.addr(host), 64)
	}
	return netip.PrefixFrom(o.addr(host), 24)
}

// Binaries are the three programs a scenario runs.
type Binaries struct {
	Controller, Probe, Backendd string
}

// Build compiles the controller, the probe and backendd into dir with `go build -o` (never
// into the source tree). It must run inside the flowweight module.
func Build(dir string) (Binaries, error) {
	b := Binaries{
		Controller: filepath.Join(dir, "controller"),
		Probe:      filepath.Join(dir, "probe"),
		Backendd:   filepath.Join(dir, "backendd"),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("scenario: build: %w", err)
	}
	for out, pkg := range map[string]string{b.Controller: "flowweight/controller", b.Probe: "flowweight/probe", b.Backendd: "flowweight/cmd/backendd"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		msg, err := exec.CommandContext(ctx, "go", "build", "-o", out, pkg).CombinedOutput()
		cancel()
		if err != nil {
			return Binaries{}, fmt.Errorf("scenario: go build %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

// Backend is one backend host with its backendd and probe.
type Backend struct {
	// Name is the backend's name in controller.toml and the probe's backend_id ("be1"...).
	Name   string
	Host   *lab.Host
	Cgroup *lab.Cgroup
	Quota  float64
	// PIDFile holds the PID of the backend's running backendd, rewritten by every StartHTTP
	// (it is left in place when backendd stops, as a crashed daemon leaves its own; the probe
	// then finds it stale). It is the probe's [service] pidfile unless Options.NoServiceCPU.
	PIDFile string

	s         *Scenario
	mu        sync.Mutex
	http      *lab.Proc
	probe     *lab.Proc
	probeConf string
	memDir    string
}

// Scenario is a running topology. Its methods are safe for concurrent use unless noted.
type Scenario struct {
	Opts     Options
	Lab      *lab.Lab
	OVS      *lab.OVS
	Bridge   *lab.Bridge
	Ctl      *lab.Host
	Client   *lab.Host
	Backends []*Backend
	// VIP is the service address clients connect to (port VIPPort).
	VIP netip.Addr
	// Socket is the unix socket the controller listens on and the bridge connects to; it
	// lives in the switch's run directory, the only place Open vSwitch accepts one.
	Socket string
	// KeyFile is the push key shared by the probes and the controller.
	KeyFile string
	// TokenFile is the API's bearer token with Options.APIToken ("" without).
	TokenFile string
	// ConfigPath is controller.toml.
	ConfigPath string

	mu         sync.Mutex
	ctlProcs   map[int]*lab.Proc // by controller index
	etcd       []*lab.Proc       // by member
	etcdDirs   []string
	capacities []float64
	mode       string
}

// Start builds the topology and waits until the controller has connected to the switch and
// every backend is up with a non-zero applied weight (bounded by about a minute). On error
// everything already started is torn down.
func Start(opts Options) (*Scenario, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	bins := opts.Bins
	if bins.Controller == "" || bins.Probe == "" || bins.Backendd == "" {
		built, err := Build(filepath.Join(opts.Dir, "bin"))
		if err != nil {
			return nil, err
		}
		bins = built
		opts.Bins = built
	}
	var l *lab.Lab
	var err error
	if opts.ID != "" {
		l, err = lab.NewWithID(opts.Dir, opts.ID, opts.Log)
	} else {
		l, err = lab.New(opts.Dir, opts.Log)
	}
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s := &Scenario{Opts: opts, Lab: l, VIP: opts.addr(vipHost),
		KeyFile:    filepath.Join(opts.Dir, "push.key"),
		ConfigPath: filepath.Join(opts.Dir, "controller.toml"),
		capacities: append([]float64(nil), opts.Capacities...), mode: opts.Mode}
	if err := s.build(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

func (s *Scenario) build() error {
	o := &s.Opts
	if err := writeKey(s.KeyFile); err != nil {
		return err
	}
	if o.APIToken {
		s.TokenFile = o.tokenFile()
		if err := writeKey(s.TokenFile); err != nil { // 64 hex digits, mode 0600: a good token
			return err
		}
	}
	var err error
	if s.OVS, err = s.Lab.StartOVS(); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	// Open vSwitch connects to a unix: controller only inside its own run directory
	// ("Not connecting to socket controller ... due to possibility for remote exploit").
	s.Socket = filepath.Join(s.OVS.RunDir, "controller.sock")
	targets := make([]string, o.Controllers)
	for i := range targets {
		targets[i] = "unix:" + filepath.Join(s.OVS.RunDir, controllerFile(i, "sock"))
	}
	if s.Bridge, err = s.OVS.AddBridge("br", strings.Join(targets, " "), "secure"); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	if o.FlowMonitor {
		if _, err := s.OVS.Vsctl("set", "Bridge", s.Bridge.Name, "protocols=OpenFlow13,OpenFlow14"); err != nil {
			return fmt.Errorf("scenario: %w", err)
		}
	}
	// Reconnect quickly after a controller restart (the default backoff grows to 8 s).
	ids, err := s.OVS.Vsctl("--bare", "--columns=_uuid", "list", "Controller")
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	for _, id := range strings.Fields(ids) {
		if _, err := s.OVS.Vsctl("set", "Controller", id, "max_backoff=1000"); err != nil {
			return fmt.Errorf("scenario: %w", err)
		}
	}
	pfx := o.prefix
	if s.Ctl, err = s.Bridge.AddHost("ctl", pfx(ctlHost)); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	if s.Client, err = s.Bridge.AddHost("client", pfx(clientHost)); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	if o.Controllers > 1 {
		if err := s.startEtcd(); err != nil {
			return err
		}
	}
	if err := s.writeConfig(); err != nil {
		return err
	}
	for i := range o.Controllers {
		if err := s.StartControllerN(i); err != nil {
			return err
		}
	}
	for i, q := range o.Quotas {
		name := "be" + strconv.Itoa(i+1)
		h, err := s.Bridge.AddHost(name, pfx(backendBase+i))
		if err != nil {
			return fmt.Errorf("scenario: %w", err)
		}
		cg, err := s.Lab.NewCgroup(name, q)
		if err != nil {
			return fmt.Errorf("scenario: %w", err)
		}
		be := &Backend{Name: name, Host: h, Cgroup: cg, Quota: q, s: s,
			PIDFile: filepath.Join(s.Lab.Dir, name+"-http.pid")}
		s.Backends = append(s.Backends, be)
		if err := be.prepareProbe(); err != nil {
			return err
		}
		if err := be.StartHTTP(); err != nil {
			return err
		}
		if err := be.StartProbe(); err != nil {
			return err
		}
	}
	return s.WaitReady(60 * time.Second)
}

// tokenFile is where the API's token goes with APIToken.
func (o *Options) tokenFile() string { return filepath.Join(o.Dir, "api.token") }

// writeKey writes a random 32-byte push key (or API token) as hex with mode 0600.
func writeKey(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("scenario: key file: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		f.Close()
		return fmt.Errorf("scenario: key: %w", err)
	}
	// Hex text: no byte of the key can be mistaken for the trailing newline LoadKey strips.
	_, werr := f.WriteString(hex.EncodeToString(key))
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("scenario: key file %s: %w", path, err)
	}
	return nil
}

// Backend returns the backend called name, or nil.
func (s *Scenario) Backend(name string) *Backend {
	for _, b := range s.Backends {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// Close stops everything the scenario started and removes the lab. Idempotent.
func (s *Scenario) Close() error {
	var errs []error
	for _, b := range s.Backends {
		b.mu.Lock()
		p := b.http
		b.mu.Unlock()
		if p != nil {
			// A frozen backend must be thawed or SIGTERM waits for the kill timeout.
			_ = p.Signal(sigCONT)
		}
	}
	// Controllers stop before etcd: a restarted etcd member was started after them, and the
	// lab stops processes newest first, so a controller would otherwise spend its shutdown
	// waiting on an etcd that is gone.
	s.mu.Lock()
	ctl := make([]*lab.Proc, 0, len(s.ctlProcs))
	for _, p := range s.ctlProcs {
		ctl = append(ctl, p)
	}
	s.mu.Unlock()
	for _, p := range ctl {
		if !p.Exited() {
			errs = append(errs, p.Stop())
		}
	}
	errs = append(errs, s.Lab.Close())
	s.mu.Lock()
	dirs := s.etcdDirs
	s.mu.Unlock()
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	for _, b := range s.Backends {
		if b.memDir != "" {
			// An exiting process may still be charged to the cgroup for a moment.
			err := lab.Poll(3*time.Second, func() error {
				if err := os.Remove(b.memDir); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("scenario: remove memory cgroup %s: %w", b.memDir, err)
				}
				return nil
			})
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
