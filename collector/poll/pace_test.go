package poll

import (
	"testing"
	"time"
)

// paceEvent is one step of a checkPace: when it starts (ms from the first), whether it polls,
// and the results fed back. Unless pollFails, every step checks health, with result ok.
type paceEvent struct {
	at        int
	poll      bool
	ok        bool
	pollFails bool
}

// The schedule through failures and recoveries, driven with a simulated clock: each case
// lists the steps it must take and feeds their results back. Steps take no time unless
// took says so (per step index).
func TestCheckPace(t *testing.T) {
	const P, C = true, false // poll, check only
	tests := []struct {
		name     string
		interval time.Duration
		fast     time.Duration
		rise     int
		took     map[int]time.Duration
		steps    []paceEvent
	}{
		{"healthy: polls every interval", 5 * time.Second, 250 * time.Millisecond, 2, nil, []paceEvent{
			{0, P, true, false}, {5000, P, true, false}, {10000, P, true, false}, {15000, P, true, false},
		}},
		{"failure then recovery: the URL alone every fast until rise passes", 5 * time.Second, 250 * time.Millisecond, 2, nil, []paceEvent{
			{0, P, true, false},
			{5000, P, false, false},
			{5250, C, false, false},
			{5500, C, false, false}, // fail_threshold 3 reached 0.5 s after the first failure
			{5750, C, true, false},
			{6000, C, true, false}, // rise_threshold 2: the fast pace ends
			{10000, P, true, false},
			{15000, P, true, false},
		}},
		{"down: polls keep their period inside the fast pace", 1 * time.Second, 250 * time.Millisecond, 2, nil, []paceEvent{
			{0, P, false, false}, {250, C, false, false}, {500, C, false, false}, {750, C, false, false},
			{1000, P, false, false}, {1250, C, false, false}, {1500, C, false, false}, {1750, C, false, false},
			{2000, P, false, false},
		}},
		{"flapping never goes faster than fast", 1 * time.Second, 300 * time.Millisecond, 2,
			map[int]time.Duration{1: 200 * time.Millisecond, 3: 250 * time.Millisecond}, []paceEvent{
				{0, P, false, false}, {300, C, true, false}, {800, C, false, false}, {1100, P, true, false},
				{1650, C, false, false}, {1950, C, true, false}, {2250, P, false, false},
			}},
		{"a failed poll ends the fast pace", 1 * time.Second, 250 * time.Millisecond, 2, nil, []paceEvent{
			{0, P, false, false}, {250, C, false, false}, {500, C, true, false}, {750, C, false, false},
			{1000, P, false, true}, // the agent is gone: judged per poll from here
			{2000, P, false, true},
			{3000, P, true, false},
		}},
		{"leaving the fast pace just before a poll still waits fast", 1 * time.Second, 300 * time.Millisecond, 1, nil, []paceEvent{
			{0, P, true, false}, {1000, P, false, false}, {1300, C, false, false}, {1600, C, false, false},
			{1900, C, true, false}, // poll due at 2.0 s, 0.1 s away
			{2200, P, true, false},
			{3200, P, true, false},
		}},
		{"fast equal to interval is off", 1 * time.Second, 1 * time.Second, 2, nil, []paceEvent{
			{0, P, false, false}, {1000, P, false, false}, {2000, P, true, false}, {3000, P, true, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			now := t0
			p := newCheckPace(tt.interval, tt.fast, tt.rise)
			for i, e := range tt.steps {
				if at := int(now.Sub(t0) / time.Millisecond); at != e.at {
					t.Fatalf("step %d at %d ms, want %d", i, at, e.at)
				}
				if poll := p.step(now); poll != e.poll {
					t.Fatalf("step %d at %d ms: poll %v, want %v", i, e.at, poll, e.poll)
				}
				now = now.Add(tt.took[i])
				if e.pollFails {
					p.pollFailed()
				} else {
					p.checked(e.ok)
				}
				now = now.Add(p.wait(now))
			}
		})
	}
}
