package report

import (
	"encoding/json"
	"reflect"
	"strconv"
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
		{"a restart with the clock behind opens a new boot", []step{
			{"a", 1, 5, 2 * sec, 2 * sec, ""}, {"a", 2, 1, sec, 2 * sec, ""}, {"a", 2, 2, sec, 3 * sec, ""},
			{"a", 1, 6, 3 * sec, 3 * sec, ""}, // the old boot is newer than the new one's capped time: it takes back
		}},
		{"captured reports of earlier boots stay refused", []step{
			{"a", 1, 1, 0, 0, ""}, {"a", 1, 2, sec, sec, ""}, {"a", 1, 3, 2 * sec, 2 * sec, ""},
			{"a", 2, 1, 3 * sec, 3 * sec, ""}, {"a", 2, 2, 4 * sec, 4 * sec, ""},
			{"a", 1, 2, sec, 5 * sec, ReasonReplay}, {"a", 1, 3, 2 * sec, 5 * sec, ReasonReplay},
			{"a", 2, 1, 3 * sec, 5 * sec, ReasonReplay},
		}},
		{"a late report of the previous process cannot undo the restart", []step{
			{"a", 1, 9, 0, 0, ""}, {"a", 2, 1, 2 * sec, 2 * sec, ""},
			{"a", 1, 10, sec, 2 * sec, ReasonReplay}, // sent before the restart, arrived after it
			{"a", 1, 8, 0, 2 * sec, ReasonReplay},    // gap fill of a superseded boot
			{"a", 2, 2, 3 * sec, 3 * sec, ""},
		}},
		{"a boot dated ahead locks nobody out", []step{
			{"a", 1, 1, 0, 0, ""},
			{"a", 2, 1, w - sec, 0, ""},       // a stray boot whose clock is 9 s ahead
			{"a", 1, 2, 2 * sec, 2 * sec, ""}, // the live boot takes its backend back with its next report
			{"a", 1, 3, 3 * sec, 3 * sec, ""},
			{"a", 2, 1, w - sec, 3 * sec, ReasonReplay}, // the stray report replayed
			{"a", 3, 1, 4 * sec, 4 * sec, ""},           // and a genuine restart is not held back by it
		}},
		{"a dropped boot cannot be replayed", []step{
			// Boot 1 reports at 10 s, then MaxEpochs newer boots push it out: the floor rises to 10 s.
			{"a", 1, 1, 9 * sec, 9 * sec, ""}, {"a", 1, 2, 10 * sec, 10 * sec, ""},
			{"a", 2, 1, 11 * sec, 11 * sec, ""}, {"a", 3, 1, 12 * sec, 12 * sec, ""}, {"a", 4, 1, 13 * sec, 13 * sec, ""},
			{"a", 5, 1, 14 * sec, 14 * sec, ""},
			{"a", 1, 2, 10 * sec, 15 * sec, ReasonReplay}, {"a", 1, 1, 9 * sec, 15 * sec, ReasonReplay},
			{"a", 6, 1, 10 * sec, 15 * sec, ReasonReplay}, // a new boot no newer than the floor
			// Boot 1 comes back with a newer report: its old ones stay refused under the floor it re-opened with.
			{"a", 1, 3, 16 * sec, 16 * sec, ""}, {"a", 1, 2, 10 * sec, 16 * sec, ReasonReplay}, {"a", 1, 1, 9 * sec, 16 * sec, ReasonReplay},
			{"a", 5, 2, 17 * sec, 17 * sec, ""}, {"a", 2, 2, 18 * sec, 18 * sec, ""},
		}},
		{"the residual: a dropped boot dated ahead holds back a new boot until its time", []step{
			{"a", 1, 1, w - sec, 0, ""}, // clock 9 s ahead
			{"a", 2, 1, sec, sec, ""}, {"a", 3, 1, sec, sec, ""}, {"a", 4, 1, sec, sec, ""},
			{"a", 5, 1, 2 * sec, 2 * sec, ""},           // boot 1 dropped: floor 20 s
			{"a", 6, 1, 3 * sec, 3 * sec, ReasonReplay}, // refused...
			{"a", 5, 2, 4 * sec, 4 * sec, ""},           // ...while the boots still held keep working
			{"a", 6, 1, 20*sec + 1, 20*sec + 1, ""},     // ...until the collector's clock passes the floor
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
			{"a", 1, 5, 0, 0, ReasonReplay}, {"a", 1, 6, 0, 0, ""}, {"a", 1, 2, 0, 0, ""},
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

// TestGuardFutureBootLockout is the reviewed attack: the genuine probe
// reports every second; one report of a fresh boot nonce dated 29 s ahead
// (a holder of a shared key, or a probe whose clock jumped) arrives. The
// earlier Guard then refused every genuine report until its clock caught up
// (27 of 27); now the next one takes the backend back.
func TestGuardFutureBootLockout(t *testing.T) {
	const genuine, stray = 0x9e, 0x57
	g := NewGuard(DefaultClockSkew)
	now := testEpoch
	r := sample()
	check := func(nonce, seq uint64, at time.Time) error {
		r.BootNonce, r.Seq, r.Time = nonce, seq, at
		return g.Check(&r, now)
	}
	seq := uint64(0)
	for range 3 {
		now = now.Add(time.Second)
		seq++
		if err := check(genuine, seq, now); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(100 * time.Millisecond)
	if err := check(stray, 1, now.Add(29*time.Second)); err != nil {
		t.Fatalf("the stray boot is authenticated and in the window, so it is accepted: %v", err)
	}
	accepted := 0
	for range 27 {
		now = now.Add(time.Second)
		seq++
		if err := check(genuine, seq, now); err == nil {
			accepted++
		}
	}
	if accepted != 27 {
		t.Errorf("genuine reports after the stray boot: %d of 27 accepted, want all", accepted)
	}
	if err := check(stray, 1, testEpoch.Add(32100*time.Millisecond)); ReasonOf(err) != ReasonReplay {
		t.Errorf("the stray report replayed: %v, want replay", err)
	}
}

// guardAfter returns a Guard that has accepted seqs 1..n of boot nonce for
// backend id, one a second from testEpoch, and the time of the last one.
func guardAfter(t *testing.T, id string, nonce, n uint64) (*Guard, time.Time) {
	t.Helper()
	g := NewGuard(DefaultClockSkew)
	r := sample()
	r.BackendID, r.BootNonce = id, nonce
	at := testEpoch
	for seq := uint64(1); seq <= n; seq++ {
		at = testEpoch.Add(time.Duration(seq) * time.Second)
		r.Seq, r.Time = seq, at
		if err := g.Check(&r, at); err != nil {
			t.Fatal(err)
		}
	}
	return g, at
}

func TestGuardMarksRoundTrip(t *testing.T) {
	g, _ := guardAfter(t, "web-1", 0xabcdef0123456789, 70)
	// A second backend with several boots and a raised floor.
	r := sample()
	r.BackendID = "api.2"
	for i := range uint64(MaxEpochs + 2) {
		r.BootNonce, r.Seq, r.Time = 0xffffffffffffff00+i, 3, testEpoch.Add(time.Duration(i)*time.Second)
		if err := g.Check(&r, r.Time); err != nil {
			t.Fatal(err)
		}
	}
	marks := g.Marks()
	js, err := json.Marshal(marks)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"boot_nonce":"12379813738877118345"`) {
		t.Errorf("64-bit values must travel as JSON strings: %s", js)
	}
	var back map[string]Mark
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, marks) {
		t.Fatalf("JSON round trip changed the marks:\n%+v\n%+v", back, marks)
	}
	if m := marks["api.2"]; len(m.Epochs) != MaxEpochs || m.Floor != testEpoch.Add(time.Second).UnixNano() {
		t.Errorf("api.2: %d epochs floor %d, want %d and the second boot's time", len(m.Epochs), m.Floor, MaxEpochs)
	}
	h := NewGuard(DefaultClockSkew)
	if err := h.Restore(back); err != nil {
		t.Fatal(err)
	}
	if got := h.Marks(); !reflect.DeepEqual(got, marks) {
		t.Fatalf("Restore then Marks:\n%+v\nwant\n%+v", got, marks)
	}
}

// TestGuardRestart is a collector restart: the marks saved by the old
// process make the new one refuse captured reports and accept the live
// probe's next one; without them the capture is accepted.
func TestGuardRestart(t *testing.T) {
	const nonce = 0x5eed
	old, last := guardAfter(t, "web-1", nonce, 10)
	saved := old.Marks()
	now := last.Add(2 * time.Second) // restarted within the skew window
	captured := sample()
	captured.BackendID, captured.BootNonce = "web-1", nonce
	tests := []struct {
		name     string
		restore  bool
		seq      uint64
		at       time.Time
		want     Reason
		unwanted bool // documents the failure without marks
	}{
		{"no marks: a capture is accepted", false, 7, testEpoch.Add(7 * time.Second), "", true},
		{"marks: capture of the newest", true, 10, last, ReasonReplay, false},
		{"marks: capture inside the reorder window", true, 7, testEpoch.Add(7 * time.Second), ReasonReplay, false},
		{"marks: the live probe's next report", true, 11, now, "", false},
		{"marks: the probe restarted meanwhile", true, 1, now, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGuard(DefaultClockSkew)
			if tt.restore {
				if err := g.Restore(saved); err != nil {
					t.Fatal(err)
				}
			}
			r := captured
			r.Seq, r.Time = tt.seq, tt.at
			if tt.name == "marks: the probe restarted meanwhile" {
				r.BootNonce = nonce + 1
			}
			if got := ReasonOf(g.Check(&r, now)); got != tt.want {
				t.Errorf("reason %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGuardRestoreRefusesMalformed(t *testing.T) {
	good := EpochMark{BootNonce: 1, TopSeq: 10, Seen: 0b101, Newest: testEpoch.UnixNano(), Capped: testEpoch.UnixNano()}
	ep := func(mod func(*EpochMark)) Mark {
		e := good
		mod(&e)
		return Mark{Epochs: []EpochMark{e}}
	}
	tests := []struct {
		name string
		id   string
		m    Mark
		want string
	}{
		{"bad id", "web 1", Mark{Epochs: []EpochMark{good}}, "not a backend id"},
		{"long id", strings.Repeat("a", MaxIDLen+1), Mark{Epochs: []EpochMark{good}}, "not a backend id"},
		{"no epochs", "a", Mark{}, "0 epochs"},
		{"too many epochs", "a", Mark{Epochs: make([]EpochMark, MaxEpochs+1)}, "epochs, want 1.."},
		{"negative floor", "a", Mark{Epochs: []EpochMark{good}, Floor: -1}, "negative"},
		{"top 0", "a", ep(func(e *EpochMark) { e.TopSeq = 0 }), "top_seq is 0"},
		{"top not seen", "a", ep(func(e *EpochMark) { e.Seen = 0b10 }), "bit 0"},
		{"seen below seq 1", "a", ep(func(e *EpochMark) { e.TopSeq, e.Seen = 2, 0b111 }), "below 1"},
		{"newest before 1970", "a", ep(func(e *EpochMark) { e.Newest, e.Capped = 5, 5 }), "newest"},
		{"capped above newest", "a", ep(func(e *EpochMark) { e.Capped = e.Newest + 1 }), "capped"},
		{"epoch floor above the mark's", "a", ep(func(e *EpochMark) { e.Floor = 1 }), "floor"},
		{"duplicate nonce", "a", Mark{Epochs: []EpochMark{good, good}}, "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGuard(0)
			err := g.Restore(map[string]Mark{tt.id: tt.m, "fine": {Epochs: []EpochMark{good}}})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), strconv.Quote(tt.id)) {
				t.Fatalf("Restore error %v, want one naming %q and saying %q", err, tt.id, tt.want)
			}
			if _, ok := g.Marks()[tt.id]; ok {
				t.Errorf("malformed mark of %q restored", tt.id)
			}
			if _, ok := g.Marks()["fine"]; !ok {
				t.Errorf("the well-formed mark beside it was not restored")
			}
		})
	}
}

func TestGuardRestoreKeepsLiveState(t *testing.T) {
	g, last := guardAfter(t, "web-1", 7, 20)
	stale := map[string]Mark{"web-1": {Epochs: []EpochMark{{BootNonce: 7, TopSeq: 3, Seen: 1, Newest: testEpoch.UnixNano(), Capped: testEpoch.UnixNano()}}}}
	if err := g.Restore(stale); err != nil {
		t.Fatal(err)
	}
	r := sample()
	r.BackendID, r.BootNonce, r.Seq, r.Time = "web-1", 7, 19, last
	if err := g.Check(&r, last); ReasonOf(err) != ReasonReplay {
		t.Errorf("after restoring an older mark over live state, seq 19 was %v, want replay", err)
	}
}

// FuzzGuardRestore feeds arbitrary JSON to Restore: it must not panic, and
// whatever it restores comes back unchanged from Marks.
func FuzzGuardRestore(f *testing.F) {
	f.Add([]byte(`{"web-1":{"epochs":[{"boot_nonce":"1","top_seq":"10","seen":"5","newest_unix_ns":"1796072400000000000","capped_unix_ns":"1796072400000000000","floor_unix_ns":"0"}],"floor_unix_ns":"0"}}`))
	f.Add([]byte(`{"a":{"epochs":[]}}`))
	f.Add([]byte(`{"a b":{"epochs":[{"top_seq":"1","seen":"1"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var in map[string]Mark
		if json.Unmarshal(data, &in) != nil {
			return
		}
		g := NewGuard(0)
		err := g.Restore(in)
		out := g.Marks()
		for id, m := range out {
			if !reflect.DeepEqual(m, in[id]) {
				t.Fatalf("%q restored as %+v from %+v", id, m, in[id])
			}
		}
		if err == nil && len(out) != len(in) {
			t.Fatalf("no error but %d of %d marks restored", len(out), len(in))
		}
		if err != nil && len(out) == len(in) {
			t.Fatalf("error %v but every mark restored", err)
		}
		// A restored Guard still enforces its rules without panicking.
		r := sample()
		for id := range out {
			r.BackendID = id
			_ = g.Check(&r, r.Time)
		}
	})
}

// FuzzGuard drives the Guard with arbitrary sequences of reports from a few
// boots, resending some, with the collector's clock moving forward. Whatever
// the order: the same report (boot, seq, time) is accepted at most once,
// and a rejection changes no state.
func FuzzGuard(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 1, 2, 10, 1, 0, 1, 0, 0, 2, 1, 40, 9, 0, 1, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 1, 1, 1, 0, 2, 1, 2, 0, 3, 1, 3, 0, 4, 1, 4, 0, 0, 1, 0, 0, 0, 2, 5, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := NewGuard(10 * time.Second)
		now := testEpoch
		type key struct {
			nonce, seq uint64
			t          time.Time
		}
		accepted := map[key]bool{}
		r := sample()
		for len(data) >= 4 {
			// nonce 0..5, seq 1..80, time -10..+15 s around now (some outside the window), clock step 0..2.55 s
			nonce, seq := uint64(data[0]%6), uint64(data[1]%80)+1
			at := now.Add(time.Duration(int(data[2]%26)-10) * time.Second)
			now = now.Add(time.Duration(data[3]) * 10 * time.Millisecond)
			data = data[4:]
			r.BootNonce, r.Seq, r.Time = nonce, seq, at
			before := g.Marks()
			err := g.Check(&r, now)
			k := key{nonce, seq, at}
			if err == nil {
				if accepted[k] {
					t.Fatalf("boot %d seq %d at %s accepted twice", nonce, seq, at)
				}
				accepted[k] = true
				continue
			}
			if ReasonOf(err) != ReasonReplay && ReasonOf(err) != ReasonClockSkew {
				t.Fatalf("Check: %v", err)
			}
			if after := g.Marks(); !reflect.DeepEqual(before, after) {
				t.Fatalf("a rejection (%v) changed the state:\n%+v\n%+v", err, before, after)
			}
		}
	})
}
