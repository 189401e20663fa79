package balancer

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// TestCapturedReportRefusedAfterRestart is the review's finding: replay state lived only in
// memory, so after a controller restart captured datagrams were accepted again. The marks now
// go to the state file when the controller stops and come back before the push server serves.
func TestCapturedReportRefusedAfterRestart(t *testing.T) {
	cfg := testConfig(t, "")
	key, err := report.LoadKey(cfg.Collector.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	statePath := filepath.Join(t.TempDir(), "controller.state")
	now := time.Now()
	captured := make([][]byte, 3)
	for i := range captured {
		r := report.Report{BackendID: "a", BootNonce: 0x5eed, Seq: uint64(i + 1), Time: now.Add(time.Duration(i) * time.Millisecond),
			Interval: time.Second, Flags: report.FlagHealthOK, CPUUtil: 0.2, CPUCount: 2, MemUtil: 0.1, MemBytes: 1 << 30}
		if captured[i], err = r.AppendSeal(nil, key); err != nil {
			t.Fatal(err)
		}
	}

	// run starts a controller on the state file, sends the datagrams, waits until the push
	// server has judged them all, and stops it (which writes the state file).
	run := func() (accepted, replays uint64) {
		b, err := New(cfg, Options{StatePath: statePath})
		if err != nil {
			t.Fatal(err)
		}
		_, addr, stop := startInProcess(t, b)
		c, err := net.Dial("udp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, d := range captured {
			if _, err := c.Write(d); err != nil {
				t.Fatal(err)
			}
		}
		judged := func() uint64 {
			n := b.push.server().Accepted()
			for _, v := range b.push.server().Rejected() {
				n += v
			}
			return n
		}
		testutil.Until(t, 10*time.Second, func() bool { return judged() == uint64(len(captured)) }, "all three datagrams judged")
		accepted, replays = b.push.server().Accepted(), b.push.server().Rejected()[report.ReasonReplay]
		stop() // writes the state file
		return accepted, replays
	}

	if acc, _ := run(); acc != 3 {
		t.Fatalf("first run accepted %d of the 3 genuine reports", acc)
	}
	acc, replays := run()
	if acc != 0 || replays != 3 {
		t.Fatalf("after a restart the 3 captured datagrams were accepted %d times, refused as replays %d times; want 0 and 3", acc, replays)
	}
}

// TestCapturedReportRefusedAfterRemoveAndRestore: a backend removed by a reload and put back
// within the pool's grace keeps its replay state, so its captured reports stay refused (the
// review found them accepted: the removal forgot the backend's epoch).
func TestCapturedReportRefusedAfterRemoveAndRestore(t *testing.T) {
	cfg := testConfig(t, "")
	key, err := report.LoadKey(cfg.Collector.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	r := report.Report{BackendID: "a", BootNonce: 0x5eed, Seq: 1, Time: time.Now(), Interval: time.Second,
		Flags: report.FlagHealthOK, CPUUtil: 0.2, CPUCount: 2, MemUtil: 0.1, MemBytes: 1 << 30}
	captured, err := r.AppendSeal(nil, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, Options{StatePath: filepath.Join(t.TempDir(), "controller.state")})
	if err != nil {
		t.Fatal(err)
	}
	_, push, _ := startInProcess(t, b)
	c, err := net.Dial("udp", push.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(what string, accepted, replays uint64) {
		t.Helper()
		if _, err := c.Write(captured); err != nil {
			t.Fatal(err)
		}
		testutil.Until(t, 10*time.Second, func() bool {
			return b.push.server().Accepted() == accepted && b.push.server().Rejected()[report.ReasonReplay] == replays
		}, "%s", what)
	}
	send("the genuine report accepted", 1, 0)

	without := testConfig(t, "")
	without.Collector.KeyFile = cfg.Collector.KeyFile
	without.Services[0].Backends = without.Services[0].Backends[1:] // a removed: one of two
	if err := b.Reload(without); err != nil {
		t.Fatal(err)
	}
	back := testConfig(t, "")
	back.Collector.KeyFile = cfg.Collector.KeyFile
	if err := b.Reload(back); err != nil {
		t.Fatal(err)
	}
	send("the captured report refused as a replay after remove and restore", 1, 1)
}
