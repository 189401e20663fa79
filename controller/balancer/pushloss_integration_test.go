//go:build integration

package balancer

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"flowweight/controller/config"
	"flowweight/weights"
)

// lossyRelay forwards UDP datagrams to dst and drops a seeded fraction of them: the push path
// with packet loss, for kernels without netem (this machine's has no sch_netem).
func lossyRelay(t *testing.T, dst string, loss float64) (addr string, stats func() (in, out int)) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.Dial("udp", dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); up.Close() })
	rng := rand.New(rand.NewPCG(30, 70))
	counts := make(chan [2]int, 1)
	counts <- [2]int{}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			c := <-counts
			c[0]++
			if rng.Float64() >= loss {
				c[1]++
				_, _ = up.Write(buf[:n])
			}
			counts <- c
		}
	}()
	return pc.LocalAddr().String(), func() (int, int) { c := <-counts; counts <- c; return c[0], c[1] }
}

// TestPushLoss30 runs two real probes against one controller, one of them behind 30% datagram
// loss. With stale_after several intervals the lossy backend must stay up the whole time (no
// flapping to stale), and exactly the relayed reports must be accepted.
func TestPushLoss30(t *testing.T) {
	dir := t.TempDir()
	probeBin := filepath.Join(dir, "probe")
	if out, err := exec.Command("go", "build", "-o", probeBin, "flowweight/probe").CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v\n%s", err, out)
	}
	key := filepath.Join(dir, "push.key")
	if err := os.WriteFile(key, []byte("loss-test-key-0123456789abcdef01"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("loss.toml", []byte(fmt.Sprintf(`
[controller]
listen = "127.0.0.1:0"
update_period = "200ms"
[api]
listen = ""
[collector]
push_listen = "127.0.0.1:0"
key_file = %q
stale_after = "1s"
[weighting]
warmup = "1s"
[[service]]
name = "web"
vip = "10.0.0.100"
port = 80
group_id = 1
  [[service.backend]]
  name = "lossy"
  ip = "10.0.0.1"
  [[service.backend]]
  name = "clean"
  ip = "10.0.0.2"
`, key)))
	if err != nil {
		t.Fatal(err)
	}
	b, pushAddr := runBalancer(t, cfg)
	push := pushAddr.String()
	relay, relayed := lossyRelay(t, push, 0.30)

	const interval = 100 * time.Millisecond // stale_after = 10 intervals
	start := func(name, collector string) *exec.Cmd {
		conf := filepath.Join(dir, name+".toml")
		body := fmt.Sprintf("backend_id = %q\ncollector = %q\nkey_file = %q\ninterval = %q\njitter = 0\ndrain_file = %q\n",
			name, collector, key, interval.String(), filepath.Join(dir, name+".drain"))
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(probeBin, "-config", conf)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
		return cmd
	}
	start("lossy", relay)
	start("clean", push)

	// Wait until both are up, then watch for 10 s: the lossy one must never leave up.
	deadline := time.Now().Add(15 * time.Second)
	for {
		a, _ := b.pool.Get("lossy")
		c, _ := b.pool.Get("clean")
		if a.Status == weights.StatusUp && c.Status == weights.StatusUp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not up within 15 s: lossy %v, clean %v", a.Status, c.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	a0, _ := b.pool.Get("lossy")
	c0, _ := b.pool.Get("clean")
	in0, out0 := relayed()
	flaps := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if a, _ := b.pool.Get("lossy"); a.Status != weights.StatusUp {
			flaps++
		}
	}
	a1, _ := b.pool.Get("lossy")
	c1, _ := b.pool.Get("clean")
	in1, out1 := relayed()
	lossyGot, cleanGot := a1.Reports-a0.Reports, c1.Reports-c0.Reports
	sent, passed := in1-in0, out1-out0
	t.Logf("10 s at %v interval: lossy probe sent %d, relay passed %d (%.0f%% lost), collector accepted %d; clean probe accepted %d; lossy samples not up: %d",
		interval, sent, passed, 100*float64(sent-passed)/float64(sent), lossyGot, cleanGot, flaps)
	if flaps != 0 {
		t.Errorf("the lossy backend left state up %d times in 10 s", flaps)
	}
	if lost := float64(sent-passed) / float64(sent); lost < 0.2 || lost > 0.4 {
		t.Errorf("relay dropped %.2f of the datagrams, want about 0.30", lost)
	}
	// Datagrams in flight at the two snapshot instants may fall either side: allow 2.
	if d := int(lossyGot) - passed; d < -2 || d > 2 {
		t.Errorf("collector accepted %d of the lossy backend's reports, the relay passed %d: reports lost beyond the injected loss", lossyGot, passed)
	}
	if cleanGot < uint64(float64(sent)*0.9) {
		t.Errorf("clean backend: %d reports accepted while the lossy probe sent %d", cleanGot, sent)
	}
}
