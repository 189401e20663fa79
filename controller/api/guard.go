package api

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"flowweight/internal/httphost"
)

// hostPolicy says which Host values the API answers to. A DNS rebinding attack makes a
// browser send the attacker's name to our address; names are what it needs, so only names
// the operator listed (and localhost) are served. An IP literal cannot be rebound: the
// listen address's own IPs are served, and with an unspecified listen address (0.0.0.0,
// [::]) any IP literal, since every local address reaches us.
type hostPolicy struct {
	port    uint16      // the listening port; a Host without port means 80
	addr    netip.Addr  // the listen IP; invalid when unspecified (any IP literal)
	allowed []allowHost // api.allowed_hosts
}

type allowHost struct {
	h       httphost.Host
	anyPort bool
}

func newHostPolicy(listen net.Addr, allowed []string) (hostPolicy, error) {
	var p hostPolicy
	var ap netip.AddrPort
	if t, ok := listen.(*net.TCPAddr); ok {
		ap = t.AddrPort()
	} else {
		var err error
		if ap, err = netip.ParseAddrPort(listen.String()); err != nil {
			return p, fmt.Errorf("listen address %s: %v", listen, err)
		}
	}
	p.port = ap.Port()
	if a := ap.Addr().Unmap().WithZone(""); a.IsValid() && !a.IsUnspecified() {
		p.addr = a
	}
	var err error
	p.allowed, err = parseAllowed(allowed)
	return p, err
}

func parseAllowed(list []string) ([]allowHost, error) {
	var out []allowHost
	for i, s := range list {
		h, err := httphost.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("api.allowed_hosts[%d]: %q: %v", i, s, err)
		}
		out = append(out, allowHost{h: h, anyPort: h.Port == 0})
	}
	return out, nil
}

// check returns "" when host is served, else why not.
func (p hostPolicy) check(host string) string {
	if host == "" {
		return "the request has no Host header"
	}
	h, err := httphost.Parse(host)
	if err != nil {
		return fmt.Sprintf("Host %s is not a host name or address (%v)", quote(host), err)
	}
	port := h.Port
	if port == 0 {
		port = 80
	}
	for _, a := range p.allowed {
		if a.h.Name == h.Name && a.h.Addr == h.Addr && (a.anyPort || a.h.Port == port) {
			return ""
		}
	}
	if port == p.port {
		if h.Name == "localhost" {
			return ""
		}
		if h.Addr.IsValid() && (!p.addr.IsValid() || h.Addr.Unmap() == p.addr) {
			return ""
		}
	}
	return fmt.Sprintf("Host %s is not an address or name this API answers to (its listen address, localhost, or api.allowed_hosts); a foreign name is how DNS rebinding reaches a loopback API", quote(h.String()))
}

// crossSite returns "" when a write may proceed, else why not. Browsers send Sec-Fetch-Site
// on every request (modern ones) and Origin on every cross-origin and every POST; curl and
// the controller's own clients send neither and are not browsers that a page can drive.
// "same-site" is refused too: another port on the same host is the same site.
func crossSite(r *http.Request) string {
	if v := r.Header.Values("Sec-Fetch-Site"); len(v) > 0 {
		if len(v) != 1 || (v[0] != "same-origin" && v[0] != "none") {
			return fmt.Sprintf("Sec-Fetch-Site %s: a change must come from this API's own pages (same-origin) or a non-browser client", quote(strings.Join(v, ", ")))
		}
	}
	v := r.Header.Values("Origin")
	if len(v) == 0 {
		return ""
	}
	if len(v) == 1 && sameOrigin(v[0], r.Host) {
		return ""
	}
	return fmt.Sprintf("Origin %s is not this API's origin (http://%s): cross-site requests may not change anything", quote(strings.Join(v, ", ")), r.Host)
}

// sameOrigin: origin is "http://HOST" or "https://HOST" and HOST, parsed, is the request's
// Host. Anything more (a path, a query, user info) fails the parse: browsers send exactly
// scheme://host[:port]. The scheme is not compared: a TLS proxy in front is the same origin
// to the operator, and no other scheme can be served on our host and port.
func sameOrigin(origin, host string) bool {
	scheme, rest, ok := strings.Cut(origin, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return false
	}
	a, err1 := httphost.Parse(rest)
	b, err2 := httphost.Parse(host)
	return err1 == nil && err2 == nil && a == b
}

// quote bounds and escapes a client-supplied value for an error body or log.
func quote(s string) string {
	const max = 120
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
