package view

import (
	"slices"
	"testing"
)

func TestEventLogRing(t *testing.T) {
	l := NewLog(3)
	for i := 0; i < 5; i++ {
		l.Add(Event{Text: string(rune('a' + i))})
	}
	var got string
	for _, e := range l.List() {
		got += e.Text
	}
	if got != "cde" {
		t.Fatalf("ring kept %q, want cde", got)
	}
}

// TestEventsMergedInOrder: the two rings read as one list, oldest first, in the order the
// events happened, whatever ring each is in; each ring keeps its own newest n.
func TestEventsMergedInOrder(t *testing.T) {
	l := NewLog(3)
	l.Add(Event{Kind: "config", Text: "a"})
	for _, s := range []string{"p1", "p2", "p3", "p4"} {
		l.AddPeer(Event{Kind: "switch", Text: s})
	}
	l.Add(Event{Kind: "config", Text: "b"})
	l.AddPeer(Event{Kind: "switch", Text: "p5"})
	var got []string
	for _, e := range l.List() {
		got = append(got, e.Text)
	}
	if want := []string{"a", "p3", "p4", "b", "p5"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}
