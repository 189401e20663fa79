package switchsync

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
)

// web is one service of two backends with pinned locations, at weights w, placed on dpids
// (nil: everywhere).
func web(name string, group uint32, dpids []uint64, w ...uint16) intent.Service {
	s := intent.Service{Service: dataplane.Service{Name: name, Index: uint16(group), VIP: netip.AddrFrom4([4]byte{10, 0, byte(group), 100}),
		VIPMAC: net.HardwareAddr{2, 0, 0, 0, 1, byte(group)}, Protocol: "tcp", Port: 80, GroupID: group, Zone: uint16(group)},
		Datapaths: dpids}
	for j, weight := range w {
		s.Backends = append(s.Backends, dataplane.Backend{Name: string(rune('a' + j)), Index: uint16(j),
			IP: netip.AddrFrom4([4]byte{10, 0, byte(group), byte(j + 1)}), Weight: weight})
	}
	return s
}

func locateAll(ip netip.Addr) (dataplane.Location, bool) {
	b := ip.As4()
	return dataplane.Location{MAC: net.HardwareAddr{2, 0, 0, b[2], 0, b[3]}, Port: uint32(b[3])}, true
}

func groupIDs(st dataplane.State) []uint32 {
	var out []uint32
	for _, g := range st.Groups {
		out = append(out, g.ID)
	}
	slices.Sort(out)
	return out
}

func TestDesiredPlacesAndLocates(t *testing.T) {
	in := (&intent.Intent{Normal: true, Services: []intent.Service{
		web("all", 1, nil, 500, 500), web("one", 2, []uint64{1}, 300, 700)}}).Build()
	cases := []struct {
		dpid   uint64
		locate Locator
		groups []uint32
	}{
		{1, locateAll, []uint32{1, 2}},
		{2, locateAll, []uint32{1}},
		{1, nil, []uint32{1, 2}}, // groups exist, without buckets: nobody located
	}
	for _, c := range cases {
		st, svcs := Desired(in, c.dpid, dataplane.OVSVersion{}, c.locate)
		if got := groupIDs(st); !slices.Equal(got, c.groups) {
			t.Errorf("switch %d: groups %v, want %v", c.dpid, got, c.groups)
		}
		for _, s := range svcs {
			for _, b := range s.Backends {
				if located := b.MAC != nil && b.SwitchPort != 0; located != (c.locate != nil) {
					t.Errorf("switch %d: backend %s/%s located %v", c.dpid, s.Name, b.Name, located)
				}
			}
		}
	}
	// The intent is shared by every syncer: planning must not write into it.
	for _, s := range in.Services {
		for _, b := range s.Backends {
			if b.MAC != nil || b.SwitchPort != 0 {
				t.Fatalf("Desired wrote a location into the intent: %+v", b)
			}
		}
	}
}

// TestHoldKeepsTheSwitchsSlotFlows: a held UDP service hashed per flow keeps the slot flows
// the switch holds (its group is unused), and nothing is rewritten or deleted; a service not
// held, or a cold start, gets the planned ones.
func TestHoldKeepsTheSwitchsSlotFlows(t *testing.T) {
	v31 := dataplane.OVSVersion{Major: 3, Minor: 1}
	dns := func(held bool, w ...uint16) *intent.Intent {
		s := web("dns", 5, nil, w...)
		s.Protocol, s.Held = "udp", held
		return (&intent.Intent{Services: []intent.Service{s}}).Build()
	}
	onSwitch, _ := Desired(dns(false, 300, 700), 1, v31, locateAll)
	slots := func(st dataplane.State) map[uint16]int {
		out := map[uint16]int{}
		for _, f := range st.Flows {
			if _, b, k, _ := dataplane.ParseCookie(f.Cookie); k == dataplane.KindUDPSlot {
				out[b]++
			}
		}
		return out
	}
	// Restarted and held: no weights yet, so the plan has no slot flows at all.
	in := dns(true, 0, 0)
	desired, _ := Desired(in, 1, v31, locateAll)
	if n := len(slots(desired)); n != 0 {
		t.Fatalf("a plan at weight 0 has slot flows for %d backends", n)
	}
	got := Hold(desired, onSwitch, in)
	if want := slots(onSwitch); fmt.Sprint(slots(got)) != fmt.Sprint(want) {
		t.Errorf("held: slot flows %v, want the switch's %v", slots(got), want)
	}
	for _, st := range dataplane.Plan(dataplane.KeepSlots(got, onSwitch), onSwitch) {
		for _, m := range st {
			if strings.Contains(m.Desc, "udp-slot") {
				t.Errorf("held: %s", m.Desc)
			}
		}
	}
	if got := Hold(desired, dataplane.State{}, in); len(slots(got)) != 0 {
		t.Errorf("held, cold start: slot flows %v from nowhere", slots(got))
	}
	free := dns(false, 500, 500)
	planned, _ := Desired(free, 1, v31, locateAll)
	if got := Hold(planned, onSwitch, free); fmt.Sprint(slots(got)) != fmt.Sprint(slots(planned)) {
		t.Errorf("not held: slot flows %v, want the planned %v", slots(got), slots(planned))
	}
}

func TestHoldKeepsTheSwitchsGroup(t *testing.T) {
	onSwitch := dataplane.Group{ID: 5, Buckets: []dataplane.Bucket{{Weight: 700, Actions: "x"}, {Weight: 300, Actions: "y"}}}
	desired := dataplane.State{Groups: []dataplane.Group{{ID: 5, Buckets: []dataplane.Bucket{{Weight: 1000, Actions: "x"}}}}}
	cases := []struct {
		name    string
		held    bool
		current dataplane.State
		want    dataplane.Group
	}{
		{"held: the switch's group stays", true, dataplane.State{Groups: []dataplane.Group{onSwitch}}, onSwitch},
		{"held, cold start: nothing to hold", true, dataplane.State{}, desired.Groups[0]},
		{"not held", false, dataplane.State{Groups: []dataplane.Group{onSwitch}}, desired.Groups[0]},
	}
	for _, c := range cases {
		s := web("web", 5, nil, 1000)
		s.Held = c.held
		in := (&intent.Intent{Services: []intent.Service{s}}).Build()
		if got := Hold(desired, c.current, in); !got.Groups[0].Equal(c.want) {
			t.Errorf("%s: group %v, want %v", c.name, got.Groups[0], c.want)
		}
	}
}

// TestSeedsReadTheHeldWeights: the weights a switch holds for a held service's group come
// back by name, in config order, only for services that want them.
func TestSeedsReadTheHeldWeights(t *testing.T) {
	running := (&intent.Intent{Services: []intent.Service{web("web", 5, nil, 250, 750), web("other", 6, nil, 500, 500)}}).Build()
	onSwitch, _ := Desired(running, 1, dataplane.OVSVersion{Major: 3, Minor: 1}, locateAll)

	restarted := web("web", 5, nil, 0, 0)
	restarted.Held, restarted.WantSeed = true, true
	in := (&intent.Intent{Services: []intent.Service{restarted, web("other", 6, nil, 0, 0)}}).Build()
	_, svcs := Desired(in, 1, dataplane.OVSVersion{}, locateAll)
	seeds := Seeds(in, 1, svcs, onSwitch)
	if len(seeds) != 1 {
		t.Fatalf("seeds %v, want web's only", seeds)
	}
	w := seeds["web"]
	if len(w) != 2 || w[0]+w[1] == 0 || float64(w[0])/float64(w[0]+w[1]) < 0.24 || float64(w[0])/float64(w[0]+w[1]) > 0.26 {
		t.Fatalf("seed %v, want the shares 1:3", w)
	}
	if got := Seeds(in, 1, svcs, dataplane.State{}); len(got) != 0 {
		t.Errorf("seeds from an empty switch: %v", got)
	}
	// A canary switch of web holds the shadow policy's weights: no seed of web from it.
	in.Services[0].Canary = []uint64{1}
	if got := Seeds(in, 1, svcs, onSwitch); len(got) != 0 {
		t.Errorf("seeds from web's canary switch: %v", got)
	}
	if got := Seeds(in, 2, svcs, onSwitch); len(got["web"]) != 2 {
		t.Errorf("seeds from a switch that is not web's canary: %v", got)
	}
}

// TestLocatedCanary: a canary switch of a service plans its backends at the shadow policy's
// weights, every other switch at the live ones; a backend out of service stays at 0 there
// too; before the shadow policy's first result the canary holds the live weights.
func TestLocatedCanary(t *testing.T) {
	s := web("web", 5, nil, 250, 750)
	s.Canary, s.CanaryWeights = []uint64{2}, []uint16{500, 500}
	in := (&intent.Intent{Services: []intent.Service{s}}).Build()
	weightsOn := func(in *intent.Intent, dpid uint64) []uint16 {
		var out []uint16
		for _, b := range Located(in, dpid, locateAll)[0].Backends {
			out = append(out, b.Weight)
		}
		return out
	}
	for _, c := range []struct {
		dpid uint64
		want []uint16
	}{{1, []uint16{250, 750}}, {2, []uint16{500, 500}}, {3, []uint16{250, 750}}} {
		if got := weightsOn(in, c.dpid); !slices.Equal(got, c.want) {
			t.Errorf("switch %d: weights %v, want %v", c.dpid, got, c.want)
		}
	}
	out := web("web", 5, nil, 0, 750)
	out.Backends[0].OutOfService = true
	out.Canary, out.CanaryWeights = []uint64{2}, []uint16{500, 500}
	if got := weightsOn((&intent.Intent{Services: []intent.Service{out}}).Build(), 2); !slices.Equal(got, []uint16{0, 500}) {
		t.Errorf("canary with a backend out of service: %v, want [0 500]", got)
	}
	early := web("web", 5, nil, 250, 750)
	early.Canary = []uint64{2}
	if got := weightsOn((&intent.Intent{Services: []intent.Service{early}}).Build(), 2); !slices.Equal(got, []uint16{250, 750}) {
		t.Errorf("canary before the shadow's first result: %v, want the live [250 750]", got)
	}
}

func TestRates(t *testing.T) {
	cases := []struct {
		name      string
		prev, cur Counts
		want      map[uint64]float64
	}{
		{"first read", Counts{}, Counts{At: 1e9, Bytes: map[uint64]uint64{1: 100}}, nil},
		{"one second", Counts{At: 1e9, Bytes: map[uint64]uint64{1: 100, 2: 5}}, Counts{At: 2e9, Bytes: map[uint64]uint64{1: 1100, 2: 5}},
			map[uint64]float64{1: 1000, 2: 0}},
		{"half a second", Counts{At: 1e9, Bytes: map[uint64]uint64{1: 0}}, Counts{At: 15e8, Bytes: map[uint64]uint64{1: 100}},
			map[uint64]float64{1: 200}},
		{"a counter went back (flow re-added) or is new", Counts{At: 1e9, Bytes: map[uint64]uint64{1: 500}},
			Counts{At: 2e9, Bytes: map[uint64]uint64{1: 10, 3: 7}}, map[uint64]float64{}},
		{"clock did not move", Counts{At: 1e9, Bytes: map[uint64]uint64{1: 0}}, Counts{At: 1e9, Bytes: map[uint64]uint64{1: 9}}, nil},
	}
	for _, c := range cases {
		got := Rates(c.prev, c.cur)
		if (got == nil) != (c.want == nil) || !maps.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestNotesLoggedWhenTheyAppear: a backend lifted to one slot is logged once while it stays
// lifted (its figures may move), and again when it becomes lifted anew; a fleet of switches
// with the same table logs it once, not once per switch.
func TestNotesLoggedWhenTheyAppear(t *testing.T) {
	var logs strings.Builder
	n := NewNotes(slog.New(slog.NewTextHandler(&logs, nil)))
	count := func() int { return strings.Count(logs.String(), "realised split differs") }
	opt := dataplane.Options{OVS: dataplane.OVSVersion{Major: 3, Minor: 1}}
	steps := []struct {
		w        []uint16
		switches int
		want     int
	}{
		{[]uint16{999, 1}, 3, 1},
		{[]uint16{999, 1}, 1, 1},   // same condition: not again
		{[]uint16{1998, 1}, 1, 1},  // still lifted, other figures: not again
		{[]uint16{500, 500}, 1, 1}, // cleared
		{[]uint16{999, 1}, 2, 2},   // lifted anew: logged
	}
	for i, s := range steps {
		in := (&intent.Intent{Services: []intent.Service{web("web", 5, nil, s.w...)}}).Build()
		for dpid := range s.switches {
			_, svcs := Desired(in, uint64(dpid+1), opt.OVS, locateAll)
			n.Note(svcs, opt)
		}
		if got := count(); got != s.want {
			t.Fatalf("step %d (weights %v): %d notes logged, want %d:\n%s", i, s.w, got, s.want, logs.String())
		}
	}
	if !strings.Contains(logs.String(), `backend \"b\"`) {
		t.Errorf("the note does not name the backend:\n%s", logs.String())
	}
	n.Forget(map[string]bool{})
	if len(n.noted) != 0 {
		t.Errorf("notes of removed services kept: %v", n.noted)
	}
}

// TestThroughputSumsFreshRates: rates are summed over the switches by cookie; a switch's
// rates older than the bound, or never read, count for nothing.
func TestThroughputSumsFreshRates(t *testing.T) {
	now := time.Unix(1e9, 0)
	got := Throughput([]*Status{
		{DPID: 1, Rates: map[uint64]float64{7: 100, 8: 5}, RatesAt: now.Add(-time.Second)},
		{DPID: 2, Rates: map[uint64]float64{7: 50}, RatesAt: now},
		{DPID: 3, Rates: map[uint64]float64{7: 1000}, RatesAt: now.Add(-3 * time.Second)}, // stale
		{DPID: 4, Rates: map[uint64]float64{7: 1000}},                                     // never read
	}, now, 2*time.Second)
	if want := map[uint64]float64{7: 150, 8: 5}; !maps.Equal(got, want) {
		t.Errorf("Throughput = %v, want %v", got, want)
	}
}
