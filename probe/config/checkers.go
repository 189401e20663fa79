package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseCheckers reads agent_check.checkers, the addresses HAProxy checks from: each an IP
// address ("10.0.0.5", "::1") or a prefix ("10.0.0.0/29"). Errors name the entry by index.
func ParseCheckers(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			p, err = netip.ParsePrefix(s)
			if err == nil && p != p.Masked() {
				err = fmt.Errorf("has host bits set (the prefix is %s)", p.Masked())
			}
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil {
				if a.Zone() != "" {
					err = fmt.Errorf("has a zone; give the address alone")
				} else {
					a = a.Unmap()
					p = netip.PrefixFrom(a, a.BitLen())
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("[%d] %q: want an IP address or prefix: %v", i, s, err)
		}
		out = append(out, p)
	}
	return out, nil
}
