package balancer

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// TestIntentOutOfService: the intent carries affinity_timeout in seconds, and marks a backend
// out of service only when its weight is 0 because it is drained (not while it still has
// weight), so the syncers end its affinities then and only then.
func TestIntentOutOfService(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1e9, 0))
	cfg := testConfig(t, "")
	cfg.Services[0].AffinityTimeout = 3 * time.Second
	b, err := New(cfg, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	feed := func() {
		for _, n := range []string{"a", "b"} {
			b.pool.Accept(&report.Report{BackendID: n, Flags: report.FlagHealthOK, CPUUtil: 0.3, MemUtil: 0.2, CPUCount: 2, MemBytes: 1 << 30}, netip.AddrPort{})
		}
		clk.Advance(11 * time.Second) // past warm-up
	}
	feed()
	feed()
	b.update(context.Background(), true)
	in := b.latest.Load()
	s := in.Services[0]
	if s.AffinityTimeout != 3 {
		t.Fatalf("intent affinity timeout %d, want 3 (seconds)", s.AffinityTimeout)
	}
	for _, be := range s.Backends {
		if be.Weight == 0 || be.OutOfService {
			t.Fatalf("before the drain: %+v", be)
		}
	}
	if err := b.Drain("b", true); err != nil {
		t.Fatal(err)
	}
	feed()
	b.update(context.Background(), true)
	s = b.latest.Load().Services[0]
	if a, bb := s.Backends[0], s.Backends[1]; bb.Weight != 0 || !bb.OutOfService || a.OutOfService {
		t.Fatalf("after draining b: a %+v, b %+v; want b at weight 0 out of service, a in service", a, bb)
	}
}
