package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"flowweight/configs"
)

// HA is the optional [ha] section: controllers elect a leader on etcd, and only the leader
// writes to the switches (docs/ha.md). Without the section nothing of it runs.
type HA struct {
	// Etcd lists the etcd client URLs, "http://host:port" or "https://host:port". Required.
	Etcd []string `toml:"etcd"`
	// Name is this controller's id in the election: unique among the controllers of one
	// prefix. Default: the host name.
	Name string `toml:"name"`
	// Prefix is the etcd key prefix the controllers of one pool share; default "/flowweight".
	Prefix string `toml:"prefix"`
	// Lease is the election lease's TTL, whole seconds in [1s,60s]; default "2s". A dead
	// leader is replaced about one lease (plus etcd's 0.5 s expiry check) after it died; etcd
	// raises a TTL below its own minimum (1.5 × its election timeout, rounded up).
	Lease time.Duration `toml:"lease"`
	// DialTimeout bounds connecting to etcd and each request; default "2s".
	DialTimeout time.Duration `toml:"dial_timeout"`
	// TLSCA, TLSCert, TLSKey: TLS to etcd (https endpoints). The CA verifies etcd's
	// certificate (default: the system roots); cert and key, given together, are this
	// controller's client certificate.
	TLSCA   string `toml:"tls_ca"`
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// Username and PasswordFile: etcd authentication (optional, together).
	Username     string `toml:"username"`
	PasswordFile string `toml:"password_file"`
}

// Defaults of the [ha] section.
const (
	DefaultHAPrefix      = "/flowweight"
	DefaultHALease       = 2 * time.Second
	DefaultHADialTimeout = 2 * time.Second
	MaxHAEndpoints       = 16
)

func (h *HA) fill() {
	if h.Name == "" {
		if n, err := os.Hostname(); err == nil {
			h.Name = n
		}
	}
	if h.Prefix == "" {
		h.Prefix = DefaultHAPrefix
	}
	if h.Lease == 0 {
		h.Lease = DefaultHALease
	}
	if h.DialTimeout == 0 {
		h.DialTimeout = DefaultHADialTimeout
	}
}

func (h *HA) validate(p *configs.Problems) {
	if len(h.Etcd) == 0 {
		p.Addf("ha.etcd", "required: the etcd client URLs, e.g. [\"http://127.0.0.1:2379\"] (remove the [ha] section to run one controller without etcd)")
	}
	if len(h.Etcd) > MaxHAEndpoints {
		p.Addf("ha.etcd", "%d endpoints, at most %d", len(h.Etcd), MaxHAEndpoints)
	}
	seen := map[string]int{}
	https := false
	for i, e := range h.Etcd {
		key := fmt.Sprintf("ha.etcd[%d]", i)
		scheme, err := checkEtcdURL(e)
		if err != nil {
			p.Addf(key, "%q: %v", e, err)
			continue
		}
		if scheme == "https" {
			https = true
		} else if https || (i > 0 && strings.HasPrefix(h.Etcd[0], "https")) {
			p.Addf(key, "%q: mixes http and https endpoints; use one scheme", e)
		}
		if j, dup := seen[e]; dup {
			p.Addf(key, "%q: same as ha.etcd[%d]", e, j)
		}
		seen[e] = i
	}
	if !ValidName(h.Name) {
		p.Addf("ha.name", "%q must be 1-64 characters of A-Z a-z 0-9 . _ - (default: the host name)", h.Name)
	}
	if !strings.HasPrefix(h.Prefix, "/") || strings.HasSuffix(h.Prefix, "/") || len(h.Prefix) > 128 ||
		strings.ContainsAny(h.Prefix, " \t\r\n") || strings.Contains(h.Prefix, "//") {
		p.Addf("ha.prefix", "%q: an etcd key prefix starts with /, does not end with /, has no blanks or //, at most 128 bytes", h.Prefix)
	}
	switch {
	case h.Lease < time.Second || h.Lease > time.Minute:
		p.Addf("ha.lease", "%v outside [1s,1m]", h.Lease)
	case h.Lease%time.Second != 0:
		p.Addf("ha.lease", "%v: etcd leases are whole seconds", h.Lease)
	}
	p.Duration("ha.dial_timeout", h.DialTimeout, 100*time.Millisecond, time.Minute)
	if (h.TLSCert == "") != (h.TLSKey == "") {
		p.Addf("ha.tls_cert", "tls_cert and tls_key must be given together")
	}
	if !https && (h.TLSCA != "" || h.TLSCert != "") && len(h.Etcd) > 0 {
		p.Addf("ha.tls_ca", "TLS files are set but the etcd endpoints are http://; use https:// endpoints")
	}
	if (h.Username == "") != (h.PasswordFile == "") {
		p.Addf("ha.username", "username and password_file must be given together")
	}
}

// checkEtcdURL accepts http(s)://host:port with nothing else, and returns the scheme.
func checkEtcdURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		return "", fmt.Errorf("no scheme: want http://host:port or https://host:port")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("scheme %q: want http:// or https://", u.Scheme)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("want only scheme://host:port")
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", fmt.Errorf("want host:port after the scheme: %v", err)
	}
	if host == "" {
		return "", fmt.Errorf("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not in [1,65535]", port)
	}
	return u.Scheme, nil
}

// Fingerprint identifies what the controllers of one pool must agree on: the services and the
// weighting. Two controllers whose fingerprints differ would write different groups, so the
// election refuses to let one take over from the other (docs/ha.md).
func (c *Config) Fingerprint() string {
	// Paths and SNMP credentials may differ from host to host and say nothing of what is
	// written to a switch; they are left out (and secrets never go into etcd, even hashed).
	svcs := make([]Service, len(c.Services))
	for i, s := range c.Services {
		s.Backends = append([]Backend(nil), s.Backends...)
		for j := range s.Backends {
			s.Backends[j].KeyFile, s.Backends[j].SNMP = "", nil
		}
		svcs[i] = s
	}
	data, err := json.Marshal(struct {
		Services  []Service
		Weighting any
	}{svcs, c.Weighting})
	if err != nil {
		return "unencodable: " + err.Error()
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// HAWarnings says what [ha] cannot be sure of with this configuration; the controller logs
// them at start and -check-config prints them. Each names the key and says how to fix it.
//
// With several controllers, a switch's word decides nothing about who leads (the election
// does), but without certificates that name the datapath, anyone who can connect to the
// OpenFlow port can be a switch: claim an unused datapath id, contest the leader's role on
// it (counted, and checked against etcd, never obeyed) and be programmed with the services'
// flows. Valid only after Validate.
func (c *Config) HAWarnings() []string {
	if c.HA == nil || (c.Controller.TLSCA != "" && c.Controller.TLSNamesDPID) {
		return nil
	}
	who := "anyone who can connect to " + c.Controller.Listen
	if strings.HasPrefix(c.Controller.Listen, "unix:") {
		who = "any local process that can open the socket " + strings.TrimPrefix(c.Controller.Listen, "unix:")
	}
	return []string{fmt.Sprintf("controller.tls_names_dpid: [ha] is enabled but switches are not authenticated: %s can claim to be a switch, "+
		"tell the leader another controller is master on it (the claim is only checked against etcd) and take a share of the start-up "+
		"weights decision; to make HA safe, serve TLS (tls_cert, tls_key), verify switch certificates (tls_ca) and set tls_names_dpid = true "+
		"with each switch's certificate naming its datapath id (docs/ha.md, \"What HA needs to be safe\")", who)}
}
