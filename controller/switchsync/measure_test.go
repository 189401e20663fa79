package switchsync

import (
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/controller/dataplane"
)

func TestBucketDeltas(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := func(sec int, epoch uint64, age time.Duration, b ...uint64) GroupReading {
		return GroupReading{At: t0.Add(time.Duration(sec) * time.Second), Epoch: epoch, Age: age, Buckets: b}
	}
	cases := []struct {
		name      string
		prev, cur GroupReading
		want      []uint64
		why       string // substring; "" for an accepted delta
		first     bool
	}{
		{"first reading", GroupReading{}, r(1, 0, 5*time.Second, 3, 4), nil, "", true},
		{"plain delta", r(0, 2, 5*time.Second, 10, 20, 0), r(5, 2, 10*time.Second, 15, 29, 0), []uint64{5, 9, 0}, "", false},
		{"no traffic", r(0, 2, time.Second, 10, 20), r(5, 2, 6*time.Second, 10, 20), []uint64{0, 0}, "", false},
		{"rewritten by us", r(0, 1, time.Second, 10, 20), r(5, 2, 6*time.Second, 11, 21), nil, "rewritten", false},
		{"bucket list changed", r(0, 1, time.Second, 10, 20), r(5, 1, 6*time.Second, 11, 21, 0), nil, "from 2 to 3 buckets", false},
		{"re-created: duration back", r(0, 1, time.Minute, 10, 20), r(5, 1, time.Second, 11, 21), nil, "re-created", false},
		{"counters reset", r(0, 1, time.Minute, 10, 20), r(5, 1, 2*time.Minute, 0, 0), nil, "bucket 0 counter went backwards from 10 to 0", false},
		{"one counter backwards", r(0, 1, time.Minute, 10, 20), r(5, 1, 2*time.Minute, 12, 19), nil, "bucket 1 counter went backwards", false},
		{"reading not after", r(5, 1, time.Minute, 10, 20), r(5, 1, time.Minute, 10, 20), nil, "not after", false},
		{"wrap to the top is no reset", r(0, 1, time.Second, math.MaxUint64-1), r(1, 1, 2*time.Second, math.MaxUint64), []uint64{1}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, why, first := BucketDeltas(c.prev, c.cur)
			if first != c.first || !slices.Equal(d, c.want) || (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
				t.Fatalf("BucketDeltas = %v, %q, first %v; want %v, %q, first %v", d, why, first, c.want, c.why, c.first)
			}
		})
	}
}

// measureService is a conntrack service of three located backends.
func measureService(w ...uint16) dataplane.Service {
	s := dataplane.Service{Name: "web", VIP: ip("10.0.0.100"), VIPMAC: mac("02:00:00:00:00:64"), Protocol: "tcp", Port: 80,
		Mode: dataplane.ModeConntrack, GroupID: 7, Zone: 1}
	for i, n := range []string{"a", "b", "c"} {
		s.Backends = append(s.Backends, dataplane.Backend{Name: n, Index: uint16(i), IP: ip("10.0.0." + string(rune('1'+i))),
			MAC: mac("02:00:00:00:00:0" + string(rune('1'+i))), SwitchPort: uint32(i + 1), Weight: w[i]})
	}
	return s
}

// TestSampleOfAndMeasure: bucket deltas land on the backends their buckets send to (the
// conntrack layout's extra weight-1 bucket included), and a window's shares and planned
// shares are the count-weighted sums over its samples, across a reweight.
func TestSampleOfAndMeasure(t *testing.T) {
	ovs := dataplane.OVSVersion{Major: 3, Minor: 1}
	svc := measureService(50, 30, 20)
	g := dataplane.Desired([]dataplane.Service{svc}, dataplane.Options{OVS: ovs}).Groups[0]
	split, err := dataplane.SplitOf(svc, g, ovs)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Buckets) != 4 || split.Backend[3] != split.Backend[0] {
		t.Fatalf("want the conntrack layout's extra bucket (4 buckets, the last to the first's backend): %v", split.Backend)
	}
	t0 := time.Unix(1000, 0)
	s1 := SampleOf(t0, t0.Add(5*time.Second), []uint64{100, 60, 40, 2}, svc, split)
	if s1.Counts["a"] != 102 || s1.Counts["b"] != 60 || s1.Counts["c"] != 40 {
		t.Fatalf("counts %v", s1.Counts)
	}
	if math.Abs(s1.Planned["a"]-128.0/256) > 1e-9 {
		t.Fatalf("planned %v, want a at 128/256", s1.Planned)
	}

	// After a reweight to 20/30/50 the next sample has another plan.
	svc2 := measureService(20, 30, 50)
	g2 := dataplane.Desired([]dataplane.Service{svc2}, dataplane.Options{OVS: ovs}).Groups[0]
	split2, _ := dataplane.SplitOf(svc2, g2, ovs)
	s2 := SampleOf(t0.Add(5*time.Second), t0.Add(10*time.Second), make([]uint64, len(g2.Buckets)), svc2, split2)
	s2.Counts = map[string]uint64{"a": 20, "b": 30, "c": 50}

	cases := []struct {
		name    string
		w       Window
		total   uint64
		share   map[string]float64
		planned map[string]float64
		skipped int
	}{
		{"empty", Window{Span: time.Minute}, 0, map[string]float64{}, map[string]float64{}, 0},
		{"one sample", Window{Span: time.Minute}.Add(s1), 202,
			map[string]float64{"a": 102.0 / 202, "b": 60.0 / 202, "c": 40.0 / 202},
			map[string]float64{"a": split.Planned(0), "b": split.Planned(1), "c": split.Planned(2)}, 0},
		{"across a reweight", Window{Span: time.Minute}.Add(s1).Skip(t0.Add(6 * time.Second)).Add(s2), 302,
			map[string]float64{"a": 122.0 / 302, "b": 90.0 / 302, "c": 90.0 / 302},
			map[string]float64{"a": (202*split.Planned(0) + 100*split2.Planned(0)) / 302,
				"b": (202*split.Planned(1) + 100*split2.Planned(1)) / 302,
				"c": (202*split.Planned(2) + 100*split2.Planned(2)) / 302}, 1},
		{"old samples and skips leave", Window{Span: 4 * time.Second}.Add(s1).Skip(t0.Add(5 * time.Second)).Add(s2), 100,
			map[string]float64{"a": 0.2, "b": 0.3, "c": 0.5},
			map[string]float64{"a": split2.Planned(0), "b": split2.Planned(1), "c": split2.Planned(2)}, 0},
		{"no counts: planned is the latest sample's", Window{Span: time.Minute}.Add(SampleOf(t0, t0.Add(time.Second), make([]uint64, 4), svc, split)), 0,
			map[string]float64{"a": 0, "b": 0, "c": 0},
			map[string]float64{"a": split.Planned(0), "b": split.Planned(1), "c": split.Planned(2)}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.w.Measure(UnitConnections)
			if m.Total != c.total || m.Skipped != c.skipped || m.Unit != UnitConnections {
				t.Fatalf("total %d skipped %d unit %q; want %d, %d", m.Total, m.Skipped, m.Unit, c.total, c.skipped)
			}
			for name, want := range c.share {
				if b := m.Backends[name]; math.Abs(b.Share-want) > 1e-9 || math.Abs(b.Planned-c.planned[name]) > 1e-9 {
					t.Errorf("%s: share %.4f planned %.4f; want %.4f, %.4f", name, b.Share, b.Planned, want, c.planned[name])
				}
			}
		})
	}
}

func TestUnitOf(t *testing.T) {
	if UnitOf(dataplane.ModeConntrack) != UnitConnections || UnitOf(dataplane.ModeStateless) != UnitPackets {
		t.Fatal("conntrack groups count connections, stateless ones packets")
	}
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}
