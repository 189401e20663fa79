//go:build integration

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// measuredBackend is the part of a backend's API view this test reads: its measured shares
// per switch (docs/dataplane.md, "Measured shares").
type measuredBackend struct {
	Name     string `json:"name"`
	Measured []struct {
		DPID                   string   `json:"dpid"`
		Unit                   string   `json:"unit"`
		MeasuredShare          *float64 `json:"measured_share"`
		PlannedShare           float64  `json:"planned_share"`
		MeasuredNewConnections *uint64  `json:"measured_new_connections"`
		Total                  uint64   `json:"total"`
		SamplingError          float64  `json:"sampling_error"`
		// With client affinity (correction_integration_test.go).
		PinnedNewConnections *uint64             `json:"pinned_new_connections"`
		Correction           *measuredCorrection `json:"correction"`
	} `json:"measured"`
}

// TestMeasuredShares sends N new connections through the VIP of a conntrack service with
// fixed (static) weights and checks what the controller measured from the real switch's
// bucket counters: the per-backend counts of new connections grow by exactly N in all (each
// connection's first packet passes the group once; no request may fail, so no SYN is sent
// twice), and each backend's measured share is its planned share within four sampling errors
// (the split of N random 5-tuples is binomial around the slot table's shares).
func TestMeasuredShares(t *testing.T) {
	const n = 400
	s := startScenario(t, scenario.Options{Net: 53, Work: 200, Capacities: []float64{1, 2, 5},
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	ctx := context.Background()
	stableSync(t, s, 30*time.Second)

	// Nothing but this test's load reaches the VIP: the counters stand still once synced.
	before := waitCountersStill(t, s)
	res, err := s.Load(ctx, scenario.LoadOptions{Concurrency: 4, Duration: 40 * time.Second, MaxRequests: n, SourceAddrs: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load: %v", res)
	if res.OK != n || res.Errors != 0 {
		t.Fatalf("want %d requests answered and none failed (a failed connection may count twice): %v (%s)", n, res, res.ErrSummary())
	}

	// The switch's revalidators push datapath counters to the groups about every 500 ms and
	// the controller reads them every update (1 s here): the counts arrive within seconds.
	var after map[string]float64
	if _, err := waitFor(15*time.Second, func() error {
		after = measuredCounters(t, s)
		if got := sum(after) - sum(before); got != n {
			return fmt.Errorf("measured %v new connections of %d (before %v, now %v)", got, n, before, after)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The API's window (the last minute) holds exactly this load: the counters stood still
	// before it.
	var v struct {
		Backends []measuredBackend `json:"backends"`
	}
	if _, err := waitFor(10*time.Second, func() error {
		svc, err := apiService(s)
		if err != nil {
			return err
		}
		v.Backends = svc
		var total uint64
		for _, b := range v.Backends {
			if len(b.Measured) != 1 || b.Measured[0].MeasuredNewConnections == nil {
				return fmt.Errorf("backend %s: measured %+v, want one switch's connections", b.Name, b.Measured)
			}
			total += *b.Measured[0].MeasuredNewConnections
		}
		if total < n {
			return fmt.Errorf("api window holds %d new connections, want at least %d", total, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, b := range v.Backends {
		m := b.Measured[0]
		delta := after[b.Name] - before[b.Name]
		if m.Unit != "connections" || m.MeasuredShare == nil || m.Total < n {
			t.Fatalf("backend %s: %+v", b.Name, m)
		}
		sigma := math.Sqrt(m.PlannedShare * (1 - m.PlannedShare) / float64(m.Total))
		figure(t, "measured vs planned share of new connections, "+b.Name, "%.3f vs %.3f (%d of %d connections; sampling error %.3f; metric delta %.0f)",
			*m.MeasuredShare, m.PlannedShare, *m.MeasuredNewConnections, m.Total, sigma, delta)
		if math.Abs(m.SamplingError-sigma) > 1e-9 {
			t.Errorf("backend %s: sampling error %.5f, want sqrt(p(1-p)/n) = %.5f", b.Name, m.SamplingError, sigma)
		}
		if math.Abs(*m.MeasuredShare-m.PlannedShare) > 4*sigma {
			t.Errorf("backend %s: measured share %.3f, planned %.3f: more than four sampling errors (%.3f) apart",
				b.Name, *m.MeasuredShare, m.PlannedShare, 4*sigma)
		}
		if res.PerBackend[b.Name] != int(delta) {
			t.Errorf("backend %s answered %d requests, its buckets counted %.0f new connections", b.Name, res.PerBackend[b.Name], delta)
		}
	}
}

// apiService is the scenario service's backends with their measured shares.
func apiService(s *scenario.Scenario) ([]measuredBackend, error) {
	var svcs []struct {
		GroupID  int               `json:"group_id"`
		Backends []measuredBackend `json:"backends"`
	}
	if err := s.API("/api/v1/services", &svcs); err != nil {
		return nil, err
	}
	for _, v := range svcs {
		if v.GroupID == scenario.GroupID {
			return v.Backends, nil
		}
	}
	return nil, fmt.Errorf("no service with group %d", scenario.GroupID)
}

// measuredCounters reads flowweight_backend_measured_new_connections_total per backend from
// /metrics.
func measuredCounters(t *testing.T, s *scenario.Scenario) map[string]float64 {
	t.Helper()
	return measuredCountersOf(t, s, "web")
}

// measuredCountersOf is measuredCounters of the named service.
func measuredCountersOf(t *testing.T, s *scenario.Scenario, service string) map[string]float64 {
	t.Helper()
	var text string
	if err := s.APIText(0, "/metrics", &text); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "flowweight_backend_measured_new_connections_total{") || !strings.Contains(line, `service="`+service+`"`) {
			continue
		}
		i := strings.Index(line, `backend="`)
		j := strings.LastIndexByte(line, ' ')
		if i < 0 || j < 0 {
			t.Fatalf("metric line not understood: %q", line)
		}
		name := line[i+len(`backend="`):]
		name = name[:strings.IndexByte(name, '"')]
		v, err := strconv.ParseFloat(line[j+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[name] = v
	}
	return out
}

// waitCountersStill waits until every backend has a counter and they are the same on two
// reads 2 s apart (two controller readings), and returns them.
func waitCountersStill(t *testing.T, s *scenario.Scenario) map[string]float64 {
	t.Helper()
	return waitCountersStillOf(t, s, "web")
}

// waitCountersStillOf is waitCountersStill of the named service.
func waitCountersStillOf(t *testing.T, s *scenario.Scenario, service string) map[string]float64 {
	t.Helper()
	var last map[string]float64
	if _, err := waitFor(20*time.Second, func() error {
		a := measuredCountersOf(t, s, service)
		time.Sleep(2 * time.Second)
		b := measuredCountersOf(t, s, service)
		if len(b) != 3 || fmt.Sprint(a) != fmt.Sprint(b) {
			return fmt.Errorf("measured counters not still: %v then %v", a, b)
		}
		last = b
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return last
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}
