package balancer

import (
	"flowweight/internal/testutil"
	"io"
	"slices"
	"testing"
	"time"
)

// TestReadersDoNotWaitForTheLoop: every reader of the running controller (the API's views,
// a metrics scrape) answers while the update loop holds its lock, from what the last update
// published. Before, Services, SwitchViews, History, HA and the push, OpenFlow and share
// collectors each took the balancer's lock, so a long update stalled every scrape and
// dashboard poll, and a reader's slowness could stall the update.
func TestReadersDoNotWaitForTheLoop(t *testing.T) {
	b, reg, addr := runWithMetrics(t, io.Discard)
	c := dialSwitch(t, addr, 0x42)
	defer c.Close()
	testutil.Until(t, 10*time.Second, func() bool { return slices.Contains(b.View().Switches(), uint64(0x42)) }, "switch connected")
	testutil.Until(t, 10*time.Second, func() bool { return b.latest.Load() != nil }, "an update published")

	b.mu.Lock() // the loop in the middle of an update
	defer b.mu.Unlock()
	done := make(chan string, 1)
	go func() {
		v := b.View()
		if len(v.Services()) != 1 {
			done <- "services: want the one configured"
			return
		}
		if len(v.SwitchViews()) != 1 {
			done <- "switch views: want the one connected"
			return
		}
		_ = v.History()
		_ = v.Events()
		if v.HA().Role != "single" {
			done <- "ha: want single"
			return
		}
		if _, err := reg.Gather(); err != nil {
			done <- "gather: " + err.Error()
			return
		}
		done <- ""
	}()
	select {
	case msg := <-done:
		if msg != "" {
			t.Fatal(msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a reader waited for the update loop's lock")
	}
}
