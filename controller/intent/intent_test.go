package intent

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"flowweight/controller/dataplane"
)

func TestChangeString(t *testing.T) {
	cases := []struct {
		c    Change
		want string
	}{
		{Change{Names: []string{"a", "b"}, Before: []uint16{500, 500}, After: []uint16{400, 600}}, "a 500->400, b 500->600"},
		{Change{Names: []string{"a"}, After: []uint16{1000}}, "a 1000"},
		{Change{Names: []string{"a", "b"}, Before: []uint16{1000}, After: []uint16{900, 100}}, "a 1000->900, b 100"},
		{Change{Names: []string{"a", "b"}, After: []uint16{1000}}, "a 1000"},
	}
	for _, c := range cases {
		if got := c.c.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.c, got, c.want)
		}
	}
}

func svc(name string, vip string, dpids []uint64, ips ...string) Service {
	s := Service{Service: dataplane.Service{Name: name, VIP: netip.MustParseAddr(vip), VIPMAC: net.HardwareAddr{2, 0, 0, 0, 0, byte(len(name))}},
		Datapaths: dpids}
	for _, ip := range ips {
		s.Backends = append(s.Backends, dataplane.Backend{Name: ip, IP: netip.MustParseAddr(ip)})
	}
	return s
}

// TestPlacement: a service is planned, answered for and located only on the switches it
// names; an address behind services placed apart is located on all of theirs.
func TestPlacement(t *testing.T) {
	in := (&Intent{Services: []Service{
		svc("everywhere", "10.0.0.100", nil, "10.0.0.1"),
		svc("one", "10.0.0.101", []uint64{1}, "10.0.0.2", "10.0.0.3"),
		svc("two", "10.0.0.102", []uint64{2}, "10.0.0.3"),
	}}).Build()
	cases := []struct {
		dpid     uint64
		services []string
		located  []string
		vips     []string
	}{
		{1, []string{"everywhere", "one"}, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, []string{"10.0.0.100", "10.0.0.101"}},
		{2, []string{"everywhere", "two"}, []string{"10.0.0.1", "10.0.0.3"}, []string{"10.0.0.100", "10.0.0.102"}},
		{3, []string{"everywhere"}, []string{"10.0.0.1"}, []string{"10.0.0.100"}},
	}
	for _, c := range cases {
		var names []string
		for _, s := range in.On(c.dpid) {
			names = append(names, s.Name)
		}
		if !slices.Equal(names, c.services) {
			t.Errorf("switch %d: services %v, want %v", c.dpid, names, c.services)
		}
		var ips []string
		for _, tg := range in.ARP(c.dpid) {
			ips = append(ips, tg.IP.String())
		}
		slices.Sort(ips)
		if !slices.Equal(ips, c.located) {
			t.Errorf("switch %d: locates %v, want %v", c.dpid, ips, c.located)
		}
		for _, vip := range []string{"10.0.0.100", "10.0.0.101", "10.0.0.102"} {
			_, ok := in.VIPMAC(c.dpid, netip.MustParseAddr(vip))
			if want := slices.Contains(c.vips, vip); ok != want {
				t.Errorf("switch %d: answers ARP for %s: %v, want %v", c.dpid, vip, ok, want)
			}
		}
	}
}
