//go:build integration && !race

package balancer

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"flowweight/controller/config"
	"flowweight/internal/report"
)

// TestSoak runs 1,000 simulated probes at 1 Hz against one in-process controller (push server,
// backend pool, weights; no switch). It injects wrong-key datagrams and checks that every good
// report is accepted, every bad one rejected, memory and goroutines stay flat, and weights do
// not move while the load does not.
//
// CI runs it for 30 s; the full five minutes:
//
//	FLOWWEIGHT_SOAK=5m go test -tags integration -run TestSoak -timeout 15m -v ./controller/balancer
func TestSoak(t *testing.T) {
	length := 30 * time.Second
	if v := os.Getenv("FLOWWEIGHT_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("FLOWWEIGHT_SOAK=%q: %v", v, err)
		}
		length = d
	}
	const services, perService = 4, 250
	const probes = services * perService
	key := []byte("soak-key-0123456789abcdef0123456")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "push.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "[controller]\nlisten = \"127.0.0.1:0\"\nupdate_period = \"1s\"\n[api]\nlisten = \"\"\n")
	fmt.Fprintf(&sb, "[collector]\npush_listen = \"127.0.0.1:0\"\nkey_file = %q\nstale_after = \"5s\"\n[weighting]\nwarmup = \"3s\"\n", keyFile)
	for s := 0; s < services; s++ {
		fmt.Fprintf(&sb, "[[service]]\nname = \"svc%d\"\nvip = \"10.%d.255.254\"\nport = 80\ngroup_id = %d\n", s, s, s+1)
		for i := 0; i < perService; i++ {
			fmt.Fprintf(&sb, "  [[service.backend]]\n  name = \"b%d-%d\"\n  ip = \"10.%d.%d.%d\"\n", s, i, s, i/200, i%200+1)
		}
	}
	cfg, err := config.Parse("soak.toml", []byte(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	b, pushAddr := runBalancer(t, cfg)

	conns := make([]net.Conn, 8)
	for i := range conns {
		c, err := net.Dial("udp", pushAddr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	names := make([]string, 0, probes)
	for s := 0; s < services; s++ {
		for i := 0; i < perService; i++ {
			names = append(names, fmt.Sprintf("b%d-%d", s, i))
		}
	}
	seq := make([]uint64, probes)
	var good, bad, sendErrs uint64
	buf := make([]byte, 0, 512)
	send := func(i int, wrongKey bool) {
		seq[i]++
		r := report.Report{BackendID: names[i], BootNonce: uint64(i) + 1, Seq: seq[i], Time: time.Now(), Interval: time.Second,
			Flags: report.FlagHealthOK, CPUUtil: 0.2 + 0.6*float64(i%7)/7, CPUCount: float64(1 + i%4), MemUtil: 0.3,
			MemBytes: 8 << 30, Conns: uint32(i % 50)}
		k := key
		if wrongKey {
			k = []byte("not-the-key-0123456789abcdef0123")
		}
		dg, err := r.AppendSeal(buf[:0], k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conns[i%len(conns)].Write(dg); err != nil {
			sendErrs++
			return
		}
		if wrongKey {
			bad++
		} else {
			good++
		}
	}

	// Ten datagrams every 10 ms: each probe reports once a second, phases spread out (a 1 ms
	// ticker drops ticks and would under-send).
	const batch = 10
	start := time.Now()
	tick := time.NewTicker(batch * time.Second / probes)
	defer tick.Stop()
	var heapQ, heapEnd uint64
	var gorQ, gorEnd int
	var weightsMid map[string]uint16
	sampled, midTaken := false, false
	n := 0
	for time.Since(start) < length {
		<-tick.C
		// Catch up to exactly `probes` datagrams per elapsed second even when ticks are late.
		for due := int(time.Since(start) * probes / time.Second); n < due; n++ {
			send(n%probes, n%997 == 0) // ~0.1% injected wrong-key datagrams
		}
		el := time.Since(start)
		if !sampled && el > length/4 {
			heapQ, gorQ, sampled = heap(), runtime.NumGoroutine(), true
		}
		if !midTaken && el > length/2 {
			weightsMid, midTaken = appliedWeights(b), true
		}
	}
	time.Sleep(300 * time.Millisecond) // let the last datagrams in flight be read
	heapEnd, gorEnd = heap(), runtime.NumGoroutine()
	weightsEnd := appliedWeights(b)

	b.mu.Lock()
	srv := b.push.server()
	b.mu.Unlock()
	accepted, rejected := srv.Accepted(), srv.Rejected()
	t.Logf("%v: sent %d good + %d bad datagrams (%d send errors); accepted %d, rejected %v", length, good, bad, sendErrs, accepted, rejected)
	t.Logf("heap %0.1f MiB at 1/4, %0.1f MiB at the end; goroutines %d -> %d", float64(heapQ)/(1<<20), float64(heapEnd)/(1<<20), gorQ, gorEnd)
	if accepted != good {
		t.Errorf("lost reports: %d good sent, %d accepted", good, accepted)
	}
	if rejected[report.ReasonBadMAC] != bad {
		t.Errorf("wrong-key datagrams: %d sent, %d rejected as bad_mac", bad, rejected[report.ReasonBadMAC])
	}
	for reason, c := range rejected {
		if reason != report.ReasonBadMAC && c != 0 {
			t.Errorf("unexpected rejections %s: %d", reason, c)
		}
	}
	if heapEnd > heapQ+4<<20 {
		t.Errorf("heap grew from %d to %d bytes", heapQ, heapEnd)
	}
	if gorEnd > gorQ+5 {
		t.Errorf("goroutines grew from %d to %d", gorQ, gorEnd)
	}
	moved := 0
	for name, w := range weightsEnd {
		d := int(w) - int(weightsMid[name])
		if d < 0 {
			d = -d
		}
		if d > int(cfg.Weighting.DeadBand*float64(cfg.Weighting.Total))+1 {
			moved++
		}
	}
	if moved > 0 || len(weightsEnd) != probes {
		t.Errorf("%d of %d backends' weights moved beyond the dead-band under stable load", moved, len(weightsEnd))
	}
	for _, st := range b.pool.Snapshot(nil) {
		if st.Status.String() != "up" {
			t.Errorf("backend %s is %s at the end", st.Name, st.Status)
			break
		}
	}
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func appliedWeights(b *Balancer) map[string]uint16 {
	out := map[string]uint16{}
	for _, s := range b.View().Services() {
		for _, be := range s.Backends {
			out[be.Name] = be.AppliedWeight
		}
	}
	return out
}
