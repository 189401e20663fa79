package view

import (
	"strings"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/controller/switchsync"
)

// TestDecideDrained: the drained decision answers safe only when every condition holds, and
// otherwise names each thing still holding the backend: no drain, a weight in the latest
// update (all drained: panic), a restart hold, a switch that has not confirmed weight 0 (not
// read back, behind, still planned with a weight, standby), a placed switch not connected,
// no switch at all, and a count that is missing, too old or not 0.
func TestDecideDrained(t *testing.T) {
	now := time.Unix(1e9, 0)
	svc := func(name string, weight uint16, mut func(*intent.Service)) intent.Service {
		s := intent.Service{Service: dataplane.Service{Name: name, Backends: []dataplane.Backend{{Name: "be1", Weight: weight}, {Name: "be2", Weight: 500}}}}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	planned := func(w uint16) []dataplane.Service {
		return []dataplane.Service{{Name: "web", Backends: []dataplane.Backend{{Name: "be1", Weight: w}, {Name: "be2", Weight: 1000}}}}
	}
	sw := func(dpid, seq uint64, mut func(*switchsync.Status)) *switchsync.Status {
		st := &switchsync.Status{DPID: dpid, Known: true, Seq: seq, Role: "equal", Planned: planned(0)}
		if mut != nil {
			mut(st)
		}
		return st
	}
	zero := &Connections{N: 0, Source: "probe", At: now.Add(-time.Second)}
	good := func() DrainInput {
		return DrainInput{Backend: "be1", OperatorDrain: true, DrainedAt: now.Add(-time.Minute), CountLag: 5 * time.Second,
			Conns: zero, StaleAfter: 4 * time.Second, Now: now,
			Intent:   &intent.Intent{Seq: 10, Services: []intent.Service{svc("web", 0, nil)}},
			Switches: []*switchsync.Status{sw(1, 10, nil), sw(2, 11, nil)}}
	}
	for _, c := range []struct {
		name string
		kind string // of the one Hold
		mut  func(*DrainInput)
		want string // "" is safe; else a phrase the reason must hold
	}{
		{"drained, zero everywhere, no connections", "", nil, ""},
		{"in no service: no weight anywhere", "", func(in *DrainInput) { in.Intent.Services = nil }, ""},
		{"not drained", "drain", func(in *DrainInput) { in.OperatorDrain = false }, "not drained by the operator (controller drain be1)"},
		{"no update yet", "weight", func(in *DrainInput) { in.Intent = nil }, "no update has run yet"},
		{"weight in the latest update (panic)", "weight", func(in *DrainInput) { in.Intent.Services[0] = svc("web", 500, nil) }, "service web: weight 500 in the latest update"},
		{"restart hold", "weight", func(in *DrainInput) {
			in.Intent.Services[0] = svc("web", 0, func(s *intent.Service) { s.Held = true })
		}, "service web: held as the switches hold it"},
		{"switch not read back", "switch", func(in *DrainInput) { in.Switches[0].Known = false }, "switch 0000000000000001: what it holds is not known yet"},
		{"switch behind", "switch", func(in *DrainInput) { in.Switches[1].Seq = 9 }, "switch 0000000000000002: holds update 9, not yet update 10"},
		{"switch planned with a weight", "switch", func(in *DrainInput) { in.Switches[0].Planned = planned(300) }, "switch 0000000000000001: weight 300 in service web"},
		{"standby", "switch", func(in *DrainInput) { in.Switches[0].Role = "slave" }, "this controller is a standby there"},
		{"no switch connected", "switch", func(in *DrainInput) { in.Switches = nil }, "no connected switch holds its services"},
		{"placed on a switch not connected", "switch", func(in *DrainInput) {
			in.Intent.Services[0] = svc("web", 0, func(s *intent.Service) { s.Datapaths = []uint64{1, 3} })
		}, "service web: placed on switch 0000000000000003, which is not connected"},
		{"placed elsewhere only", "switch", func(in *DrainInput) {
			in.Intent.Services[0] = svc("web", 0, func(s *intent.Service) { s.Datapaths = []uint64{7} })
			in.Switches = []*switchsync.Status{sw(1, 10, nil)}
		}, "service web: placed on switch 0000000000000007, which is not connected"},
		{"no count yet", "connections", func(in *DrainInput) { in.Conns = nil }, "no connection count yet"},
		{"count too old", "connections", func(in *DrainInput) {
			in.Conns = &Connections{N: 0, Source: "snmp", At: now.Add(-5 * time.Second)}
		}, "connection count too old: 0 connections reported 5.0s ago by snmp, more than stale_after 4s"},
		{"zero counted before the drain may have been", "connections", func(in *DrainInput) {
			in.DrainedAt = now.Add(-3 * time.Second) // the count 1 s ago came 2 s after the drain
		}, "no count taken after the drain yet: 0 connections reported 2.0s after it, and a count may be up to 5s old when reported"},
		{"zero counted long enough after the drain", "", func(in *DrainInput) { in.DrainedAt = now.Add(-6 * time.Second) }, ""},
		{"connections open", "connections", func(in *DrainInput) {
			in.Conns = &Connections{N: 50, Source: "probe", At: now.Add(-500 * time.Millisecond)}
		}, "50 connections (probe, 0.5s ago)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := good()
			if c.mut != nil {
				c.mut(&in)
			}
			v := Decide(in)
			if c.want == "" {
				if !v.Safe || v.Reason != "" {
					t.Fatalf("not safe: %s", v.Reason)
				}
				return
			}
			if v.Safe {
				t.Fatalf("safe, want held by %q", c.want)
			}
			if !strings.Contains(v.Reason, c.want) || len(v.Holding) != 1 || v.Holding[0].Kind != c.kind {
				t.Fatalf("holding %+v, want exactly one of kind %s with %q", v.Holding, c.kind, c.want)
			}
		})
	}
	// The view names the switches it checked and the count with its source and age.
	v := Decide(good())
	if len(v.Switches) != 2 || !v.Switches[0].WeightZero || v.Switches[1].DPID != "0000000000000002" {
		t.Errorf("switches %+v", v.Switches)
	}
	if v.Connections == nil || *v.Connections != 0 || v.ConnectionsSource != "probe" || *v.ConnectionsAge != 1 || v.StaleAfter != 4 {
		t.Errorf("count %v from %q, age %v, stale_after %v", v.Connections, v.ConnectionsSource, v.ConnectionsAge, v.StaleAfter)
	}
}
