package balancer

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowweight/controller/config"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// BenchmarkUpdate is one periodic update of a controller with 10,000 backends that all
// reported, no switch connected: the pool's snapshot, the weights, the metrics, the intent.
func BenchmarkUpdate(b *testing.B) {
	for _, c := range []struct{ services, backends int }{{1000, 10}, {10, 1000}} {
		b.Run(fmt.Sprintf("%dx%d", c.services, c.backends), func(b *testing.B) {
			key := filepath.Join(b.TempDir(), "push.key")
			if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			var sb strings.Builder
			fmt.Fprintf(&sb, "[controller]\nlisten = \"127.0.0.1:0\"\n[api]\nlisten = \"\"\n[collector]\npush_listen = \"127.0.0.1:0\"\nkey_file = %q\n", key)
			for i := range c.services {
				fmt.Fprintf(&sb, "[[service]]\nname = \"s%d\"\nvip = \"10.%d.%d.250\"\nport = 80\ngroup_id = %d\n", i, 100+i/250, i%250, i+1)
				for j := range c.backends {
					n := i*c.backends + j
					fmt.Fprintf(&sb, "  [[service.backend]]\n  name = \"b%d\"\n  ip = \"10.%d.%d.%d\"\n", n, 200+n/62500, (n/250)%250, n%250+1)
				}
			}
			cfg, err := config.Parse("bench.toml", []byte(sb.String()))
			if err != nil {
				b.Fatal(err)
			}
			clk := testutil.NewClock(time.Unix(1e9, 0))
			bal, err := New(cfg, Options{Now: clk.Now})
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range cfg.Services {
				for _, be := range s.Backends {
					bal.pool.Accept(&report.Report{BackendID: be.Name, Flags: report.FlagHealthOK, CPUUtil: 0.3, CPUCount: 2,
						MemUtil: 0.2, MemBytes: 1 << 30, Time: clk.Now()}, netip.AddrPort{})
				}
			}
			ctx := context.Background()
			bal.update(ctx, true)
			b.ReportAllocs()
			for b.Loop() {
				clk.Advance(time.Second)
				bal.update(ctx, true)
			}
		})
	}
}
