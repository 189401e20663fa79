package api

import (
	"flowweight/controller/view"
	"net"
	"strings"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

func (r *running) sendRaw(t *testing.T, dg []byte) {
	t.Helper()
	c, err := net.Dial("udp", r.push.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(dg); err != nil {
		t.Fatal(err)
	}
}

func sealed(t *testing.T, key []byte, id string, seq uint64, cpu float64) []byte {
	t.Helper()
	rep := report.Report{BackendID: id, BootNonce: 42, Seq: seq, Time: time.Now(), Interval: time.Second,
		Flags: report.FlagHealthOK, CPUUtil: cpu, CPUCount: 1, MemUtil: 0.3, MemBytes: 4 << 30}
	dg, err := rep.AppendSeal(nil, key)
	if err != nil {
		t.Fatal(err)
	}
	return dg
}

func weightsOf(t *testing.T, r *running) map[string]uint16 {
	var svcs []view.ServiceView
	get(t, r.url+"/api/v1/services", &svcs)
	out := map[string]uint16{}
	for _, b := range svcs[0].Backends {
		out[b.Name] = b.ComputedWeight
	}
	return out
}

// TestForgedReportsNeverChangeWeights: reports with a wrong key, replayed ones and ones from
// an unknown backend are rejected before they reach any backend's state. It waits on the
// counters and on update periods passing (the history's newest point), never on a clock.
func TestForgedReportsNeverChangeWeights(t *testing.T) {
	r := startController(t, "")
	r.feed(t) // both up, seq 1..n from feed
	// A genuine report that says "small" is saturated, captured for replay, then genuine
	// reports that say it is idle again.
	accepted := acceptedCount(t, r)
	replayMe := sealed(t, testKey, "small", 1000, 1.0)
	r.sendRaw(t, replayMe)
	for seq := uint64(1001); seq < 1040; seq++ {
		r.sendRaw(t, sealed(t, testKey, "small", seq, 0.6))
		r.sendRaw(t, sealed(t, testKey, "big", seq, 0.3))
	}
	want := accepted + 1 + 2*39
	testutil.Eventually(t, 10*time.Second, func() (any, bool) { v := acceptedCount(t, r); return v, v >= want }, "79 genuine reports accepted")
	before := settledWeights(t, r)
	rejectedBefore := rejectedCount(t, r)
	acceptedBefore := acceptedCount(t, r)

	wrong := []byte("an-attackers-key-0123456789abcde")
	for i := 0; i < 30; i++ {
		r.sendRaw(t, sealed(t, wrong, "small", 5000+uint64(i), 0.0))   // wrong key: make small look idle
		r.sendRaw(t, replayMe)                                         // replay: make small look saturated
		r.sendRaw(t, sealed(t, testKey, "intruder", uint64(i+1), 0.0)) // not a configured backend
	}
	testutil.Eventually(t, 10*time.Second, func() (any, bool) { v := rejectedCount(t, r) - rejectedBefore; return v, v >= 90 }, "90 forged datagrams counted")
	// Two update periods after the last rejection: had a forged report reached a backend's
	// state, the weights computed in them would show it.
	nextUpdate(t, r)
	nextUpdate(t, r)
	after := weightsOf(t, r)
	if before["small"] != after["small"] || before["big"] != after["big"] {
		t.Fatalf("forged reports changed weights: %v -> %v", before, after)
	}
	if got := rejectedCount(t, r) - rejectedBefore; got != 90 {
		t.Fatalf("%d of 90 forged datagrams rejected", got)
	}
	if got := acceptedCount(t, r) - acceptedBefore; got != 0 {
		t.Fatalf("%v forged datagrams accepted", got)
	}
	if _, ok := r.b.Pool().Get("intruder"); ok {
		t.Fatal("an unknown backend id created state")
	}
}

// lastUpdate is the time of the newest history point: every periodic update adds one.
func lastUpdate(t *testing.T, r *running) time.Time {
	t.Helper()
	var last time.Time
	for _, pts := range r.b.View().History() {
		if n := len(pts); n > 0 && pts[n-1].Time.After(last) {
			last = pts[n-1].Time
		}
	}
	return last
}

// nextUpdate returns once an update period has completed after the call.
func nextUpdate(t *testing.T, r *running) {
	t.Helper()
	from := lastUpdate(t, r)
	testutil.Until(t, 10*time.Second, func() bool { return lastUpdate(t, r).After(from) }, "an update period")
}

// settledWeights waits until the computed weights stay the same over three update periods
// (smoothing moves them for a few periods after the last report) and returns them.
func settledWeights(t *testing.T, r *running) map[string]uint16 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	prev, same := weightsOf(t, r), 0
	for same < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("weights did not settle within 10 s (last %v)", prev)
		}
		nextUpdate(t, r)
		w := weightsOf(t, r)
		if w["small"] == prev["small"] && w["big"] == prev["big"] {
			same++
		} else {
			same = 0
		}
		prev = w
	}
	return prev
}

func acceptedCount(t *testing.T, r *running) float64 {
	t.Helper()
	return counter(t, strings.TrimPrefix(r.url, "http://"), "flowweight_push_reports_accepted_total", "")
}

func rejectedCount(t *testing.T, r *running) uint64 {
	t.Helper()
	var total uint64
	for _, n := range r.b.View().PushRejected() {
		total += n
	}
	return total
}
