package dataplane

import (
	"net"
	"net/netip"
	"testing"
)

func TestLocationsFromReadBack(t *testing.T) {
	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	svc := func(mode Mode, vip string, group uint32) Service {
		return Service{Name: string(mode), Index: uint16(group), VIP: netip.MustParseAddr(vip), VIPMAC: mac("02:77:0a:00:00:64"),
			Protocol: "tcp", Port: 80, Mode: mode, GroupID: group, Zone: uint16(group),
			Backends: []Backend{
				{Name: "a", Index: 0, IP: netip.MustParseAddr("10.0.0.1"), Port: 8080, MAC: mac("02:00:00:00:00:01"), SwitchPort: 3, Weight: 600},
				{Name: "b", Index: 1, IP: netip.MustParseAddr("10.0.0.2"), Port: 8080, MAC: mac("02:00:00:00:00:02"), SwitchPort: 4, Weight: 0},
			}}
	}
	for _, mode := range []Mode{ModeConntrack, ModeStateless} {
		t.Run(string(mode), func(t *testing.T) {
			s := svc(mode, "10.0.0.100", 1)
			// Through the switch's own encoding: apply the plan to the fake switch, read it back.
			fs := NewFakeSwitch()
			if err := fs.ApplyPlan(Plan(Desired([]Service{s}, DefaultOptions()), State{})); err != nil {
				t.Fatal(err)
			}
			got := Locations(fs.State())
			a := got[netip.MustParseAddr("10.0.0.1")]
			if a.MAC.String() != "02:00:00:00:00:01" || a.Port != 3 {
				t.Fatalf("a located at %v port %d; all: %v", a.MAC, a.Port, got)
			}
			b, ok := got[netip.MustParseAddr("10.0.0.2")]
			if mode == ModeConntrack && (!ok || b.Port != 4) {
				// weight 0 keeps its forwarding flow in conntrack mode (draining connections)
				t.Fatalf("b (weight 0) not located in conntrack mode: %v", got)
			}
			if mode == ModeStateless && ok {
				t.Fatalf("b has no bucket in stateless mode, yet located: %v", b)
			}
		})
	}
	if n := len(Locations(State{})); n != 0 {
		t.Fatalf("empty state located %d hosts", n)
	}
}

func FuzzLocations(f *testing.F) {
	f.Add([]byte{0x80, 0x00, 0x18, 0x04, 10, 0, 0, 1}, []byte{0, 4, 0, 24, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 3, 0xff, 0xff, 0, 0, 0, 0, 0, 0}, []byte{})
	f.Fuzz(func(t *testing.T, match, instr, actions []byte) {
		s := State{
			Flows:  []Flow{{Table: TableForward, Cookie: MakeCookie(1, 1, KindForward), Match: string(match), Instructions: string(instr)}},
			Groups: []Group{{ID: 1, Buckets: []Bucket{{Weight: 1, Actions: string(actions)}}}},
		}
		for ip, loc := range Locations(s) {
			if !(ip.Is4() || ip.Is6()) || len(loc.MAC) != 6 || loc.Port == 0 {
				t.Fatalf("implausible location %v %+v", ip, loc)
			}
		}
	})
}
