package lab

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// HostIface is the name of the host's interface inside its namespace.
const HostIface = "eth0"

// Host is a network namespace attached to a bridge by a veth pair.
type Host struct {
	// Name is the caller's short name; NS is the namespace "PREFIX-NAME",
	// Veth the bridge-side interface of the same name (the namespace side
	// is HostIface).
	Name, NS, Veth string
	IP             netip.Prefix
	// MAC is HostMAC(Name), so it is the same in every run.
	MAC    net.HardwareAddr
	OFPort uint32
	bridge *Bridge
}

// HostMAC derives a locally administered unicast MAC from a host name:
// 02 followed by the first five bytes of SHA-256(name).
func HostMAC(name string) net.HardwareAddr {
	h := sha256.Sum256([]byte(name))
	return net.HardwareAddr{0x02, h[0], h[1], h[2], h[3], h[4]}
}

// AddHost creates namespace NAME with lo up and eth0 = ip (fixed MAC), the
// other veth end as a port of b, transmit checksum offload off on both
// ends (the userspace datapath passes TCP only then), links up.
//
// ip is an IPv4 or an IPv6 prefix. For IPv6, duplicate address detection is
// off on eth0 (sysctl accept_dad=0 before the link comes up, and the address
// added nodad), so the address and the link-local one are usable at once
// instead of "tentative" for a second or more, and router solicitations are
// off (no router exists; they would only add packets to every capture).
func (b *Bridge) AddHost(name string, ip netip.Prefix) (*Host, error) {
	if !ip.IsValid() || ip.Addr().Is4In6() || ip.Addr().Zone() != "" {
		return nil, fmt.Errorf("host %q: address %v: want an IPv4 or IPv6 prefix", name, ip)
	}
	for _, bin := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("host %q: %w", name, err)
		}
	}
	l := b.ovs.lab
	full, err := l.claimName("host", name)
	if err != nil {
		return nil, err
	}
	h := &Host{Name: name, NS: full, Veth: full, IP: ip, MAC: HostMAC(name), bridge: b}
	fail := func(err error) (*Host, error) { return nil, fmt.Errorf("host %q: %w", name, err) }

	if _, err := l.run(nil, "ip", "netns", "add", h.NS); err != nil {
		return fail(err)
	}
	if err := l.onClose("namespace "+h.NS, func() error { return deleteNetns(l, h.NS) }); err != nil {
		return fail(err)
	}
	if _, err := l.run(nil, "ip", "link", "add", h.Veth, "type", "veth", "peer", "name", HostIface, "netns", h.NS); err != nil {
		return fail(err)
	}
	if err := l.onClose("veth "+h.Veth, func() error { return deleteLink(l, h.Veth) }); err != nil {
		return fail(err)
	}
	addr := []string{"ip", "-n", h.NS, "addr", "add", ip.String(), "dev", HostIface}
	var v6 [][]string
	if ip.Addr().Is6() {
		addr = append(addr, "nodad")
		sysctl := func(k string) []string {
			return []string{"ip", "netns", "exec", h.NS, "sysctl", "-q", "-w", k}
		}
		v6 = [][]string{
			sysctl("net.ipv6.conf.all.disable_ipv6=0"),
			sysctl("net.ipv6.conf." + HostIface + ".disable_ipv6=0"),
			sysctl("net.ipv6.conf.all.accept_dad=0"),
			sysctl("net.ipv6.conf." + HostIface + ".accept_dad=0"),
			sysctl("net.ipv6.conf." + HostIface + ".router_solicitations=0"),
		}
	}
	steps := append(v6, [][]string{
		{"ip", "-n", h.NS, "link", "set", HostIface, "address", h.MAC.String()},
		addr,
		{"ip", "-n", h.NS, "link", "set", "lo", "up"},
		{"ip", "-n", h.NS, "link", "set", HostIface, "up"},
		{"ip", "link", "set", h.Veth, "up"},
		{"ethtool", "-K", h.Veth, "tx", "off"},
		{"ip", "netns", "exec", h.NS, "ethtool", "-K", HostIface, "tx", "off"},
		// The widest range of source ports. One client address opening hundreds of
		// connections a second reuses a source port within a minute with the default range
		// (connect takes every other port of 32768–60999), while the backend and the switch's
		// conntrack still hold the last connection on that tuple; Open vSwitch's userspace
		// conntrack then refuses the new SYN's sequence (conntrack_tcp_seq_chk_failed), the
		// connection hangs and its entry stays ESTABLISHED, poisoning the tuple for every
		// later reuse (docs/results/lab-2026-12-01.md, "source-port reuse through conntrack").
		// (The range is under ipv4 but applies to IPv6 sockets too.)
		{"ip", "netns", "exec", h.NS, "sh", "-c", "echo 1024 65535 > /proc/sys/net/ipv4/ip_local_port_range"},
	}...)
	for _, s := range steps {
		if _, err := l.run(nil, s[0], s[1:]...); err != nil {
			return fail(err)
		}
	}
	if _, err := b.ovs.Vsctl("add-port", b.Name, h.Veth); err != nil {
		return fail(err)
	}
	if err := l.onClose("port "+h.Veth, func() error {
		_, err := b.ovs.Vsctl("--if-exists", "del-port", b.Name, h.Veth)
		return err
	}); err != nil {
		return fail(err)
	}
	err = Poll(DaemonTimeout, func() error {
		out, err := b.ovs.Vsctl("get", "Interface", h.Veth, "ofport")
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(out, 10, 32)
		if err != nil || n <= 0 {
			return fmt.Errorf("ofport of %s is %q", h.Veth, out)
		}
		h.OFPort = uint32(n)
		return nil
	})
	if err != nil {
		return fail(err)
	}
	l.Log.Info("host", "name", name, "ns", h.NS, "ip", ip.String(), "mac", h.MAC.String(), "ofport", h.OFPort)
	return h, nil
}

// Addr is the host's address (IPv4 or IPv6) without the prefix length.
func (h *Host) Addr() netip.Addr { return h.IP.Addr() }

// Command returns a command that runs inside the host's namespace
// (`ip netns exec NS NAME ARGS...`; ip execs, so the PID is the program's).
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Run runs a command in the namespace and returns its combined output; the
// error names the host and the command.
func (h *Host) Run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("host %s: %s %s: %w: %s", h.Name, name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// deleteNetns kills what is still running inside a namespace the lab
// created (only such processes can be in it), then deletes it.
func deleteNetns(l *Lab, ns string) error {
	if _, err := os.Stat("/run/netns/" + ns); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if out, err := l.run(nil, "ip", "netns", "pids", ns); err == nil {
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					l.Log.Warn("killing leftover process in namespace", "ns", ns, "pid", pid)
					_ = p.Kill()
				}
			}
		}
	}
	_, err := l.run(nil, "ip", "netns", "del", ns)
	return err
}

func deleteLink(l *Lab, name string) error {
	if _, err := os.Stat("/sys/class/net/" + name); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_, err := l.run(nil, "ip", "link", "del", name)
	return err
}
