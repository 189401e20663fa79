//go:build integration

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// The fault tests not covered by controller_integration_test.go (which has the killed and
// frozen probe, the switch restart, a clean controller restart and drift repair): an SNMP
// agent that dies, lossy push datagrams, and a controller killed in the middle of a
// reweight. Each ends with the switch in a stated state and the scenario torn down.

// TestFaultControllerKilledMidRewrite triggers a weight-changing reload and SIGKILLs the
// controller right after it (several delays, to land before, during and after the group
// rewrite). Whatever the switch held at the kill, the restarted controller must leave
// exactly the flows and group of a clean run with the new weights: no duplicate flow, no
// stale bucket, the new weights.
func TestFaultControllerKilledMidRewrite(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 61, Quotas: []float64{0.5, 0.5, 0.5}, Work: 200,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	a, b := []float64{1, 1, 1}, []float64{1, 2, 4}

	// The clean run: reload to b and let it settle; this is the reference state.
	if err := s.Reload(b, ""); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, s)
	stableSync(t, s, 30*time.Second)
	clean, err := takeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clean run: %d flows, weights %v", len(clean.flows), clean.weights)

	for _, delay := range []time.Duration{0, 30 * time.Millisecond, 300 * time.Millisecond, 1200 * time.Millisecond} {
		if err := s.Reload(a, ""); err != nil {
			t.Fatal(err)
		}
		base := stableSync(t, s, 30*time.Second)
		if slices.Equal(sortedWeights(base), sortedWeights(clean.weights)) {
			t.Fatalf("weights with capacities %v equal those with %v (%v): the reload would change nothing", a, b, base)
		}
		// Write b and SIGHUP by hand: Reload would wait for the event, and the point is to
		// kill before the controller is done.
		text := scenario.ControllerTOML(s.Opts, s.Socket, s.KeyFile, b, s.Opts.Mode)
		if err := os.WriteFile(s.ConfigPath+".tmp", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(s.ConfigPath+".tmp", s.ConfigPath); err != nil {
			t.Fatal(err)
		}
		pid := s.ControllerPID()
		if pid == 0 {
			t.Fatal("controller not running")
		}
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
			t.Fatalf("SIGHUP controller %d: %v", pid, err)
		}
		time.Sleep(delay)
		if err := s.KillController(); err != nil {
			t.Fatal(err)
		}
		atKill, err := s.GroupWeights()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.StartController(); err != nil {
			t.Fatal(err)
		}
		// Flows and buckets exactly as in the clean run, weights equal to the applied ones
		// and within the dead-band of the clean run's: the restarted controller starts from
		// the weights the switch holds and moves by at most max_step per update, and stops
		// rewriting once no bucket would move by more than dead_band, so its last step may
		// end a few units from where the clean run's path ended.
		band := int(math.Ceil(s.Opts.DeadBand * 1000))
		var got map[string]uint16
		d, err := waitFor(30*time.Second, func() error {
			if err := s.WaitReady(0); err != nil {
				return err
			}
			if err := clean.sameAs(s); err != nil {
				return err
			}
			got, err = s.GroupWeights()
			if err != nil {
				return err
			}
			for name, w := range clean.weights {
				if diff := int(got[name]) - int(w); diff > band || diff < -band {
					return fmt.Errorf("%s: weight %d, clean run %d (dead-band %d)", name, got[name], w, band)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("kill %v after SIGHUP (switch then held %v): state after restart differs from the clean run: %v", delay, atKill, err)
		}
		figure(t, fmt.Sprintf("controller killed %v after a reweighting SIGHUP", delay), "switch held %v at the kill (before %v); after restart %v (clean run %v), same flows and buckets, in %v",
			atKill, base, got, clean.weights, d.Round(10*time.Millisecond))
		// Restore the scenario's own idea of the configuration (it still believes a).
		if err := s.Reload(b, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := clean.sameAs(s); err != nil {
		t.Fatalf("end state: %v", err)
	}
}

// The 30% push-loss fault is tested in controller/balancer (TestPushLoss30) with real probes
// behind a seeded lossy relay: this machine's kernel has no netem (CONFIG_NET_SCH_NETEM is not
// set), so a tc-netem version could never run here.
func acceptedOver(s *scenario.Scenario, d time.Duration, each func() error) (float64, error) {
	c0, err := acceptedReports(s)
	if err != nil {
		return 0, err
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if each != nil {
			if err := each(); err != nil {
				return 0, err
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	c1, err := acceptedReports(s)
	if err != nil {
		return 0, err
	}
	return c1 - c0, nil
}

func acceptedReports(s *scenario.Scenario) (float64, error) {
	res, err := s.Ctl.HTTPClient(5 * time.Second).Get("http://" + scenario.APIAddr + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	const name = "flowweight_push_reports_accepted_total "
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	return 0, fmt.Errorf("metrics: no %s", strings.TrimSpace(name))
}

// TestFaultSNMPAgentGone adds a backend polled by SNMP (Debian's snmpd inside its own
// namespace), waits until it carries traffic, kills the agent, and expects the backend
// evicted (down) after fail_threshold failed polls while the probe backends keep their
// weights relative to each other and stay up.
func TestFaultSNMPAgentGone(t *testing.T) {
	const snmpdPath = "/usr/sbin/snmpd"
	if _, err := os.Stat(snmpdPath); err != nil {
		t.Fatalf("snmpd is required (apt-get install snmpd): %v", err)
	}
	// stale_after above fail_threshold × poll_interval (3 × 5 s): the health path must be
	// what evicts, and an SNMP backend must not go stale between two polls.
	o := scenario.Options{Net: 63, Quotas: []float64{0.5, 0.5}, Work: 200, StaleAfter: 20 * time.Second,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}}
	s := startScenario(t, o)
	ip := netip.AddrFrom4([4]byte{10, 77, o.Net, 20})
	h, err := s.Bridge.AddHost("snmp1", netip.PrefixFrom(ip, 24))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	addr := ip.String() + ":" + strconv.Itoa(scenario.BackendPort)
	if _, err := s.Lab.Start("snmp1-http", h.Command(ctx, s.Opts.Bins.Backendd, "-listen", addr, "-name", "snmp1", "-work", "200"), nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "snmpd.conf")
	ctlIP := netip.AddrFrom4([4]byte{10, 77, o.Net, 2})
	if err := os.WriteFile(conf, []byte("rocommunity fwtest "+ctlIP.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agent, err := s.Lab.Start("snmp1-snmpd", h.Command(ctx, snmpdPath, "-f", "-Lf", filepath.Join(dir, "snmpd.log"), "-C", "-c", conf,
		"-p", filepath.Join(dir, "snmpd.pid"), "-m", "", "-I", "-smux", "udp:"+ip.String()+":161"), nil)
	if err != nil {
		t.Fatal(err)
	}
	extra := map[string]string{"snmp1": ip.String()}
	s.Opts.ExtraTOML = fmt.Sprintf(`  [[service.backend]]
  name = "snmp1"
  ip = %q
  port = %d
  source = "snmp"
  health_url = "http://%s/health"

    [service.backend.snmp]
    version = "v2c"
    community = "fwtest"
`, ip, scenario.BackendPort, addr)
	if err := s.Reload(nil, ""); err != nil {
		t.Fatal(err)
	}
	var before map[string]uint16
	_, err = waitFor(60*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		for _, b := range v.Backends {
			if b.State != "up" {
				return fmt.Errorf("backend %s is %q (health %q)", b.Name, b.State, b.Health)
			}
		}
		before, err = inSyncWith(s, extra)
		if err != nil {
			return err
		}
		if len(before) != 3 || before["snmp1"] == 0 {
			return fmt.Errorf("group buckets %v, want three with snmp1 non-zero", before)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("snmp backend never up with a bucket: %v\nsnmpd log:\n%s", err, tail(filepath.Join(dir, "snmpd.log")))
	}
	before = stableSyncWith(t, s, extra, 20*time.Second)
	t.Logf("weights with the SNMP backend up: %v", before)

	if err := agent.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-agent.Done()
	o = s.Opts // with the defaults filled in
	bound := time.Duration(o.FailThreshold)*5*time.Second + o.UpdatePeriod + 5*time.Second
	var state string
	d, err := waitFor(bound, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		bv, _ := v.Backend("snmp1")
		state = bv.State
		if bv.State != "down" {
			return fmt.Errorf("snmp1 is %q", bv.State)
		}
		w, err := inSyncWith(s, extra)
		if err != nil {
			return err
		}
		if w["snmp1"] != 0 {
			return fmt.Errorf("snmp1 bucket weight %d", w["snmp1"])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("snmp1 not evicted within %v after its agent died (state %q): %v", bound, state, err)
	}
	figure(t, "SNMP backend evicted after its agent was killed", "%v (fail_threshold %d, poll_interval 5s)", d.Round(10*time.Millisecond), o.FailThreshold)
	after := stableSyncWith(t, s, extra, 20*time.Second)
	v, err := s.Service()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"be1", "be2"} {
		if bv, _ := v.Backend(name); bv.State != "up" || after[name] == 0 {
			t.Errorf("%s is %q with weight %d after snmp1's eviction, want up and non-zero", name, bv.State, after[name])
		}
	}
	r0 := float64(before["be1"]) / float64(before["be2"])
	r1 := float64(after["be1"]) / float64(after["be2"])
	if math.Abs(r1-r0) > 0.02*r0 {
		t.Errorf("be1/be2 weights %v before, %v after snmp1's eviction: the others' ratio moved", before, after)
	}
	figure(t, "weights before → after the SNMP backend's eviction", "%v → %v", before, after)
}

// waitWarm waits until every backend is up (past warm-up).
func waitWarm(t testing.TB, s *scenario.Scenario) {
	t.Helper()
	_, err := waitFor(30*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		for _, b := range v.Backends {
			if b.State != "up" {
				return fmt.Errorf("backend %s is %q", b.Name, b.State)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func sortedWeights(w map[string]uint16) []uint16 {
	var out []uint16
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range w {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, w[k])
	}
	return out
}

// cpuOnly makes declared capacity the CPU count alone, so static weights follow the quotas
// and capacity factors exactly (the memory term follows each cgroup's memory and moves).
const cpuOnly = "{ cpu = 1.0, mem = 0.0 }"

// inSyncWith is Scenario.InSync for a service that also has backends the scenario did not
// start (extra: name -> IPv4 address): the switch's buckets by backend, checked against the
// API's applied weights.
func inSyncWith(s *scenario.Scenario, extra map[string]string) (map[string]uint16, error) {
	v, err := s.Service()
	if err != nil {
		return nil, err
	}
	buckets, err := s.Bridge.GroupWeights(scenario.GroupID)
	if err != nil {
		return nil, err
	}
	ips := map[string]string{}
	for _, b := range s.Backends {
		ips[b.Name] = b.Host.Addr().String()
	}
	for k, ip := range extra {
		ips[k] = ip
	}
	got, err := scenario.BucketsByBackend(buckets, ips)
	if err != nil {
		return nil, err
	}
	return got, scenario.CompareWeights(got, v.Slots())
}

// stableSyncWith is stableSync with extra backends (see inSyncWith).
func stableSyncWith(t *testing.T, s *scenario.Scenario, extra map[string]string, timeout time.Duration) map[string]uint16 {
	t.Helper()
	var last map[string]uint16
	_, err := waitFor(timeout, func() error {
		a, err := inSyncWith(s, extra)
		if err != nil {
			return err
		}
		time.Sleep(1500 * time.Millisecond)
		b, err := inSyncWith(s, extra)
		if err != nil {
			return err
		}
		if fmt.Sprint(a) != fmt.Sprint(b) {
			return fmt.Errorf("weights still moving: %v then %v", a, b)
		}
		last = b
		return nil
	})
	if err != nil {
		t.Fatalf("dump-groups never stably equal to the applied weights in %v: %v", timeout, err)
	}
	return last
}
