package balancer

import (
	"flowweight/controller/view"
	"flowweight/internal/testutil"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOperatorEventsSurvivePeerChurn: a peer connecting and disconnecting 150 times (300
// switch events) used to flush the 200-entry event list, and the event of a refused reload
// was gone from the API. Switch events now have a ring of their own.
func TestOperatorEventsSurvivePeerChurn(t *testing.T) {
	b, _, addr := runWithMetrics(t, io.Discard)
	b.events.Add(view.Event{Time: b.now(), Kind: "config", Text: "controller.toml: reload refused (test)"})
	for i := range 150 {
		dpid := uint64(0x100 + i%3)
		c := dialSwitch(t, addr, dpid)
		testutil.Until(t, 10*time.Second, func() bool { return slices.Contains(b.View().Switches(), dpid) }, "switch connected")
		c.Close()
		testutil.Until(t, 10*time.Second, func() bool { return !slices.Contains(b.View().Switches(), dpid) }, "switch gone")
	}
	ev := b.View().Events()
	found, switches := false, 0
	for _, e := range ev {
		if e.Kind == "config" && strings.Contains(e.Text, "reload refused (test)") {
			found = true
		}
		if e.Kind == "switch" {
			switches++
		}
	}
	if !found {
		t.Errorf("the refused reload's event is gone after a peer's churn (%d events, %d of switches)", len(ev), switches)
	}
	if switches == 0 {
		t.Error("no switch events kept")
	}
}
