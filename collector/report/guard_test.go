package report

import (
	"strings"
	"testing"
	"time"
)

// step is one report offered to the Guard: backend, boot nonce, seq, the
// report's time and the collector's clock, both as offsets from testEpoch.
type step struct {
	id    string
	nonce uint64
	seq   uint64
	at    time.Duration // report Time - testEpoch
	now   time.Duration // collector clock - testEpoch
	want  Reason        // "" = accepted
}

func TestGuard(t *testing.T) {
	const w = 10 * time.Second
	sec := time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{"in order", []step{
			{"a", 1, 1, 0, 0, ""}, {"a", 1, 2, sec, sec, ""}, {"a", 1, 3, 2 * sec, 2 * sec, ""},
		}},
		{"duplicate", []step{
			{"a", 1, 1, 0, 0, ""}, {"a", 1, 1, 0, sec, ReasonReplay},
		}},
		{"duplicate of newest after reorder", []step{
			{"a", 1, 5, 0, 0, ""}, {"a", 1, 3, 0, 0, ""}, {"a", 1, 5, 0, 0, ReasonReplay}, {"a", 1, 3, 0, 0, ReasonReplay},
		}},
		{"reorder within window accepted once", []step{
			{"a", 1, 1, 0, 0, ""}, {"a", 1, 3, 0, 0, ""}, {"a", 1, 2, 0, 0, ""}, {"a", 1, 2, 0, 0, ReasonReplay}, {"a", 1, 4, 0, 0, ""},
		}},
		{"oldest in window", []step{
			{"a", 1, 100, 0, 0, ""}, {"a", 1, 100 - ReorderWindow + 1, 0, 0, ""}, {"a", 1, 100 - ReorderWindow, 0, 0, ReasonReplay},
		}},
		{"window slides with the top", []step{
			{"a", 1, 1, 0, 0, ""}, {"a", 1, 3, 0, 0, ""}, {"a", 1, 10, 0, 0, ""}, {"a", 1, 2, 0, 0, ""},
			{"a", 1, 3, 0, 0, ReasonReplay}, {"a", 1, 1, 0, 0, ReasonReplay},
		}},
		{"big jump forgets the bitmap", []step{
			{"a", 1, 1, 0, 0, ""}, {"a", 1, 1 + ReorderWindow, 0, 0, ""}, {"a", 1, 2 + ReorderWindow, 0, 0, ""},
			{"a", 1, 1 + ReorderWindow, 0, 0, ReasonReplay}, {"a", 1, 3, 0, 0, ""}, {"a", 1, 2, 0, 0, ReasonReplay},
		}},
		{"reboot with new nonce and newer time", []step{
			{"a", 1, 50, 0, 0, ""}, {"a", 2, 1, sec, sec, ""}, {"a", 2, 2, 2 * sec, 2 * sec, ""},
			{"a", 1, 51, 500 * time.Millisecond, 2 * sec, ReasonReplay},
		}},
		{"new nonce with same time is a replay", []step{
			{"a", 1, 5, sec, sec, ""}, {"a", 2, 1, sec, sec, ReasonReplay},
		}},
		{"new nonce older than a reordered report", []step{
			{"a", 1, 5, 2 * sec, 2 * sec, ""}, {"a", 1, 4, 3 * sec, 3 * sec, ""}, {"a", 2, 1, 2500 * time.Millisecond, 3 * sec, ReasonReplay},
			{"a", 2, 1, 3*sec + 1, 3 * sec, ""},
		}},
		{"old boot's reports after a reboot", []step{
			{"a", 1, 5, 0, 0, ""}, {"a", 2, 1, sec, sec, ""}, {"a", 1, 6, sec / 2, sec, ReasonReplay}, {"a", 2, 2, 2 * sec, 2 * sec, ""},
		}},
		{"skew future and past", []step{
			{"a", 1, 1, w + 1, 0, ReasonClockSkew}, {"a", 1, 1, 0, w + 1, ReasonClockSkew}, {"a", 1, 1, 0, 0, ""},
		}},
		{"skew boundary is inclusive", []step{
			{"a", 1, 1, w, 0, ""}, {"a", 1, 2, 0, w, ""},
		}},
		{"a rejection changes nothing", []step{
			{"a", 1, 1, 0, 0, ""}, {"a", 1, 5, 20 * sec, 0, ReasonClockSkew}, {"a", 1, 5, 0, 0, ""},
			{"a", 3, 1, -sec, 0, ReasonReplay}, {"a", 1, 6, 0, 0, ""}, {"a", 1, 2, 0, 0, ""},
		}},
		{"backends are independent", []step{
			{"a", 1, 5, 0, 0, ""}, {"b", 1, 5, 0, 0, ""}, {"b", 1, 5, 0, 0, ReasonReplay}, {"a", 1, 6, 0, 0, ""},
			{"b", 9, 1, sec, 0, ""}, {"a", 1, 7, 0, 0, ""}, {"a", 1, 7, 0, 0, ReasonReplay},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGuard(w)
			for i, s := range tt.steps {
				r := sample()
				r.BackendID, r.BootNonce, r.Seq, r.Time = s.id, s.nonce, s.seq, testEpoch.Add(s.at)
				err := g.Check(&r, testEpoch.Add(s.now))
				if got := ReasonOf(err); got != s.want {
					t.Fatalf("step %d %+v: err = %v, want reason %q", i, s, err, s.want)
				}
				if err != nil && (!strings.Contains(err.Error(), s.id) || err.(*Error).BackendID != s.id) {
					t.Errorf("step %d: error %q does not name backend %q", i, err, s.id)
				}
			}
		})
	}
}

func TestGuardForget(t *testing.T) {
	g := NewGuard(0)
	if g.Window() != DefaultClockSkew {
		t.Fatalf("NewGuard(0) window = %s, want %s", g.Window(), DefaultClockSkew)
	}
	r := sample()
	r.Time = testEpoch
	for _, id := range []string{"a", "b"} {
		r.BackendID = id
		if err := g.Check(&r, testEpoch); err != nil {
			t.Fatal(err)
		}
	}
	r.BackendID = "a"
	if err := g.Check(&r, testEpoch); ReasonOf(err) != ReasonReplay {
		t.Fatalf("replay before Forget: %v", err)
	}
	g.Forget("a")
	g.Forget("never-seen")
	if g.Len() != 1 {
		t.Fatalf("after Forget(a): %d backends held, want 1", g.Len())
	}
	if err := g.Check(&r, testEpoch); err != nil {
		t.Fatalf("after Forget the backend starts afresh: %v", err)
	}
	g.Forget("a")
	g.Forget("b")
	if g.Len() != 0 {
		t.Fatalf("after forgetting every backend: %d held", g.Len())
	}
}

func TestGuardNoAllocs(t *testing.T) {
	g := NewGuard(time.Minute)
	r := sample()
	r.Time = testEpoch
	if err := g.Check(&r, testEpoch); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		r.Seq++
		if err := g.Check(&r, testEpoch); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Check of a known backend: %v allocs/op, want 0", allocs)
	}
}
