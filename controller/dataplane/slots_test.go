package dataplane

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"flowweight/controller/ofwire"
	"flowweight/internal/slots"
)

var (
	ovs216 = OVSVersion{Major: 2, Minor: 16, Patch: 0}
	ovs310 = OVSVersion{Major: 3, Minor: 1, Patch: 0}
	ovs316 = OVSVersion{Major: 3, Minor: 1, Patch: 6}
	ovs350 = OVSVersion{Major: 3, Minor: 5, Patch: 0}
)

// liveService is a service with the given weights on reachable backends.
func liveService(mode Mode, w []uint16) Service {
	s := webService(mode)
	s.Backends = nil
	for i, x := range w {
		s.Backends = append(s.Backends, Backend{
			Name: fmt.Sprintf("b%d", i), Index: uint16(i), IP: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}),
			MAC: net.HardwareAddr{2, 0, 0, 1, byte(i >> 8), byte(i)}, SwitchPort: uint32(i + 1), Weight: x,
		})
	}
	return s
}

// checkLayout asserts the exact-share contract on one service: the switch (as modelled) builds
// the table the controller laid out, never falls back, gives every live backend a slot, and
// realises each computed share to within one slot.
func checkLayout(t *testing.T, s Service, opt Options) GroupLayout {
	t.Helper()
	l := Layout(s, opt)
	d := Desired([]Service{s}, opt)
	var g Group
	for _, x := range d.Groups {
		if x.ID == s.GroupID {
			g = x
		}
	}
	tab := slots.OVS(weightsOf(g), opt.OVS)
	if !reflect.DeepEqual(tab, l.Table) {
		t.Fatalf("Layout's table %v differs from the table of Desired's group", l.Table)
	}
	if len(l.Backends) == 0 {
		return l
	}
	if len(l.Backends) == 1 {
		// One bucket takes every slot of whatever table the switch builds.
		if tab.Fallback || tab.NHash == 0 || l.Backends[0].Slots != tab.NHash {
			t.Fatalf("one backend: %d of %d slots (fallback %v)", l.Backends[0].Slots, tab.NHash, tab.Fallback)
		}
		return l
	}
	if tab.Fallback || tab.NHash == 0 || tab.NHash%l.N != 0 {
		t.Fatalf("weights %v on %v: table n=%d fallback=%v, want a multiple of %d slots", weightsOf(g), opt.OVS, tab.NHash, tab.Fallback, l.N)
	}
	w := make([]uint16, len(l.Backends))
	for i, b := range l.Backends {
		w[i] = b.Weight
	}
	want := slots.Apportion(w, l.N)
	for i, b := range l.Backends {
		if b.Slots*l.N != want[i]*tab.NHash {
			t.Errorf("backend %s: %d of %d slots, want %d of %d", b.Name, b.Slots, tab.NHash, want[i], l.N)
		}
		if len(l.Backends) <= l.N && b.Slots == 0 {
			t.Errorf("live backend %s has no slot", b.Name)
		}
		if e := math.Abs(l.Realised(i) - l.Computed(i)); e >= 1/float64(l.N) && len(l.Notes) == 0 {
			t.Errorf("backend %s: realised %.4f computed %.4f: error of a slot or more without a note", b.Name, l.Realised(i), l.Computed(i))
		}
	}
	return l
}

func TestLayoutExact(t *testing.T) {
	vectors := map[string][]uint16{
		"60:40":      {600, 400},
		"70:20:10":   {700, 200, 100},
		"1:2:4":      {143, 286, 571},
		"97:2:1":     {970, 20, 10},
		"1..10":      {18, 36, 55, 73, 91, 109, 127, 145, 164, 182},
		"64 equal":   slices.Repeat([]uint16{16}, 64),
		"one":        {1000},
		"tiny share": {999, 1},
	}
	for name, w := range vectors {
		for _, mode := range []Mode{ModeConntrack, ModeStateless} {
			for _, v := range []OVSVersion{{}, ovs216, ovs310, ovs316, ovs350} {
				t.Run(fmt.Sprintf("%s/%s/%v", name, mode, v), func(t *testing.T) {
					checkLayout(t, liveService(mode, w), Options{OVS: v})
				})
			}
		}
	}
	// 70:20:10 on 3.1.0: the measured example of docs/dataplane.md.
	l := Layout(liveService(ModeConntrack, []uint16{700, 200, 100}), Options{OVS: ovs310})
	if got := weightsOf(Desired([]Service{liveService(ModeConntrack, []uint16{700, 200, 100})}, Options{OVS: ovs310}).Groups[0]); !slices.Equal(got, []uint16{178, 51, 26, 1}) {
		t.Errorf("70:20:10 buckets %v, want [178 51 26 1]", got)
	}
	if l.Backends[0].Slots != 179 || l.Table.NHash != 256 {
		t.Errorf("70:20:10: first backend %d of %d slots, want 179 of 256", l.Backends[0].Slots, l.Table.NHash)
	}
}

func TestLayoutNotes(t *testing.T) {
	l := Layout(liveService(ModeConntrack, []uint16{1000, 1}), Options{OVS: ovs310})
	if len(l.Notes) != 1 || l.Notes[0].Key != "web backend b1 lifted" || !strings.Contains(l.Notes[0].Text, `backend "b1"`) || !strings.Contains(l.Notes[0].Text, "one slot") {
		t.Errorf("notes %q, want one naming b1 lifted to one slot", l.Notes)
	}
	w := slices.Repeat([]uint16{10}, 70)
	w[0] = 100
	l = checkLayout(t, liveService(ModeConntrack, w), Options{})
	if len(l.Notes) != 1 || l.Notes[0].Key != "web starved" || !strings.Contains(l.Notes[0].Text, "70 live backends for 64 slots") {
		t.Errorf("notes %q, want one about 70 backends for 64 slots", l.Notes)
	}
	for _, n := range Layout(liveService(ModeConntrack, []uint16{700, 200, 100}), Options{OVS: ovs310}).Notes {
		t.Errorf("70:20:10 has a note: %s", n.Text)
	}
}

// TestLayoutRandom checks the contract on random weight vectors of 2 to 64 live backends.
func TestLayoutRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		w := make([]uint16, 2+rng.IntN(63))
		for i := range w {
			w[i] = uint16(1 + rng.IntN(1000))
			if rng.IntN(8) == 0 {
				w[i] = uint16(1 + rng.IntN(3))
			}
		}
		for _, mode := range []Mode{ModeConntrack, ModeStateless} {
			for _, v := range []OVSVersion{{}, ovs310, ovs350} {
				checkLayout(t, liveService(mode, w), Options{OVS: v})
			}
			// The 64-slot layout (unknown version) on a switch with the 4·n_buckets term: the
			// table grows by a power of two and every backend's slots scale with it.
			s := liveService(mode, w)
			l := Layout(s, Options{})
			g := Desired([]Service{s}, Options{})
			tab := slots.OVS(weightsOf(g.Groups[0]), ovs350)
			if tab.Fallback || tab.NHash%64 != 0 {
				t.Fatalf("64-slot layout of %v on 3.5.0: %d slots, fallback %v", w, tab.NHash, tab.Fallback)
			}
			per := map[string]int{}
			for i, h := range tab.Hits {
				per[g.Groups[0].Buckets[i].Actions] += h
			}
			for i, a := range distinctActions(g.Groups[0]) {
				if per[a] != l.Backends[i].Slots*tab.NHash/64 {
					t.Fatalf("64-slot layout of %v on 3.5.0: backend %d has %d of %d slots, want %d of 64", w, i, per[a], tab.NHash, l.Backends[i].Slots)
				}
			}
		}
	}
}

func FuzzLayout(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, uint8(0), false)
	f.Add([]byte{255, 255, 0, 1}, uint8(1), true)
	f.Fuzz(func(t *testing.T, raw []byte, ver uint8, stateless bool) {
		var w []uint16
		for i := 0; i+1 < len(raw) && len(w) < 80; i += 2 {
			w = append(w, uint16(raw[i])<<8|uint16(raw[i+1]))
		}
		mode := ModeConntrack
		if stateless {
			mode = ModeStateless
		}
		v := []OVSVersion{{}, ovs216, ovs310, ovs316, ovs350}[int(ver)%5]
		checkLayout(t, liveService(mode, w), Options{OVS: v})
	})
}

// TestKeepSlots: a reweight in stateless mode rewrites exactly the slots that must move.
func TestKeepSlots(t *testing.T) {
	opt := Options{OVS: ovs310}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		k := 2 + rng.IntN(10)
		before, after := make([]uint16, k), make([]uint16, k)
		for i := range k {
			before[i] = uint16(rng.IntN(1000))
			after[i] = uint16(rng.IntN(1000))
		}
		before[0]++
		after[0]++
		sw := NewFakeSwitch()
		d0 := KeepSlots(Desired([]Service{liveService(ModeStateless, before)}, opt), sw.State())
		applyAll(t, sw, Plan(d0, sw.State()))
		held := sw.State()
		d1 := KeepSlots(Desired([]Service{liveService(ModeStateless, after)}, opt), held)
		applyAll(t, sw, Plan(d1, held))
		if !sw.State().Equal(d1) {
			t.Fatal("switch does not hold the kept layout")
		}
		old, now := slots.Apportion(before, 256), slots.Apportion(after, 256)
		minMoves := 0
		for i := range k {
			minMoves += max(0, now[i]-old[i])
		}
		moved := 0
		for i, b := range d1.Groups[0].Buckets {
			if b != held.Groups[0].Buckets[i] {
				moved++
			}
		}
		if moved != minMoves {
			t.Fatalf("%v → %v moved %d slots, want the minimum %d", before, after, moved, minMoves)
		}
		l := Layout(liveService(ModeStateless, after), opt)
		count := map[string]int{}
		for _, b := range d1.Groups[0].Buckets {
			count[b.Actions]++
		}
		for i, a := range distinctActions(Desired([]Service{liveService(ModeStateless, after)}, opt).Groups[0]) {
			if count[a] != l.Backends[i].Slots && l.Backends[i].Slots > 0 {
				t.Fatalf("kept layout gives backend %d %d slots, want %d", i, count[a], l.Backends[i].Slots)
			}
		}
		// Same counts again: nothing to do.
		if again := Plan(KeepSlots(Desired([]Service{liveService(ModeStateless, after)}, opt), sw.State()), sw.State()); len(again) != 0 {
			t.Fatalf("unchanged shares plan %s", describe(again))
		}
	}
}

// TestGroupModSize: the per-slot layout of 256 buckets fits one OpenFlow message in both modes'
// actions, and a backend on another port (longer stateless actions) still fits.
func TestGroupModSize(t *testing.T) {
	for _, mode := range []Mode{ModeConntrack, ModeStateless} {
		s := liveService(mode, slices.Repeat([]uint16{1}, 64))
		for i := range s.Backends {
			s.Backends[i].Port = 8080
		}
		d := Desired([]Service{s}, Options{OVS: ovs310})
		b, err := groupMessage(1, d.Groups[0]).Body.(*ofwire.GroupMod).MarshalBinary()
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		t.Logf("%s: %d buckets, GROUP_MOD %d bytes", mode, len(d.Groups[0].Buckets), len(b)+8)
	}
}

func TestSwitchVersion(t *testing.T) {
	if v, err := SwitchVersion("Open vSwitch", "3.1.0"); err != nil || v != ovs310 {
		t.Errorf("SwitchVersion(Open vSwitch, 3.1.0) = %v, %v", v, err)
	}
	if v, err := SwitchVersion("Acme Switch", "3.1.0"); err == nil || v.Known() || !strings.Contains(err.Error(), "Acme Switch") {
		t.Errorf("SwitchVersion(Acme Switch, 3.1.0) = %v, %v; want unknown naming the hardware", v, err)
	}
	if v, err := SwitchVersion("Open vSwitch", "custom build"); err == nil || v.Known() {
		t.Errorf("SwitchVersion(Open vSwitch, custom build) = %v, %v; want unknown", v, err)
	}
}

type benchVector struct {
	name    string
	weights []uint16
}

// benchVectors are the share vectors of docs/benchmarks.md, "Exact shares".
func benchVectors() []benchVector {
	ten := make([]uint16, 10)
	for i := range ten {
		ten[i] = uint16(i + 1)
	}
	return []benchVector{
		{"60:40", []uint16{600, 400}},
		{"70:20:10", []uint16{700, 200, 100}},
		{"1:2:4", []uint16{1, 2, 4}},
		{"97:2:1", []uint16{970, 20, 10}},
		{"1..10", ten},
		{"64 equal", slices.Repeat([]uint16{1}, 64)},
	}
}

// TestReadBackSlotLayout: both layouts survive the switch's encoding (EncodeGroupDesc →
// DecodeGroupDesc) unchanged, and Locations finds every backend of a stateless group although
// each has many buckets.
func TestReadBackSlotLayout(t *testing.T) {
	for _, mode := range []Mode{ModeConntrack, ModeStateless} {
		s := liveService(mode, []uint16{700, 200, 100})
		d := Desired([]Service{s}, Options{OVS: ovs310})
		body, err := EncodeGroupDesc(d.Groups)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeGroupDesc(body)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if !slices.EqualFunc(got, d.Groups, Group.Equal) {
			t.Fatalf("%s: read-back groups differ", mode)
		}
		if mode != ModeStateless {
			continue
		}
		locs := Locations(State{Groups: got})
		for _, b := range s.Backends {
			if l, ok := locs[b.IP]; !ok || l.Port != b.SwitchPort || l.MAC.String() != b.MAC.String() {
				t.Errorf("backend %s: location %+v (found %v), want port %d mac %v", b.Name, l, ok, b.SwitchPort, b.MAC)
			}
		}
	}
}

// TestPerSlotFallsBackWhenTooBig: a stateless group whose 256 buckets would not fit one
// OpenFlow message is laid out like a conntrack group (one bucket per backend) instead.
func TestPerSlotFallsBackWhenTooBig(t *testing.T) {
	s := liveService(ModeStateless, []uint16{700, 200, 100})
	live := liveBackends(s)
	for _, c := range []struct {
		actionLen int
		buckets   int
	}{{64, 256}, {239, 256}, {240, 4}, {1000, 4}} {
		plan, n, _ := layoutBuckets(s, live, Options{OVS: ovs310}, func(int) int { return c.actionLen })
		if len(plan) != c.buckets || n != 256 {
			t.Errorf("actions of %d bytes: %d buckets for %d slots, want %d", c.actionLen, len(plan), n, c.buckets)
		}
	}
}

// TestBucketListStable: while the same backends are live and each has two or more slots, the
// conntrack group's bucket actions (which backend, in which order) do not depend on the
// shares, so a controller that restarts with slightly different weights rewrites only bucket
// weights.
func TestBucketListStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	actions := func(w []uint16) ([]string, bool) {
		g := Desired([]Service{liveService(ModeConntrack, w)}, Options{OVS: ovs310}).Groups[0]
		var a []string
		for _, b := range g.Buckets {
			a = append(a, b.Actions)
		}
		return a, len(g.Buckets) == len(w)+1
	}
	for range 200 {
		k := 2 + rng.IntN(20)
		w1, w2 := make([]uint16, k), make([]uint16, k)
		for i := range k {
			w1[i], w2[i] = uint16(100+rng.IntN(900)), uint16(100+rng.IntN(900))
		}
		a1, extra1 := actions(w1)
		a2, extra2 := actions(w2)
		if extra1 && extra2 && !slices.Equal(a1, a2) {
			t.Fatalf("weights %v and %v give different bucket lists", w1, w2)
		}
	}
}

// TestLayoutIsSlotsFor: the simulator dispatches through slots.For, a function of plain
// weights; the planner lays a service out with Layout. For every weight vector they give
// each backend the same slots of the same table, zero weights and unreachable backends
// aside.
func TestLayoutIsSlotsFor(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	vectors := [][]uint16{{700, 200, 100}, {334, 333, 333}, {0, 500, 500}, {1, 999}, {5}, {0, 0}, {1000, 1, 1, 1}}
	for _, v := range benchVectors() {
		vectors = append(vectors, v.weights)
	}
	for range 300 {
		w := make([]uint16, 1+rng.IntN(300))
		for i := range w {
			if rng.IntN(5) > 0 {
				w[i] = uint16(rng.IntN(2000))
			}
		}
		vectors = append(vectors, w)
	}
	for _, w := range vectors {
		for _, v := range []OVSVersion{{}, ovs216, ovs310, ovs316, ovs350} {
			l := Layout(liveService(ModeConntrack, w), Options{OVS: v})
			got := make([]int, len(w))
			for _, b := range l.Backends {
				got[b.Index] = b.Slots
			}
			want, n := slots.For(w, v)
			if !slices.Equal(got, want) || l.Table.NHash != n {
				t.Fatalf("weights %v on %v: Layout gives %v of %d, slots.For %v of %d", w, v, got, l.Table.NHash, want, n)
			}
		}
	}
}
