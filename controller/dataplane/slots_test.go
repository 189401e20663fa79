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
)

var (
	ovs216 = OVSVersion{2, 16, 0}
	ovs310 = OVSVersion{3, 1, 0}
	ovs316 = OVSVersion{3, 1, 6}
	ovs350 = OVSVersion{3, 5, 0}
)

func TestParseOVSVersion(t *testing.T) {
	cases := []struct {
		in   string
		want OVSVersion
		ok   bool
	}{
		{"3.1.0", ovs310, true},
		{" 2.17.9\x00", OVSVersion{2, 17, 9}, true},
		{"3.3.0-rc1", OVSVersion{3, 3, 0}, true},
		{"3.1.0+dfsg", ovs310, true},
		{"2.9", OVSVersion{2, 9, 0}, true},
		{"", OVSVersion{}, false},
		{"Open vSwitch", OVSVersion{}, false},
		{"3", OVSVersion{}, false},
		{"3.1.0.1", OVSVersion{}, false},
		{"3..1", OVSVersion{}, false},
		{"03.1.0", OVSVersion{}, false},
		{"0.0.0", OVSVersion{}, false},
		{"99999.1.0", OVSVersion{}, false},
	}
	for _, c := range cases {
		got, err := ParseOVSVersion(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseOVSVersion(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", strings.TrimSpace(c.in))) {
			t.Errorf("ParseOVSVersion(%q): error %q does not name the input", c.in, err)
		}
	}
}

func FuzzParseOVSVersion(f *testing.F) {
	for _, s := range []string{"3.1.0", "2.17.12", "3.3.0-rc1", "x", "1.2.3.4", "0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseOVSVersion(s)
		if err != nil {
			if v.Known() {
				t.Fatalf("ParseOVSVersion(%q) failed but returned %v", s, v)
			}
			return
		}
		if !v.Known() {
			t.Fatalf("ParseOVSVersion(%q) = zero version without error", s)
		}
		again, err := ParseOVSVersion(v.String())
		if err != nil || again != v {
			t.Fatalf("ParseOVSVersion(%q) = %v does not round-trip: %v, %v", s, v, again, err)
		}
	})
}

func TestVersionRules(t *testing.T) {
	cases := []struct {
		v      OVSVersion
		max    int
		term   bool
		layout int
	}{
		{OVSVersion{}, 64, false, 64},
		{OVSVersion{2, 9, 0}, 0, false, 64},
		{OVSVersion{2, 10, 0}, 64, false, 64},
		{ovs216, 64, false, 64},
		{OVSVersion{2, 17, 0}, 256, false, 256},
		{OVSVersion{3, 0, 8}, 256, false, 256},
		{ovs310, 256, false, 256},
		{OVSVersion{3, 1, 5}, 256, false, 256},
		{ovs316, 256, true, 256},
		{OVSVersion{3, 2, 3}, 256, false, 256},
		{OVSVersion{3, 2, 4}, 256, true, 256},
		{OVSVersion{3, 3, 2}, 256, false, 256},
		{OVSVersion{3, 3, 3}, 256, true, 256},
		{OVSVersion{3, 4, 0}, 256, false, 256},
		{OVSVersion{3, 4, 1}, 256, true, 256},
		{ovs350, 256, true, 256},
		{OVSVersion{4, 0, 0}, 256, true, 256},
	}
	for _, c := range cases {
		if got := c.v.MaxHash(); got != c.max {
			t.Errorf("%v.MaxHash() = %d, want %d", c.v, got, c.max)
		}
		if got := c.v.BucketTerm(); got != c.term {
			t.Errorf("%v.BucketTerm() = %v, want %v", c.v, got, c.term)
		}
		if got := LayoutSlots(c.v); got != c.layout {
			t.Errorf("LayoutSlots(%v) = %d, want %d", c.v, got, c.layout)
		}
	}
}

// TestOVSSlots holds the tables measured or logged on Open vSwitch (docs/dataplane.md) and the
// version rules.
func TestOVSSlots(t *testing.T) {
	cases := []struct {
		name     string
		w        []uint16
		v        OVSVersion
		n        int
		hits     []int
		fallback bool
	}{
		{"700/200/100 on 3.1.0: 16 slots", []uint16{700, 200, 100}, ovs310, 16, []int{11, 3, 2}, false},
		{"equal thirds on 3.1.0", []uint16{334, 333, 333}, ovs310, 16, []int{6, 5, 5}, false},
		{"25:50:100 on 3.1.0", []uint16{25, 50, 100}, ovs310, 16, []int{2, 5, 9}, false},
		{"178/51/26/1 on 3.1.0: one slot per unit", []uint16{178, 51, 26, 1}, ovs310, 256, []int{178, 51, 26, 1}, false},
		{"zero bucket gets nothing", []uint16{0, 500, 500}, ovs310, 16, []int{0, 8, 8}, false},
		{"1:999 needs 1024 slots: fallback", []uint16{1, 999}, ovs310, 0, []int{0, 0}, true},
		{"1:200 on 2.16 needs 256 > 64: fallback", []uint16{1, 200}, ovs216, 0, []int{0, 0}, true},
		{"1:200 on 3.1.0: 256", []uint16{1, 200}, ovs310, 256, []int{1, 255}, false},
		{"anything before 2.10 falls back", []uint16{1, 1}, OVSVersion{2, 9, 0}, 0, []int{0, 0}, true},
		{"10 equal buckets on 3.1.0: 16 slots", slices.Repeat([]uint16{1}, 10), ovs310, 16, []int{2, 2, 2, 2, 2, 2, 1, 1, 1, 1}, false},
		{"10 equal buckets on 3.1.6: 4·10 → 64 slots", slices.Repeat([]uint16{1}, 10), ovs316, 64, []int{7, 7, 7, 7, 6, 6, 6, 6, 6, 6}, false},
		{"no weight: no table", []uint16{0, 0}, ovs310, 0, []int{0, 0}, false},
		{"no buckets", nil, ovs310, 0, []int{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := OVSSlots(c.w, c.v)
			if got.NHash != c.n || got.Fallback != c.fallback || !reflect.DeepEqual(got.Hits, c.hits) {
				t.Errorf("OVSSlots(%v, %v) = n %d fallback %v hits %v; want n %d fallback %v hits %v",
					c.w, c.v, got.NHash, got.Fallback, got.Hits, c.n, c.fallback, c.hits)
			}
			if len(got.Bucket) != got.NHash {
				t.Errorf("slot map has %d entries for %d slots", len(got.Bucket), got.NHash)
			}
		})
	}
	// Equal weights: Webster hands slot i to bucket i mod n (ties to the earlier bucket); the
	// stateless layout relies on it.
	tab := OVSSlots(slices.Repeat([]uint16{1}, 256), ovs310)
	for i, b := range tab.Bucket {
		if b != i {
			t.Fatalf("256 unit buckets: slot %d goes to bucket %d, want %d", i, b, i)
		}
	}
	tab = OVSSlots(slices.Repeat([]uint16{1}, 64), ovs350) // 4·64 = 256 slots
	for i, b := range tab.Bucket {
		if b != i%64 {
			t.Fatalf("64 unit buckets on 3.5.0: slot %d goes to bucket %d, want %d", i, b, i%64)
		}
	}
}

func TestApportion(t *testing.T) {
	cases := []struct {
		w    []uint16
		n    int
		want []int
	}{
		{[]uint16{700, 200, 100}, 256, []int{179, 51, 26}},
		{[]uint16{699, 199, 102}, 256, []int{179, 51, 26}},
		{[]uint16{600, 400}, 256, []int{154, 102}},
		{[]uint16{1, 1, 1}, 256, []int{86, 85, 85}},
		{[]uint16{970, 20, 10}, 256, []int{248, 5, 3}},
		{[]uint16{1000, 1}, 256, []int{255, 1}},           // lifted from 0.26 slots to 1
		{[]uint16{1000, 1, 1, 1}, 16, []int{13, 1, 1, 1}}, // three lifts
		{[]uint16{0, 5, 0}, 64, []int{0, 64, 0}},
		{[]uint16{1, 1, 1}, 2, []int{1, 1, 0}}, // more live than slots: no minimum
		{[]uint16{0, 0}, 64, []int{0, 0}},
		{nil, 64, []int{}},
	}
	for _, c := range cases {
		if got := Apportion(c.w, c.n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Apportion(%v, %d) = %v, want %v", c.w, c.n, got, c.want)
		}
	}
}

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
	tab := OVSSlots(weightsOf(g), opt.OVS)
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
	want := Apportion(w, l.N)
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
			tab := OVSSlots(weightsOf(g.Groups[0]), ovs350)
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
		old, now := Apportion(before, 256), Apportion(after, 256)
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

func TestSlotsFor(t *testing.T) {
	cases := []struct {
		w     []uint16
		v     OVSVersion
		slots []int
		n     int
	}{
		{[]uint16{700, 200, 100}, ovs310, []int{179, 51, 26}, 256},
		{[]uint16{334, 333, 333}, ovs310, []int{86, 85, 85}, 256},
		{[]uint16{0, 500, 500}, ovs310, []int{0, 128, 128}, 256},
		{[]uint16{1, 999}, ovs310, []int{1, 255}, 256},
		{[]uint16{700, 200, 100}, ovs216, []int{45, 13, 6}, 64},
		{[]uint16{5}, ovs310, []int{16}, 16}, // one bucket: the switch's smallest table, all to it
		{[]uint16{0, 0}, ovs310, []int{0, 0}, 0},
	}
	for _, c := range cases {
		slots, n := SlotsFor(c.w, c.v)
		if !slices.Equal(slots, c.slots) || n != c.n {
			t.Errorf("SlotsFor(%v, %v) = %v of %d, want %v of %d", c.w, c.v, slots, n, c.slots, c.n)
		}
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
