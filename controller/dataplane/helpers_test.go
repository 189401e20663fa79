package dataplane

import (
	"encoding/hex"
	"net"
	"net/netip"
	"testing"

	"flowweight/controller/ofswitch"
	"flowweight/controller/ofwire"
)

// messageHex frames a planned message as an OpenFlow 1.3 message with the given xid.
func messageHex(t testing.TB, m ofswitch.Message, xid uint32) []byte {
	t.Helper()
	b, err := ofwire.EncodeMessage(m.Type, xid, m.Body)
	if err != nil {
		t.Fatalf("encoding %s: %v", m.Desc, err)
	}
	return b
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// webService is the fixture most tests start from: three backends, one without a learned MAC.
func webService(mode Mode) Service {
	return Service{
		Name: "web", Index: 1, VIP: ip("10.0.0.100"), VIPMAC: mac("02:00:00:00:01:00"),
		Protocol: "tcp", Port: 80, Mode: mode, GroupID: 10, Zone: 7,
		Backends: []Backend{
			{Name: "a", Index: 0, IP: ip("10.0.0.1"), Port: 8080, MAC: mac("02:00:00:00:00:01"), SwitchPort: 1, Weight: 100},
			{Name: "b", Index: 1, IP: ip("10.0.0.2"), MAC: mac("02:00:00:00:00:02"), SwitchPort: 2, Weight: 50},
			{Name: "c", Index: 2, IP: ip("10.0.0.3"), Weight: 30}, // not yet resolved
		},
	}
}
