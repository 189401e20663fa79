package snmp

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gosnmp/gosnmp"
)

// Target says how to reach one backend's SNMP agent and what to count there.
type Target struct {
	// Address is the agent's UDP host:port, e.g. "127.0.0.1:161".
	Address string
	// Version is "v2c" or "v3". v3 is always authPriv: the point of using
	// v3 at all is that nobody on the path can read or forge the answers.
	Version string
	// Community is the v2c community string.
	Community string
	// User is the v3 USM user name.
	User string
	// AuthProtocol is "SHA" (HMAC-SHA-96), "SHA224", "SHA256", "SHA384" or
	// "SHA512". MD5 is refused on purpose.
	AuthProtocol string
	// AuthPassphrase is the v3 authentication passphrase, at least 8 bytes
	// (RFC 3414; net-snmp refuses shorter ones).
	AuthPassphrase string
	// PrivProtocol is "AES" (AES-128-CFB), "AES192" or "AES256" (Blumenthal
	// key extension, as net-snmp does it). DES is refused on purpose.
	PrivProtocol string
	// PrivPassphrase is the v3 privacy passphrase, at least 8 bytes.
	PrivPassphrase string
	// Timeout is how long one request waits for its answer; must be > 0.
	// A poll against an agent that never answers fails after at most
	// Timeout*(Retries+1).
	Timeout time.Duration
	// Retries is how many times a request is resent after a timeout; >= 0.
	Retries int
	// ServicePorts are the local TCP ports whose established connections
	// are counted (from tcpConnTable). Empty means all ports
	// (tcpCurrEstab), which also counts the SNMP-unrelated connections of
	// the host.
	ServicePorts []uint16
	// MaxConnRows bounds each walk of a TCP connection table: a walk that
	// would return more rows stops and the poll fails (ErrTooManyRows)
	// rather than the poller holding an agent's arbitrarily long answer in
	// memory. 0 means DefaultMaxConnRows.
	MaxConnRows int
	// MaxWalkBytes bounds each walk of a TCP connection table in bytes
	// (VarbindBytes: the text of OIDs and values): rows alone do not bound
	// memory. More is ErrTooLarge. 0 means DefaultMaxWalkBytes.
	MaxWalkBytes int
}

// Validate reports every problem with t at once; each error names the field.
func (t Target) Validate() error {
	var errs []error
	if _, _, err := splitAddress(t.Address); err != nil {
		errs = append(errs, err)
	}
	switch t.Version {
	case "v2c":
		if t.Community == "" {
			errs = append(errs, errors.New("snmp target: Community must not be empty for Version v2c"))
		}
	case "v3":
		if t.User == "" {
			errs = append(errs, errors.New("snmp target: User must not be empty for Version v3"))
		}
		if _, err := authProtocol(t.AuthProtocol); err != nil {
			errs = append(errs, err)
		}
		if _, err := privProtocol(t.PrivProtocol); err != nil {
			errs = append(errs, err)
		}
		if len(t.AuthPassphrase) < 8 {
			errs = append(errs, fmt.Errorf("snmp target: AuthPassphrase must be at least 8 bytes, has %d", len(t.AuthPassphrase)))
		}
		if len(t.PrivPassphrase) < 8 {
			errs = append(errs, fmt.Errorf("snmp target: PrivPassphrase must be at least 8 bytes, has %d", len(t.PrivPassphrase)))
		}
	default:
		errs = append(errs, fmt.Errorf("snmp target: Version %q must be \"v2c\" or \"v3\"", t.Version))
	}
	if t.MaxConnRows < 0 {
		errs = append(errs, fmt.Errorf("snmp target: MaxConnRows %d must be >= 0 (0: %d)", t.MaxConnRows, DefaultMaxConnRows))
	}
	if t.MaxWalkBytes < 0 {
		errs = append(errs, fmt.Errorf("snmp target: MaxWalkBytes %d must be >= 0 (0: %d)", t.MaxWalkBytes, DefaultMaxWalkBytes))
	}
	if t.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("snmp target: Timeout %v must be > 0", t.Timeout))
	}
	if t.Retries < 0 {
		errs = append(errs, fmt.Errorf("snmp target: Retries %d must be >= 0", t.Retries))
	}
	for i, p := range t.ServicePorts {
		if p == 0 {
			errs = append(errs, fmt.Errorf("snmp target: ServicePorts[%d] must not be 0", i))
		}
	}
	return errors.Join(errs...)
}

// splitAddress parses Address into host and a non-zero port.
func splitAddress(addr string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("snmp target: Address %q must be host:port: %w", addr, err)
	}
	if host == "" {
		return "", 0, fmt.Errorf("snmp target: Address %q has no host", addr)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("snmp target: Address %q port must be 1-65535", addr)
	}
	return host, uint16(n), nil
}

func authProtocol(s string) (gosnmp.SnmpV3AuthProtocol, error) {
	switch strings.ToUpper(s) {
	case "SHA":
		return gosnmp.SHA, nil
	case "SHA224":
		return gosnmp.SHA224, nil
	case "SHA256":
		return gosnmp.SHA256, nil
	case "SHA384":
		return gosnmp.SHA384, nil
	case "SHA512":
		return gosnmp.SHA512, nil
	}
	return 0, fmt.Errorf("snmp target: AuthProtocol %q must be SHA, SHA224, SHA256, SHA384 or SHA512", s)
}

func privProtocol(s string) (gosnmp.SnmpV3PrivProtocol, error) {
	switch strings.ToUpper(s) {
	case "AES":
		return gosnmp.AES, nil
	case "AES192":
		return gosnmp.AES192, nil
	case "AES256":
		return gosnmp.AES256, nil
	}
	return 0, fmt.Errorf("snmp target: PrivProtocol %q must be AES, AES192 or AES256", s)
}

// session builds an unconnected gosnmp session for a validated target.
func (t Target) session() (*gosnmp.GoSNMP, error) {
	host, port, err := splitAddress(t.Address)
	if err != nil {
		return nil, err
	}
	g := &gosnmp.GoSNMP{
		Target:         host,
		Port:           port,
		Transport:      "udp",
		Timeout:        t.Timeout,
		Retries:        t.Retries,
		MaxOids:        gosnmp.MaxOids,
		MaxRepetitions: 50,
	}
	switch t.Version {
	case "v2c":
		g.Version = gosnmp.Version2c
		g.Community = t.Community
	case "v3":
		ap, err := authProtocol(t.AuthProtocol)
		if err != nil {
			return nil, err
		}
		pp, err := privProtocol(t.PrivProtocol)
		if err != nil {
			return nil, err
		}
		g.Version = gosnmp.Version3
		g.SecurityModel = gosnmp.UserSecurityModel
		g.MsgFlags = gosnmp.AuthPriv
		g.SecurityParameters = &gosnmp.UsmSecurityParameters{
			UserName:                 t.User,
			AuthenticationProtocol:   ap,
			AuthenticationPassphrase: t.AuthPassphrase,
			PrivacyProtocol:          pp,
			PrivacyPassphrase:        t.PrivPassphrase,
		}
	}
	return g, nil
}
