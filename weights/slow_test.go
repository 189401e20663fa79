package weights

import "testing"

// TestSlowShare: a slow backend keeps slow_share of its target while fewer than half of the
// live pool are slow and the others have room; what it gives goes to the others by their
// spare CPU, at most half of that spare; a pool slow everywhere (overload), or with no room
// elsewhere, keeps its split.
func TestSlowShare(t *testing.T) {
	static := func() Tuning { t := cpuOnly(); t.Policy = PolicyStatic; return t }()
	slow := func(b Backend) Backend { b.Slow = true; return b }
	for _, tc := range []struct {
		name     string
		in       []Backend
		want     []uint16
		wantSlow []bool
	}{
		{"none slow", []Backend{up("a", .5, 1), up("b", .5, 1), up("c", .5, 2)}, []uint16{250, 250, 500}, []bool{false, false, false}},
		{"one of three slow: half its share", []Backend{slow(up("a", .5, 1)), up("b", .5, 1), up("c", .5, 2)}, []uint16{125, 292, 583}, []bool{true, false, false}},
		{"its share goes where the room is", []Backend{slow(up("a", .5, 1)), up("b", .9, 1), up("c", .5, 1)}, []uint16{175, 360, 465}, []bool{true, false, false}},
		// Demand 0.5+0.95+0.95 = 2.4 cores of 3; spare 0.1 of which half may be filled: 0.05
		// of 2.4 is 2 % of the traffic, not a's 17 %.
		{"little room: a small cut", []Backend{slow(up("a", .5, 1)), up("b", .95, 1), up("c", .95, 1)}, []uint16{312, 344, 344}, []bool{true, false, false}},
		{"no room: nothing moves", []Backend{slow(up("a", .5, 1)), up("b", 1, 1), up("c", 1, 1)}, []uint16{334, 333, 333}, []bool{false, false, false}},
		{"two of three slow: the pool's load", []Backend{slow(up("a", .5, 1)), slow(up("b", .5, 1)), up("c", .5, 2)}, []uint16{250, 250, 500}, []bool{false, false, false}},
		{"slow but down: not counted", []Backend{slow(up("a", .5, 1)), {Name: "b", Status: StatusDown, Slow: true}, up("c", .5, 1), up("d", .5, 1)}, []uint16{166, 0, 417, 417}, []bool{true, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := compute(tc.in, static)
			for i, e := range r.Backends {
				if e.Weight != tc.want[i] || e.Slow != tc.wantSlow[i] {
					t.Fatalf("%s: weight %d slow %v, want %d %v (all %+v)", e.Name, e.Weight, e.Slow, tc.want[i], tc.wantSlow[i], r.Backends)
				}
			}
		})
	}
}

// TestSlowShareOne: slow_share 1 never cuts, so a static split stays the split it was given
// however late the health answers (the lab's fixed-split peer); 0.25 cuts harder.
func TestSlowShareOne(t *testing.T) {
	slow := func(b Backend) Backend { b.Slow = true; return b }
	in := []Backend{slow(up("a", .5, 1)), up("b", .5, 1), up("c", .5, 2)}
	for _, tc := range []struct {
		share    float64
		want     []uint16
		wantSlow bool
	}{
		{1, []uint16{250, 250, 500}, false},
		{0.25, []uint16{63, 312, 625}, true},
		{0, []uint16{125, 292, 583}, true}, // a Tuning not from DefaultTuning: the default cut
	} {
		tu := cpuOnly()
		tu.Policy, tu.SlowShare = PolicyStatic, tc.share
		r := compute(in, tu)
		for i, e := range r.Backends {
			if e.Weight != tc.want[i] {
				t.Fatalf("slow_share %v: weights %+v, want %v", tc.share, r.Backends, tc.want)
			}
		}
		if r.Backends[0].Slow != tc.wantSlow {
			t.Fatalf("slow_share %v: a marked slow %v", tc.share, r.Backends[0].Slow)
		}
	}
	bad := DefaultTuning()
	bad.SlowShare = 1.5
	if err := bad.Validate(); err == nil {
		t.Fatal("slow_share 1.5 accepted")
	}
}
