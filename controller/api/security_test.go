package api

import (
	"net"
	"testing"
	"time"

	"flowweight/collector/report"
	"flowweight/controller/balancer"
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
	var svcs []balancer.ServiceView
	get(t, r.url+"/api/v1/services", &svcs)
	out := map[string]uint16{}
	for _, b := range svcs[0].Backends {
		out[b.Name] = b.ComputedWeight
	}
	return out
}

// TestForgedReportsNeverChangeWeights: reports with a wrong key, replayed ones and ones from
// an unknown backend are rejected before they reach any backend's state.
func TestForgedReportsNeverChangeWeights(t *testing.T) {
	r := startController(t, "")
	r.feed(t) // both up, seq 1..n from feed
	// A genuine report that says "small" is saturated, captured for replay, then genuine
	// reports that say it is idle again.
	replayMe := sealed(t, testKey, "small", 1000, 1.0)
	r.sendRaw(t, replayMe)
	for seq := uint64(1001); seq < 1040; seq++ {
		r.sendRaw(t, sealed(t, testKey, "small", seq, 0.6))
		r.sendRaw(t, sealed(t, testKey, "big", seq, 0.3))
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // three update periods
	before := weightsOf(t, r)
	rejectedBefore := rejectedCount(t, r)

	wrong := []byte("an-attackers-key-0123456789abcde")
	for i := 0; i < 30; i++ {
		r.sendRaw(t, sealed(t, wrong, "small", 5000+uint64(i), 0.0))   // wrong key: make small look idle
		r.sendRaw(t, replayMe)                                         // replay: make small look saturated
		r.sendRaw(t, sealed(t, testKey, "intruder", uint64(i+1), 0.0)) // not a configured backend
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	after := weightsOf(t, r)
	if before["small"] != after["small"] || before["big"] != after["big"] {
		t.Fatalf("forged reports changed weights: %v -> %v", before, after)
	}
	if got := rejectedCount(t, r) - rejectedBefore; got != 90 {
		t.Fatalf("%d of 90 forged datagrams rejected", got)
	}
	if _, ok := r.b.Pool().Get("intruder"); ok {
		t.Fatal("an unknown backend id created state")
	}
}

func rejectedCount(t *testing.T, r *running) uint64 {
	t.Helper()
	var total uint64
	for _, n := range r.b.PushRejected() {
		total += n
	}
	return total
}
