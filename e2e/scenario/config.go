package scenario

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ControllerTOML renders controller.toml for the scenario: the controller on the unix
// socket, push and API inside "ctl", one service on the VIP with one probe backend per
// quota. capacities and mode are the values that Reload may change.
func ControllerTOML(o Options, sock, keyFile string, capacities []float64, mode string) string {
	var b strings.Builder
	dur := func(d time.Duration) string { return `"` + d.String() + `"` }
	fmt.Fprintf(&b, "[controller]\nlisten = %q\nupdate_period = %s\nreadback_period = %s\nbarrier_timeout = \"2s\"\necho_interval = \"1s\"\nnormal = true\n\n",
		"unix:"+sock, dur(o.UpdatePeriod), dur(o.ReadbackPeriod))
	i := controllerIndex(o, sock)
	// Writes without a token are refused by default; the lab's API listens inside the "ctl"
	// namespace, reached only by this process and the lab's operator, who drain through it,
	// with the token when the scenario asks for one.
	if o.APIToken {
		fmt.Fprintf(&b, "[api]\nlisten = %q\ntoken_file = %q\n\n", apiAddrOf(i), o.tokenFile())
	} else {
		fmt.Fprintf(&b, "[api]\nlisten = %q\nallow_unauthenticated_writes = true\n\n", apiAddrOf(i))
	}
	fmt.Fprintf(&b, "[collector]\npush_listen = %q\nkey_file = %q\nstale_after = %s\nfail_threshold = %d\nrise_threshold = %d\n\n",
		pushAddrOf(o, i), keyFile, dur(o.StaleAfter), o.FailThreshold, o.RiseThreshold)
	w := map[string]string{"warmup": dur(o.Warmup), "dead_band": fmt.Sprint(o.DeadBand), "in_flight_period": dur(o.InFlight)}
	maps.Copy(w, o.Weighting)
	b.WriteString("[weighting]\n")
	for _, k := range slices.Sorted(maps.Keys(w)) {
		fmt.Fprintf(&b, "%s = %s\n", k, w[k])
	}
	if o.Hosts {
		for i := range o.Quotas {
			fmt.Fprintf(&b, "\n[[host]]\nname = \"be%d\"\nip = %q\nsource = \"probe\"\ncapacity = %v\n", i+1, o.addr(backendBase+i), capacities[i])
		}
	}
	fmt.Fprintf(&b, "\n[[service]]\nname = \"web\"\nvip = %q\nprotocol = \"tcp\"\nport = %d\nmode = %q\ngroup_id = %d\n",
		o.addr(vipHost), VIPPort, mode, GroupID)
	if o.AffinityTimeout > 0 {
		fmt.Fprintf(&b, "affinity_timeout = %s\n", dur(o.AffinityTimeout))
	}
	for _, k := range slices.Sorted(maps.Keys(o.ServiceKeys)) {
		fmt.Fprintf(&b, "%s = %s\n", k, o.ServiceKeys[k])
	}
	for i := range o.Quotas {
		if o.Hosts {
			fmt.Fprintf(&b, "\n  [[service.backend]]\n  host = \"be%d\"\n  port = %d\n", i+1, BackendPort)
			continue
		}
		fmt.Fprintf(&b, "\n  [[service.backend]]\n  name = \"be%d\"\n  ip = %q\n  port = %d\n  source = \"probe\"\n  capacity = %v\n",
			i+1, o.addr(backendBase+i), BackendPort, capacities[i])
	}
	if o.ExtraTOML != "" {
		b.WriteString("\n" + o.ExtraTOML + "\n")
	}
	return b.String()
}

// ProbeTOML renders one backend's probe.toml: cgroup scope on the backend's cgroup, the
// service port, the health URL on the backend's own address, pushing to the controller, and,
// unless o.NoServiceCPU, a [service] table whose pidfile is pidFile (the backend's backendd),
// so that the probe reports the service's own CPU (service_cpu).
func ProbeTOML(o Options, name, ip, cgroupPath, keyFile, drainFile, pidFile string) string {
	timeout := min(o.ProbeInterval/2, time.Second)
	if o.ProbeHealthTimeout > 0 {
		timeout = o.ProbeHealthTimeout
	}
	collectors := make([]string, max(o.Controllers, 1))
	for i := range collectors {
		collectors[i] = strconv.Quote(pushAddrOf(o, i))
	}
	sink := "collector = " + collectors[0]
	if len(collectors) > 1 {
		sink = "collectors = [" + strings.Join(collectors, ", ") + "]"
	}
	text := fmt.Sprintf(`backend_id = %q
%s
key_file = %q
interval = %q
jitter = 0.0
scope = "cgroup"
cgroup_path = %q
service_ports = [%d]
drain_file = %q
log_level = "info"

[health]
url = "http://%s/health"
timeout = %q
`, name, sink, keyFile, o.ProbeInterval.String(), cgroupPath,
		BackendPort, drainFile, net.JoinHostPort(ip, strconv.Itoa(BackendPort)), timeout.String())
	if o.ProbeFastInterval > 0 {
		text += fmt.Sprintf("fast_interval = %q\n", o.ProbeFastInterval.String())
	}
	// The top-level key goes before [health]: inserted after the service ports.
	text = strings.Replace(text, "drain_file = ", fmt.Sprintf("in_flight_interval = %q\ndrain_file = ", o.InFlight.String()), 1)
	if !o.NoServiceCPU {
		text += fmt.Sprintf("\n[service]\npidfile = %q\n", pidFile)
	}
	return text
}

// PortService is one more service on the scenario's VIP over the same backends as "web"
// (backends_from), each backend on the service's own port.
type PortService struct {
	Name     string
	Protocol string // "tcp" or "udp"
	Port     int
	GroupID  int
}

// PortServicesTOML renders ps as [[service]] tables for Options.ExtraTOML; the backends
// must listen on each port (Options.AlsoPorts, Options.UDPPort).
func PortServicesTOML(o Options, ps ...PortService) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "[[service]]\nname = %q\nvip = %q\nprotocol = %q\nport = %d\ngroup_id = %d\nbackends_from = \"web\"\n",
			p.Name, o.addr(vipHost), p.Protocol, p.Port, p.GroupID)
		if o.Mode != "" {
			fmt.Fprintf(&b, "mode = %q\n", o.Mode)
		}
		b.WriteString("\n")
	}
	return b.String()
}
