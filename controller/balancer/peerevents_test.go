package balancer

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// TestOperatorEventsSurvivePeerChurn: a peer connecting and disconnecting 150 times (300
// switch events) used to flush the 200-entry event list, and the event of a refused reload
// was gone from the API. Switch events now have a ring of their own.
func TestOperatorEventsSurvivePeerChurn(t *testing.T) {
	b, _, addr := runWithMetrics(t, io.Discard)
	b.RecordEvent("config", "controller.toml: reload refused (test)")
	for i := range 150 {
		dpid := uint64(0x100 + i%3)
		c := dialSwitch(t, addr, dpid)
		waitCond(t, "switch connected", func() bool { return slices.Contains(b.Switches(), dpid) })
		c.Close()
		waitCond(t, "switch gone", func() bool { return !slices.Contains(b.Switches(), dpid) })
	}
	ev := b.Events()
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

// TestEventsMergedInOrder: the two rings read as one list, oldest first, in the order the
// events happened, whatever ring each is in; each ring keeps its own newest n.
func TestEventsMergedInOrder(t *testing.T) {
	l := newEventLog(3)
	l.add(Event{Kind: "config", Text: "a"})
	for _, s := range []string{"p1", "p2", "p3", "p4"} {
		l.addPeer(Event{Kind: "switch", Text: s})
	}
	l.add(Event{Kind: "config", Text: "b"})
	l.addPeer(Event{Kind: "switch", Text: "p5"})
	var got []string
	for _, e := range l.list() {
		got = append(got, e.Text)
	}
	if want := []string{"a", "p3", "p4", "b", "p5"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}
