package httphost

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Host is a parsed Host value: either Addr (an IP literal) or Name (a lower-case DNS name),
// and Port, 0 when the value had none.
type Host struct {
	Name string
	Addr netip.Addr
	Port uint16
}

// String writes h back as a Host value ([v6] in brackets).
func (h Host) String() string {
	s := h.Name
	if h.Addr.IsValid() {
		s = h.Addr.String()
		if h.Addr.Is6() {
			s = "[" + s + "]"
		}
	}
	if h.Port != 0 {
		s += ":" + strconv.Itoa(int(h.Port))
	}
	return s
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// maxLen bounds a Host value: a DNS name is at most 253 bytes, plus brackets and a port.
const maxLen = 262

// Parse parses s as "name", "name:port", "IPv4", "IPv4:port", "[IPv6]" or "[IPv6]:port".
// Names are folded to lower case (DNS is case-insensitive) and must be DNS labels: no
// wildcards, no trailing dot, no underscores, no percent-encoding. A port is 1-65535 in
// decimal without leading zeros. IPv4 must be dotted-quad (no "127.1", no hex), IPv6 must be
// in brackets and have no zone. Anything else is an error, which does not repeat s.
func Parse(s string) (Host, error) {
	var h Host
	if s == "" {
		return h, errors.New("empty")
	}
	if len(s) > maxLen {
		return h, fmt.Errorf("longer than %d bytes", maxLen)
	}
	name, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return h, errors.New("no ] after [")
		}
		name, port = s[1:end], s[end+1:]
		if port != "" {
			var ok bool
			if port, ok = strings.CutPrefix(port, ":"); !ok {
				return h, errors.New("text after ]")
			}
			if port == "" {
				return h, errors.New("empty port")
			}
		}
		a, err := netip.ParseAddr(name)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return h, errors.New("brackets hold no IPv6 address (without a zone)")
		}
		h.Addr = a
	} else {
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			name, port = s[:i], s[i+1:]
			if port == "" {
				return h, errors.New("empty port")
			}
		}
		if strings.ContainsAny(name, ":[]") {
			return h, errors.New("an IPv6 address goes in brackets")
		}
		if a, err := netip.ParseAddr(name); err == nil {
			h.Addr = a
		} else {
			name = strings.ToLower(name)
			if len(name) > 253 {
				return h, errors.New("name longer than 253 bytes")
			}
			for _, l := range strings.Split(name, ".") {
				if !labelRE.MatchString(l) {
					return h, errors.New("not a DNS name (labels of a-z 0-9 -, 1-63 bytes; no wildcards, no trailing dot)")
				}
			}
			if isNumeric(name) {
				return h, errors.New("looks like an IP address but is not dotted-quad")
			}
			h.Name = name
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
			return h, errors.New("port not a number in 1-65535")
		}
		h.Port = uint16(n)
	}
	return h, nil
}

// isNumeric: a name whose last label is all digits ("127.1", "2130706433") is an IP
// address to some resolvers; it never is a name worth serving.
func isNumeric(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	return strings.Trim(last, "0123456789") == ""
}
