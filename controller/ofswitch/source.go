package ofswitch

import (
	"net"
	"net/netip"
)

// sourceKey is the peer's source for per-source budgets (handshakes, log lines): its IPv4
// address, or the /64 of its IPv6 address, since one IPv6 host is routinely given a whole
// /64 and could otherwise present itself as any number of sources. "" for peers that are
// not IP (a Unix socket: local, guarded by file permissions), which only the global budgets
// bound.
func sourceKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok || ta == nil {
		return ""
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return ""
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return ""
	}
	return p.String()
}
