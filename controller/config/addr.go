package config

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"flowweight/configs"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

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
