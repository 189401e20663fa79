package config

import (
	"net/netip"
	"testing"
)

// TestParsedOnce: Validate keeps the values it parsed, so the accessors the update loop calls
// every period (for every backend of every service) return them without parsing or allocating,
// and they hold for backends that came from a [[host]] too.
func TestParsedOnce(t *testing.T) {
	c, err := Parse("t.toml", []byte(good+`
[[host]]
name = "h"
ip = "10.0.0.9"
mac = "02:00:00:00:00:09"
[[service]]
name = "db"
vip = "10.0.0.101"
vip_mac = "02:00:00:00:01:01"
port = 5432
group_id = 9
datapaths = ["0x2", "0000000000000001"]
  [[service.backend]]
  host = "h"
`))
	if err != nil {
		t.Fatal(err)
	}
	db := &c.Services[1]
	be := &db.Backends[0]
	checks := []struct {
		name string
		got  any
		want any
		call func()
	}{
		{"ParsedVIP", db.ParsedVIP(), netip.MustParseAddr("10.0.0.101"), func() { db.ParsedVIP() }},
		{"ParsedVIPMAC", db.ParsedVIPMAC().String(), "02:00:00:00:01:01", func() { db.ParsedVIPMAC() }},
		{"ParsedDatapaths", len(db.ParsedDatapaths()), 2, func() { db.ParsedDatapaths() }},
		{"ParsedIP", be.ParsedIP(), netip.MustParseAddr("10.0.0.9"), func() { be.ParsedIP() }},
		{"ParsedMAC", be.ParsedMAC().String(), "02:00:00:00:00:09", func() { be.ParsedMAC() }},
	}
	for _, tc := range checks {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
		if n := testing.AllocsPerRun(100, tc.call); n != 0 {
			t.Errorf("%s allocates %v times per call: it parses again", tc.name, n)
		}
	}
	if got := db.ParsedDatapaths(); got[0] != 2 || got[1] != 1 {
		t.Errorf("datapaths %v, want [2 1] in the file's order", got)
	}
}
