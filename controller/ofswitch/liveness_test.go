package ofswitch

import (
	"context"
	"errors"
	"testing"
	"time"

	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// TestProbeBusyQueueIsNotDeath: a live switch whose write queue is full of our own requests
// (it reads, just not yet all of it) keeps its datapath id when another connection claims
// it. The probe's echo does not need room in that queue, and anything read from the switch
// while the probe runs proves it alive. Before the fix a probe echo that found the queue full
// declared the session dead at once and handed the id to the newcomer.
func TestProbeBusyQueueIsNotDeath(t *testing.T) {
	tests := []struct {
		name  string
		peer  func(t *testing.T, p *pipePeer) // what the switch does once the probe runs
		alive bool
	}{
		{"reads its queue and answers the echo", func(t *testing.T, p *pipePeer) {
			go func() {
				for {
					f, err := ofwire.ReadFrame(p.br)
					if err != nil {
						return
					}
					if f.Type == of.TypeEchoRequest {
						p.write(of.TypeEchoReply, f.Xid, f.Body)
					}
				}
			}()
		}, true},
		{"reads nothing but sends a packet-in", func(t *testing.T, p *pipePeer) {
			go p.write(of.TypePacketIn, 0, ofwire.PacketInBody(1, 0, []byte("x")))
		}, true},
		{"silent", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newRecHandler()
			srv, clk := testServer(t, Config{WriteQueueMessages: 4, WriteTimeout: time.Hour, ProbeTimeout: 2 * time.Second}, h)
			p := newPipePeer(t, srv, 0x500)
			old := h.wait(t, "connected").sw
			// The peer is not reading yet: the first packet-out blocks the writer and the
			// queue holds four of our own messages, so no request of ours fits.
			for i := range 4 {
				if err := old.PacketOut(context.Background(), uint32(ofp.PortController), nil, []byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
			old.out.mu.Lock()
			own := old.out.msgs - old.out.replies
			old.out.mu.Unlock()
			if own != 4 {
				t.Fatalf("%d of our messages queued, want the queue full (4)", own)
			}
			b := newFake(t, 0x500)
			b.connect(srv.Addr())
			if d := clk.waitTimer(t); d != 2*time.Second {
				t.Fatalf("probe timer %v, want ProbeTimeout 2s", d)
			}
			if tt.peer != nil {
				tt.peer(t, p)
			} else {
				clk.Advance(2 * time.Second)
			}
			if !tt.alive {
				if ev := h.wait(t, "disconnected"); ev.sw != old || !errors.Is(ev.err, ErrReplaced) {
					t.Fatalf("disconnected %v with %v, want the silent session replaced", ev.sw, ev.err)
				}
				h.wait(t, "connected")
				return
			}
			select {
			case <-b.eof:
			case <-time.After(guard):
				t.Fatal("newcomer not refused while the established switch is alive")
			}
			if got, _ := srv.Switch(0x500); got != old || old.Err() != nil {
				t.Fatalf("Server.Switch = %v (old session err %v), want the established session kept", got, old.Err())
			}
			if n := srv.Stats().Faults[FaultDuplicateDatapath]; n != 1 {
				t.Errorf("duplicate_datapath = %d, want 1", n)
			}
		})
	}
}
