package balancer

import (
	"testing"
	"time"

	"flowweight/controller/ofswitch"
	"flowweight/internal/testutil"
)

// TestPacketInDoesNotWaitForTheLoop: a packet-in is routed to its switch's syncer from the
// registry the board publishes, so it never waits while an update holds the loop's lock (the
// session's packet-in queue is bounded, and ARP replies for the VIPs would wait behind it).
func TestPacketInDoesNotWaitForTheLoop(t *testing.T) {
	b, err := New(testConfig(t, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock() // an update in progress
	defer b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.PacketIn(&ofswitch.Switch{}, ofswitch.PacketIn{})
		close(done)
	}()
	testutil.Until(t, 5*time.Second, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}, "PacketIn returned while the loop's lock is held")
}
