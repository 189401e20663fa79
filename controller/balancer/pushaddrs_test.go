package balancer

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// TestPushSparesConfiguredAddresses: the push server knows each probe backend's configured
// address from the start and from every reload, so after a controller restart (no report
// accepted yet) a flood forged from a backend's address neither sheds its probe's signed
// reports nor gets the address on the kernel drop list. Loopback addresses stand for the
// backends' own.
func TestPushSparesConfiguredAddresses(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef") // testConfig's shared key
	cfg := testConfig(t, "")
	cfg.Services[0].Backends[0].IP = "127.0.0.5"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, pushAddr, _ := startInProcess(t, b)
	dst := pushAddr.(*net.UDPAddr)
	seal := func(id string, seq uint64, k []byte) []byte {
		r := report.Report{BackendID: id, BootNonce: 7, Seq: seq, Time: time.Now(), Interval: time.Second,
			Flags: report.FlagHealthOK, CPUUtil: 0.2, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30}
		d, err := r.AppendSeal(nil, k)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	attack := func(id, ip string) {
		t.Helper()
		dial := func() *net.UDPConn {
			c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(ip+":0")), dst)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		forger, probe := dial(), dial()
		badBefore := b.View().PushRejected()[string(report.ReasonBadMAC)]
		wrong := []byte("a-key-that-is-not-the-probes-key")
		for i := range 150 {
			if _, err := forger.Write(seal(id, uint64(i+1), wrong)); err != nil {
				t.Fatal(err)
			}
		}
		// The forged datagrams may reach another read loop than the probe's: wait until the
		// failure budget's worth (100) was handled, as the flood would have been by then.
		testutil.Eventually(t, 5*time.Second, func() (map[string]uint64, bool) {
			r := b.View().PushRejected()
			return r, r[string(report.ReasonBadMAC)]-badBefore >= 100
		}, "forged datagrams handled (rejected)")
		before, _ := b.Pool().Get(id)
		for seq := uint64(1); seq <= 20; seq++ {
			if _, err := probe.Write(seal(id, seq, key)); err != nil {
				t.Fatal(err)
			}
		}
		testutil.Eventually(t, 5*time.Second, func() (string, bool) {
			st, _ := b.Pool().Get(id)
			n := st.Reports - before.Reports
			return fmt.Sprintf("%d accepted, rejected %v", n, b.View().PushRejected()), n == 20
		}, "backend %s: its probe's 20 reports accepted after 150 forged from %s", id, ip)
	}
	attack("a", "127.0.0.5")

	next := testConfig(t, "")
	next.Collector.KeyFile = b.Config().Collector.KeyFile
	next.Services[0].Backends[0].IP = "127.0.0.5"
	next.Services[0].Backends[1].IP = "127.0.0.6" // a reload gives b its address
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(next); err != nil {
		t.Fatal(err)
	}
	attack("b", "127.0.0.6")
}
