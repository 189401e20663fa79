package agent

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"flowweight/internal/health"
	"flowweight/internal/report"
)

// openAt reads the next datagram on pc as a report.
func openAt(t *testing.T, pc net.PacketConn) ([]byte, report.Report) {
	t.Helper()
	b := []byte(read(t, pc))
	var r report.Report
	if err := report.Open(b, func(string) ([]byte, bool) { return testKey, true }, &r); err != nil {
		t.Fatalf("open datagram from %s: %v", pc.LocalAddr(), err)
	}
	return b, r
}

// Two collectors on loopback get every report, the same bytes, and each one's replay guard
// (its own, as each controller has) accepts every one once: the report's seq and boot nonce
// are per probe, not per destination.
func TestReportsReachEveryCollector(t *testing.T) {
	pcs := []net.PacketConn{listen(t), listen(t)}
	m := NewMultiSender([]string{pcs[0].LocalAddr().String(), pcs[1].LocalAddr().String()})
	defer m.Close()
	h := start(t, func(a *Agent) {
		a.Sender = m
		a.Health = fakeHealth{health.Result{OK: true, Status: 200}}
	})
	guards := []*report.Guard{report.NewGuard(time.Minute), report.NewGuard(time.Minute)}
	// receive reads one report at each collector and checks that they are the same datagram.
	receive := func(seq uint64) report.Report {
		t.Helper()
		var first []byte
		var r report.Report
		for i, pc := range pcs {
			b, got := openAt(t, pc)
			if got.Seq != seq {
				t.Errorf("collector %d: seq %d, want %d", i, got.Seq, seq)
			}
			if err := guards[i].Check(&got, got.Time); err != nil {
				t.Errorf("collector %d's guard: %v", i, err)
			}
			if i == 0 {
				first, r = b, got
			} else if !bytes.Equal(b, first) {
				t.Errorf("collector %d got other bytes than collector 0", i)
			}
		}
		return r
	}
	for seq := uint64(1); seq <= 3; seq++ {
		h.clk.Advance(<-h.clk.Started())
		receive(seq)
	}
	<-h.clk.Started()
	h.drain <- true // the immediate report goes to both as well
	if r := receive(4); r.Flags&report.FlagDrain == 0 {
		t.Errorf("drain report %+v", r)
	}
	h.stopQuiet()
	if r := receive(5); r.Flags&report.FlagLeaving == 0 {
		t.Errorf("last report %+v", r)
	}
	if s, e := h.a.Stats.Sent.Load(), h.a.Stats.SendErrors.Load(); s != 5 || e != 0 {
		t.Errorf("sent %d, errors %d", s, e)
	}
	for i, s := range m.Senders {
		if s.Sent.Load() != 5 || s.Errors.Load() != 0 {
			t.Errorf("collector %d: sent %d, errors %d", i, s.Sent.Load(), s.Errors.Load())
		}
	}
}

// A collector whose port is closed (its host answers with port unreachable) fails its sends,
// counted and logged under its address, while the other receives every report.
func TestClosedCollectorDoesNotStopTheOther(t *testing.T) {
	closed, live := closedPort(t), listen(t)
	m := NewMultiSender([]string{closed, live.LocalAddr().String()})
	defer m.Close()
	h := start(t, func(a *Agent) { a.Sender = m })
	// The refusal of one datagram is the error of a later send: tick until it has come.
	seq := uint64(0)
	for h.a.Stats.SendErrors.Load() == 0 || seq < 4 {
		if seq == 20 {
			t.Fatal("20 reports to a closed port without an error")
		}
		seq++
		h.clk.Advance(<-h.clk.Started())
		if _, r := openAt(t, live); r.Seq != seq {
			t.Fatalf("live collector: seq %d, want %d", r.Seq, seq)
		}
	}
	h.stopQuiet()
	if _, r := openAt(t, live); r.Flags&report.FlagLeaving == 0 {
		t.Errorf("last report %+v", r)
	}
	sent, errs := h.a.Stats.Sent.Load(), h.a.Stats.SendErrors.Load()
	if sent != seq+1 || errs == 0 || errs != m.Senders[0].Errors.Load() {
		t.Errorf("sent %d of %d reports, %d errors (closed collector's: %d)", sent, seq+1, errs, m.Senders[0].Errors.Load())
	}
	if n := m.Senders[1].Errors.Load(); n != 0 || m.Senders[1].Sent.Load() != seq+1 {
		t.Errorf("live collector: sent %d, errors %d", m.Senders[1].Sent.Load(), n)
	}
	logs := h.logText()
	if !strings.Contains(logs, "collector="+closed) || !strings.Contains(logs, "refused") {
		t.Errorf("no failure logged for %s:\n%s", closed, logs)
	}
	if strings.Contains(logs, "collector="+live.LocalAddr().String()) {
		t.Errorf("failure logged for the live collector:\n%s", logs)
	}
}

// Each collector's failures are rate-limited on their own: one that keeps failing does not
// hide the first failure of another.
func TestSendErrorsLoggedPerCollector(t *testing.T) {
	var mu sync.Mutex
	var fail []string // collectors failing, of three
	setFail := func(addrs ...string) {
		mu.Lock()
		fail = addrs
		mu.Unlock()
	}
	h := start(t, func(a *Agent) {
		a.Sender = senderFunc(func([]byte) error {
			mu.Lock()
			defer mu.Unlock()
			if len(fail) == 0 {
				return nil
			}
			fe := &FanoutError{Delivered: 3 - len(fail)}
			for _, addr := range fail {
				fe.Failed = append(fe.Failed, &SendError{Addr: addr, Err: errors.New("connection refused")})
			}
			return fe
		})
	})
	for _, f := range [][]string{{"a:1"}, {"a:1", "b:1"}, {"a:1", "b:1"}, nil} {
		d := <-h.clk.Started() // the last send is over
		setFail(f...)
		h.clk.Advance(d)
	}
	h.stopQuiet()
	if s, e := h.a.Stats.Sent.Load(), h.a.Stats.SendErrors.Load(); s != 5 || e != 5 {
		t.Errorf("sent %d, errors %d; want 5 reports out and 5 failed sends", s, e)
	}
	logs := h.logText()
	for _, addr := range []string{"a:1", "b:1"} {
		if n := strings.Count(logs, "collector="+addr); n != 1 {
			t.Errorf("%d lines for %s, want 1:\n%s", n, addr, logs)
		}
	}
}

// stopQuiet stops the agent at its next wait without reading a report from the fake sender.
func (h *harness) stopQuiet() {
	h.t.Helper()
	<-h.clk.Started()
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Fatal(err)
	}
	h.done <- nil // for Cleanup
}

type senderFunc func([]byte) error

func (f senderFunc) Send(b []byte) error { return f(b) }
