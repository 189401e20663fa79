package switchsync

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"flowweight/controller/arp"
	"flowweight/controller/ofswitch"
	"flowweight/internal/testutil"

	"github.com/netrack/openflow/ofp"
)

// kicks counts Upward.Kick and ignores events.
type kicks struct{ n atomic.Int32 }

func (k *kicks) Kick()                        { k.n.Add(1) }
func (k *kicks) Event(string, string, string) {}

// TestOneWriterPerSwitch: everything written to a switch (the sync, the ARP requests that
// locate its backends, the reply to a client asking for the VIP) comes from the goroutine
// running its syncer, though the packet-in arrives on another; and a backend's answer to the
// syncer's request locates it and asks the loop above for an update.
func TestOneWriterPerSwitch(t *testing.T) {
	conn := NewFakeConn(1)
	up := &kicks{}
	nb := NewNeighbours(NeighboursConfig{Learner: arp.NewLearner(arp.LearnerConfig{RequestTTL: 20 * time.Millisecond}), Up: up})
	s := New(Config{Conn: conn, Neighbours: nb, Up: up})
	ctx, cancel := context.WithCancel(context.Background())
	runner := make(chan uint64, 1)
	done := make(chan struct{})
	go func() {
		runner <- GoroutineID()
		s.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	run := <-runner

	in := intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500))
	s.Offer(in)
	requests := func() map[netip.Addr][]byte {
		out := map[netip.Addr][]byte{}
		for _, f := range conn.PacketOuts() {
			if a, ok := f.Actions[0].(*ofp.ActionOutput); ok && a.Port == ofp.PortFlood {
				out[netip.AddrFrom4([4]byte(f.Frame[38:42]))] = f.Frame // ARP target protocol address
			}
		}
		return out
	}
	backend := netip.MustParseAddr("10.0.5.1")
	testutil.Until(t, 20*time.Second, func() bool { return len(requests()) == 2 }, "the syncer asks where both backends are")
	if s.Status().Seq != 1 {
		t.Errorf("requests sent before the switch was brought to the intent (seq %d)", s.Status().Seq)
	}

	// A client asks for the VIP; the session's packet-in goroutine is not the syncer's.
	client := net.HardwareAddr{2, 0, 0, 0, 0xc, 1}
	ask, err := arp.Request(client, netip.MustParseAddr("10.0.5.50"), netip.MustParseAddr("10.0.5.100"))
	if err != nil {
		t.Fatal(err)
	}
	delivered := make(chan uint64)
	go func() {
		s.PacketIn(ofswitch.PacketIn{InPort: 7, Data: ask})
		delivered <- GoroutineID()
	}()
	if g := <-delivered; g == run {
		t.Fatal("the packet-in was delivered on the syncer's own goroutine: the test proves nothing")
	}
	testutil.Until(t, 20*time.Second, func() bool {
		for _, f := range conn.PacketOuts() {
			if a, ok := f.Actions[0].(*ofp.ActionOutput); ok && a.Port == 7 {
				ip, mac, ok := arp.ParseReply(f.Frame)
				return ok && ip == netip.MustParseAddr("10.0.5.100") && mac.String() == in.Services[0].VIPMAC.String()
			}
		}
		return false
	}, "the VIP answered out of the client's port")

	// The backend answers the syncer's request: one round later it is located, and the loop
	// above is kicked to replan with it.
	answer, ok, err := arp.Reply(requests()[backend], func(netip.Addr) (net.HardwareAddr, bool) {
		return net.HardwareAddr{2, 0, 0, 0, 0xb, 1}, true
	})
	if err != nil || !ok {
		t.Fatal("no answer built:", ok, err)
	}
	s.PacketIn(ofswitch.PacketIn{InPort: 3, Data: answer})
	testutil.Until(t, 20*time.Second, func() bool {
		loc, ok := nb.Locator(1)(backend)
		return ok && loc.Port == 3
	}, "the backend located from its answer")
	testutil.Until(t, 20*time.Second, func() bool { return up.n.Load() > 0 }, "the loop above kicked")

	w := conn.Writers()
	if len(w) != 1 || w[run] == 0 {
		t.Fatalf("writes by goroutine %v, want all from the syncer's (%d)", w, run)
	}
	if n := len(conn.PacketOuts()); w[run] < n+1 {
		t.Errorf("%d writes counted, want the apply and %d packet-outs", w[run], n)
	}
}

// TestStandbySendsNoARP: a standby neither asks nor answers (the leader does), and writes
// nothing to the switch.
func TestStandbySendsNoARP(t *testing.T) {
	conn := NewFakeConn(1)
	nb := NewNeighbours(NeighboursConfig{})
	lead := &fakeLead{}
	s := start(t, conn, Config{Neighbours: nb, Lead: lead})
	in := intentOf(1, 1, time.Hour, web("web", 5, nil, 500, 500))
	s.Offer(in)
	testutil.Until(t, 20*time.Second, func() bool { return s.Status().Seq == 1 }, "the standby took the intent")
	ask, err := arp.Request(net.HardwareAddr{2, 0, 0, 0, 0xc, 1}, netip.MustParseAddr("10.0.5.50"), netip.MustParseAddr("10.0.5.100"))
	if err != nil {
		t.Fatal(err)
	}
	s.PacketIn(ofswitch.PacketIn{InPort: 7, Data: ask})
	s.Offer(intentOf(2, 1, time.Hour, web("web", 5, nil, 500, 500)))
	testutil.Until(t, 20*time.Second, func() bool { return s.Status().Seq == 2 }, "the next intent taken")
	if f := conn.PacketOuts(); len(f) != 0 {
		t.Errorf("a standby sent %d ARP frames", len(f))
	}
}
