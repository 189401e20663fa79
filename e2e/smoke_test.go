//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"flowweight/e2e/lab"
)

// buildBackendd builds cmd/backendd into dir (never into the source tree).
func buildBackendd(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "backendd")
	out, err := exec.Command("go", "build", "-o", bin, "flowweight/cmd/backendd").CombinedOutput()
	if err != nil {
		t.Fatalf("build backendd: %v\n%s", err, out)
	}
	return bin
}

// waitHTTP polls url from host until it answers 200 or the deadline passes.
func waitHTTP(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := c.Get(url)
		if err == nil {
			body, rerr := io.ReadAll(res.Body)
			res.Body.Close()
			if rerr == nil && res.StatusCode == http.StatusOK {
				return string(body)
			}
			err = fmt.Errorf("status %d, read %v", res.StatusCode, rerr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type loadResult struct {
	ok, failed int64
	elapsed    time.Duration
}

func (r loadResult) rate() float64 { return float64(r.ok) / r.elapsed.Seconds() }

// load runs workers clients against url, each request on a new connection,
// until maxReq requests were issued or maxDur passed.
func load(c *http.Client, url string, workers int, maxReq int64, maxDur time.Duration) loadResult {
	var issued, ok, failed atomic.Int64
	start := time.Now()
	deadline := start.Add(maxDur)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) && issued.Add(1) <= maxReq {
				res, err := c.Get(url)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, err = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if err != nil || res.StatusCode != http.StatusOK {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	return loadResult{ok: ok.Load(), failed: failed.Load(), elapsed: time.Since(start)}
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

// TestLabSmoke drives every part of the harness against the real daemons:
// NORMAL switching across the bridge, TCP through the userspace datapath,
// CPU quotas limiting throughput, the group parser on the switch's own
// output, a vswitchd restart, and a teardown that leaves nothing behind.
func TestLabSmoke(t *testing.T) {
	l := lab.ForTest(t)
	bin := buildBackendd(t, l.Dir)

	o, err := l.StartOVS()
	if err != nil {
		t.Fatal(err)
	}
	br, err := o.AddBridge("br0", "", "standalone")
	if err != nil {
		t.Fatal(err)
	}
	client, err := br.AddHost("client", netip.MustParsePrefix("10.77.1.10/24"))
	if err != nil {
		t.Fatal(err)
	}
	quotas := []float64{0.25, 1.0}
	var backends []*lab.Host
	var cgroups []*lab.Cgroup
	var procs []*lab.Proc
	for i, q := range quotas {
		name := fmt.Sprintf("be%d", i+1)
		h, err := br.AddHost(name, netip.MustParsePrefix(fmt.Sprintf("10.77.1.%d/24", 11+i)))
		if err != nil {
			t.Fatal(err)
		}
		cg, err := l.NewCgroup(name, q)
		if err != nil {
			t.Fatal(err)
		}
		cmd := h.Command(context.Background(), bin, "-listen", h.Addr().String()+":8080", "-name", name, "-work", "20000")
		p, err := l.Start(name, cmd, cg)
		if err != nil {
			t.Fatal(err)
		}
		backends, cgroups, procs = append(backends, h), append(cgroups, cg), append(procs, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("ping", func(t *testing.T) {
		for _, h := range backends {
			rtts, err := client.Ping(ctx, h.Addr(), 3, 500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if len(rtts) == 0 {
				t.Fatalf("ping %s from client: no reply of 3", h.Addr())
			}
			t.Logf("ping %s: %d/3 replies, rtt %v", h.Addr(), len(rtts), rtts)
		}
	})

	hc := client.HTTPClient(5 * time.Second)
	t.Run("http", func(t *testing.T) {
		for _, h := range backends {
			body := waitHTTP(t, hc, "http://"+h.Addr().String()+":8080/")
			if body != h.Name+"\n" {
				t.Fatalf("GET / on %s = %q, want %q", h.Name, body, h.Name+"\n")
			}
			waitHTTP(t, hc, "http://"+h.Addr().String()+":8080/health")
		}
	})

	t.Run("cgroups", func(t *testing.T) {
		for i, cg := range cgroups {
			pids, err := cg.Procs()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(pids, procs[i].PID) {
				t.Fatalf("cgroup %s holds %v, want backendd pid %d", cg.Name, pids, procs[i].PID)
			}
			v1, v2 := lab.QuotaLine(quotas[i])
			var got string
			if cg.Version == lab.CgroupV1 {
				b, err := os.ReadFile(filepath.Join(cg.Path(), "cpu.cfs_quota_us"))
				if err != nil {
					t.Fatal(err)
				}
				got, v2 = strings.TrimSpace(string(b)), v1
			} else {
				b, err := os.ReadFile(filepath.Join(cg.Path(), "cpu.max"))
				if err != nil {
					t.Fatal(err)
				}
				got = strings.TrimSpace(string(b))
			}
			if got != v2 {
				t.Fatalf("cgroup %s (%v) quota %q, want %q", cg.Name, cg.Version, got, v2)
			}
		}
	})

	t.Run("quota orders throughput", func(t *testing.T) {
		// Both backends are loaded at the same time, so they share whatever
		// CPU the machine has left; only the quota differs.
		results := make([]loadResult, len(backends))
		usage0 := make([]int64, len(backends))
		for i, cg := range cgroups {
			usage0[i] = cpuUsageNS(t, cg)
		}
		var wg sync.WaitGroup
		for i, h := range backends {
			wg.Go(func() {
				results[i] = load(hc, "http://"+h.Addr().String()+":8080/", 4, 1000, 3*time.Second)
			})
		}
		wg.Wait()
		for i, r := range results {
			used := time.Duration(cpuUsageNS(t, cgroups[i]) - usage0[i])
			t.Logf("%s quota %.2f: %d ok, %d failed in %v = %.1f req/s, cgroup cpu %v (%.2f cores)",
				backends[i].Name, quotas[i], r.ok, r.failed, r.elapsed.Round(time.Millisecond), r.rate(), used.Round(time.Millisecond), used.Seconds()/r.elapsed.Seconds())
			if r.ok == 0 {
				t.Fatalf("%s served nothing", backends[i].Name)
			}
		}
		if results[0].rate() >= results[1].rate() {
			t.Fatalf("quota %.2f backend served %.1f req/s, not fewer than quota %.2f backend's %.1f req/s",
				quotas[0], results[0].rate(), quotas[1], results[1].rate())
		}
	})

	t.Run("group weights", func(t *testing.T) {
		spec := fmt.Sprintf("group_id=10,type=select,bucket=weight:10,actions=output:%d,bucket=weight:20,actions=output:%d,bucket=weight:30,actions=output:%d",
			client.OFPort, backends[0].OFPort, backends[1].OFPort)
		if _, err := br.Ofctl("add-group", spec); err != nil {
			t.Fatal(err)
		}
		got, err := br.GroupWeights(10)
		if err != nil {
			t.Fatal(err)
		}
		want := []lab.BucketWeight{
			{BucketID: 0, Weight: 10, Actions: fmt.Sprintf("output:%d", client.OFPort)},
			{BucketID: 1, Weight: 20, Actions: fmt.Sprintf("output:%d", backends[0].OFPort)},
			{BucketID: 2, Weight: 30, Actions: fmt.Sprintf("output:%d", backends[1].OFPort)},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("GroupWeights(10) = %+v, want %+v", got, want)
		}
		if _, err := br.GroupWeights(11); err == nil {
			t.Fatal("GroupWeights of a missing group succeeded")
		}
	})

	t.Run("restart", func(t *testing.T) {
		before := o.PID()
		if err := o.Restart(); err != nil {
			t.Fatal(err)
		}
		if o.PID() == before {
			t.Fatalf("ovs-vswitchd pid %d unchanged by Restart", before)
		}
		if _, err := br.GroupWeights(10); err == nil {
			t.Fatal("group 10 survived a vswitchd restart; resync tests would prove nothing")
		}
		waitHTTP(t, hc, "http://"+backends[1].Addr().String()+":8080/health")
	})

	// Teardown must leave nothing with the lab's prefix behind.
	var pids []int
	for _, p := range procs {
		pids = append(pids, p.PID)
	}
	pids = append(pids, o.PID())
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertNoLeftovers(t, l, pids)
}

func cpuUsageNS(t *testing.T, cg *lab.Cgroup) int64 {
	t.Helper()
	if cg.Version == lab.CgroupV1 {
		return readInt(t, filepath.Join(cg.CPUAcctPath(), "cpuacct.usage"))
	}
	b, err := os.ReadFile(filepath.Join(cg.Path(), "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n * 1000
		}
	}
	t.Fatalf("%s/cpu.stat: no usage_usec", cg.Path())
	return 0
}

func assertNoLeftovers(t *testing.T, l *lab.Lab, pids []int) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), l.Prefix) {
		t.Errorf("namespaces left: %s", out)
	}
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range links {
		if strings.HasPrefix(e.Name(), l.Prefix) {
			t.Errorf("interface left: %s", e.Name())
		}
	}
	lay, err := lab.DetectCgroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{lay.CPU, lay.CPUAcct} {
		if root == "" {
			continue
		}
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), l.Prefix) {
				t.Errorf("cgroup left: %s/%s", root, e.Name())
			}
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists (kill 0: %v)", pid, err)
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), l.Dir) {
			t.Errorf("process %s still runs from the lab dir: %q", e.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}

// TestSweepRemovesLeftovers leaves a lab without closing it, as a killed
// demo would, and checks that Sweep finds and removes all of it.
func TestSweepRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	l, err := lab.New(dir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // after Sweep its teardowns find nothing or fail harmlessly
	o, err := l.StartOVS()
	if err != nil {
		t.Fatal(err)
	}
	br, err := o.AddBridge("br0", "tcp:127.0.0.1:1", "secure")
	if err != nil {
		t.Fatal(err)
	}
	h, err := br.AddHost("h1", netip.MustParsePrefix("10.77.2.10/24"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.NewCgroup("cg", 0.5); err != nil {
		t.Fatal(err)
	}
	sleeper, err := l.Start("sleeper", h.Command(context.Background(), "sleep", "60"), nil)
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{o.PID(), sleeper.PID}
	var log strings.Builder
	if err := lab.Sweep(l.Prefix, dir, &log); err != nil {
		t.Fatalf("Sweep: %v\n%s", err, log.String())
	}
	// The lab's own processes are reaped by their Wait goroutines.
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range []*lab.Proc{sleeper} {
		select {
		case <-p.Done():
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%s (pid %d) survived Sweep", p.Name, p.PID)
		}
	}
	waitGone := func(pid int) {
		for time.Now().Before(deadline) {
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, pid := range pids {
		waitGone(pid)
	}
	assertNoLeftovers(t, l, pids)
	t.Logf("sweep log:\n%s", log.String())
}

// TestSecondSwitchWaitsForLock checks the host-wide lock that keeps two lab
// switches (which would fight over the ovs-netdev tap) from running at once.
func TestSecondSwitchWaitsForLock(t *testing.T) {
	a := lab.ForTest(t)
	if _, err := a.StartOVS(); err != nil {
		t.Fatal(err)
	}
	old := lab.LockWait
	lab.LockWait = 500 * time.Millisecond
	defer func() { lab.LockWait = old }()
	b := lab.ForTest(t)
	if _, err := b.StartOVS(); err == nil || !strings.Contains(err.Error(), "host lock") {
		t.Fatalf("second StartOVS while the first switch runs: err %v, want a host lock error", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	o, err := b.StartOVS()
	if err != nil {
		t.Fatalf("StartOVS after the first lab closed: %v", err)
	}
	if _, err := o.AddBridge("br0", "", "standalone"); err != nil {
		t.Fatal(err)
	}
}
