package dispatch

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/weights"
)

// service is a reactive service of located backends with these weights (0: no bucket).
func service(w ...uint16) *dataplane.Service {
	s := &dataplane.Service{Name: "web", Dispatch: dataplane.DispatchReactive}
	for i, x := range w {
		s.Backends = append(s.Backends, dataplane.Backend{Name: string(rune('a' + i)), Index: uint16(i),
			IP: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), MAC: net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)},
			SwitchPort: uint32(i + 1), Weight: x})
	}
	return s
}

// counts is a fake pool: the in-flight count per backend name, received at one time, the
// counts before them at prev.
type counts struct {
	n       map[string]float64
	at      time.Time
	failing map[string]bool
}

// set receives new counts at at.
func (c *counts) set(n map[string]float64, at time.Time) { c.n, c.at = n, at }

func (c *counts) read(dst []weights.InFlight, names []string, _ time.Duration) []weights.InFlight {
	for _, n := range names {
		v, ok := c.n[n]
		f := weights.InFlight{N: v, OK: ok, Failing: c.failing[n]}
		if ok {
			f.At = c.at
		}
		dst = append(dst, f)
	}
	return dst
}

func choose(t *testing.T, d *Dispatcher, s *dataplane.Service, k int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range k {
		c, ok := d.Choose(s)
		if !ok {
			t.Fatalf("no choice for %v", s.Backends)
		}
		out[c.Name]++
	}
	return out
}

func TestDispatcher(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	clock := func() time.Time { return now }

	t.Run("without counts: by weight, exactly", func(t *testing.T) {
		d := New(Config{Now: clock})
		got := choose(t, d, service(1, 2, 3), 60)
		if got["a"] != 10 || got["b"] != 20 || got["c"] != 30 {
			t.Errorf("60 choices at 1:2:3 went %v", got)
		}
	})

	t.Run("least connections, brought up to date by what was sent", func(t *testing.T) {
		c := &counts{n: map[string]float64{"a": 6, "b": 0, "c": 0}, at: t0}
		d := New(Config{Counts: c.read, Now: clock})
		now = t0.Add(time.Millisecond)
		// b and c are empty: the next 12 go 6 and 6 to them, then all three are at 6 and take turns.
		got := choose(t, d, service(1, 1, 1), 12)
		if got["a"] != 0 || got["b"] != 6 || got["c"] != 6 {
			t.Fatalf("12 choices with a holding 6 went %v", got)
		}
		got = choose(t, d, service(1, 1, 1), 3)
		if got["a"] != 1 || got["b"] != 1 || got["c"] != 1 {
			t.Fatalf("3 choices at equal counts went %v", got)
		}
		// A count taken before those connections finished their handshakes (it holds none of
		// them, arriving 1 ms after them) does not lose them: the next three go one to each,
		// not all to b and c again.
		now = t0.Add(2 * time.Millisecond)
		c.set(map[string]float64{"a": 6, "b": 0, "c": 0}, now)
		now = now.Add(time.Millisecond)
		got = choose(t, d, service(1, 1, 1), 3)
		if got["a"] != 1 || got["b"] != 1 || got["c"] != 1 {
			t.Fatalf("3 choices after a count that missed the last 15 went %v, want one each", got)
		}
		// A count that arrives more than handshakeAllowance after the sends holds them (or
		// their closes): the estimate is the count, nothing is counted twice.
		now = t0.Add(3*time.Millisecond + handshakeAllowance + time.Millisecond)
		c.set(map[string]float64{"a": 7, "b": 2, "c": 7}, now)
		got = choose(t, d, service(1, 1, 1), 5)
		if got["b"] != 5 {
			t.Fatalf("with b at 2 and the others at 7, 5 choices went %v", got)
		}
		st := d.Stats("web")
		if st["b"].Total != 13 || st["b"].InFlight != 7 {
			t.Errorf("b's stats %+v, want 13 sent and 7 in flight", st["b"])
		}
	})

	t.Run("weights scale the queues", func(t *testing.T) {
		c := &counts{n: map[string]float64{"a": 0, "b": 0}, at: t0}
		d := New(Config{Counts: c.read, Now: clock})
		now = t0.Add(time.Millisecond)
		got := choose(t, d, service(1, 3), 40)
		if got["a"] != 10 || got["b"] != 30 {
			t.Errorf("40 choices at 1:3 from empty went %v", got)
		}
	})

	t.Run("a failing backend gets nothing while another can take it", func(t *testing.T) {
		c := &counts{n: map[string]float64{"a": 0, "b": 9}, at: t0, failing: map[string]bool{"a": true}}
		d := New(Config{Counts: c.read, Now: clock})
		if got := choose(t, d, service(1, 1), 10); got["a"] != 0 {
			t.Errorf("failing a (empty) took %d of 10", got["a"])
		}
		c.failing["b"] = true // all failing: the weights and counts decide again
		if got := choose(t, d, service(1, 1), 10); got["a"] == 0 {
			t.Errorf("with every backend failing, a (emptier) took none of %v", got)
		}
	})

	t.Run("a backend without a count sends the service to round-robin", func(t *testing.T) {
		c := &counts{n: map[string]float64{"a": 50}, at: t0}
		d := New(Config{Counts: c.read, Now: clock})
		got := choose(t, d, service(1, 1), 10)
		if got["a"] != 5 || got["b"] != 5 {
			t.Errorf("10 choices with b's count missing went %v", got)
		}
		c.n["b"] = 0 // both counted: least connections again
		if got := choose(t, d, service(1, 1), 10); got["b"] != 10 {
			t.Errorf("10 choices with a at 50 went %v", got)
		}
	})

	t.Run("only backends with weight and a location", func(t *testing.T) {
		d := New(Config{Now: clock})
		s := service(0, 5, 5)
		s.Backends[2].MAC, s.Backends[2].SwitchPort = nil, 0 // c not located on this switch
		if got := choose(t, d, s, 6); got["b"] != 6 {
			t.Errorf("6 choices went %v, want all to b", got)
		}
		if _, ok := d.Choose(service(0, 0)); ok {
			t.Error("a choice with every weight 0")
		}
		if _, ok := d.Choose(&dataplane.Service{Name: "empty"}); ok {
			t.Error("a choice without backends")
		}
	})

	t.Run("sends remembered are bounded", func(t *testing.T) {
		c := &counts{n: map[string]float64{"a": 0, "b": 1e9}, at: t0} // b never chosen
		d := New(Config{Counts: c.read, Now: clock})
		choose(t, d, service(1, 1), maxPending+100)
		d.mu.Lock()
		n := len(d.services["web"].sent["a"].pending)
		d.mu.Unlock()
		if n != maxPending {
			t.Errorf("%d sends remembered, want %d", n, maxPending)
		}
	})

	t.Run("forget", func(t *testing.T) {
		d := New(Config{Now: clock})
		choose(t, d, service(1), 1)
		d.Forget(func(string) bool { return false })
		if d.Stats("web") != nil {
			t.Error("a forgotten service still has stats")
		}
	})
}
