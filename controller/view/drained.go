package view

import (
	"fmt"
	"strings"
	"time"

	"flowweight/collector"
	"flowweight/controller/intent"
	"flowweight/controller/switchsync"
)

// Connections is a backend's live connection count as the collector last heard it: the
// latest sample's count, not smoothed (collector.State.LastConns), from its probe (full or
// in-flight reports) or its SNMP agent (tcpConnectionTable). The switch's per-backend flow
// counters are not a source: they count bytes, not connections.
type Connections struct {
	N      float64
	Source string // "probe" or "snmp": the backend's configured source
	At     time.Time
}

// connectionsOf is st's latest count, nil when none has been reported.
func connectionsOf(st *collector.State, source string) *Connections {
	if st == nil || st.LastConnsAt.IsZero() {
		return nil
	}
	return &Connections{N: st.LastConns, Source: source, At: st.LastConnsAt}
}

// CountLag is how old a connection count may already be when it is reported: a probe reuses
// its count for conns_interval (5 s by default) and snmpd keeps its connection table about
// 5 s. A count of 0 is believed only when reported at least this long after the drain began,
// so that it was taken after the switches stopped sending the backend new connections.
const CountLag = 5 * time.Second

// DrainInput is everything the drained decision reads: the backend's drain and count from
// the collector, the latest intent, and what each connected switch's syncer published.
type DrainInput struct {
	Backend       string
	OperatorDrain bool
	DrainedAt     time.Time // when the operator drain went on
	// CountLag: see the constant; a zero count reported less than this after DrainedAt is
	// not believed.
	CountLag time.Duration
	Conns    *Connections // nil: no count reported yet
	Intent   *intent.Intent
	Switches []*switchsync.Status
	Now      time.Time
	// StaleAfter is the collector's stale_after: a count older than this is not believed.
	StaleAfter time.Duration
}

// DrainedView answers "may this backend be stopped now?" (GET /api/v1/backends/NAME/drained,
// controller drain -wait). Safe only when the operator drained it, weight 0 is what every
// connected switch holding its services confirmed, and its latest connection count is 0 and
// not older than stale_after; otherwise Holding says each thing that is still in the way.
type DrainedView struct {
	Backend string `json:"backend"`
	Safe    bool   `json:"safe"`
	// Holding lists what keeps the backend from being safe to stop; Reason is their texts
	// joined with "; ". Both empty when Safe.
	Holding         []Hold `json:"holding,omitempty"`
	Reason          string `json:"reason,omitempty"`
	OperatorDrained bool   `json:"operator_drained"`
	// Connections is the latest count (null: none reported), its source and its age.
	Connections       *float64 `json:"connections"`
	ConnectionsSource string   `json:"connections_source,omitempty"`
	ConnectionsAge    *float64 `json:"connections_age_seconds,omitempty"`
	StaleAfter        float64  `json:"stale_after_seconds"`
	// Switches are the connected switches the backend's services are placed on.
	Switches []SwitchDrain `json:"switches"`
}

// Hold is one thing that keeps a backend from being safe to stop: Kind is "drain" (not
// drained by the operator), "weight" (a weight in the latest update, a restart hold, no
// update yet), "switch" (a switch has not confirmed weight 0, or none can) or "connections"
// (connections open, or no fresh count).
type Hold struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// SwitchDrain is one connected switch in a DrainedView.
type SwitchDrain struct {
	DPID       string `json:"dpid"`
	WeightZero bool   `json:"weight_zero_confirmed"`
	Why        string `json:"why,omitempty"`
}

// Decide is the drained decision, a pure function of its input.
func Decide(in DrainInput) DrainedView {
	v := DrainedView{Backend: in.Backend, OperatorDrained: in.OperatorDrain, StaleAfter: in.StaleAfter.Seconds(), Switches: []SwitchDrain{}}
	hold := func(kind string) func(string, ...any) {
		return func(format string, args ...any) {
			v.Holding = append(v.Holding, Hold{Kind: kind, Text: fmt.Sprintf(format, args...)})
		}
	}
	if !in.OperatorDrain {
		hold("drain")("not drained by the operator (controller drain %s)", in.Backend)
	}
	if in.Intent == nil {
		hold("weight")("no update has run yet: no weight is known")
	} else {
		v.Switches = weightOnSwitches(in, hold("weight"), hold("switch"))
	}
	conns := hold("connections")
	if c := in.Conns; c == nil {
		conns("no connection count yet: the backend has not reported one")
	} else {
		n, age := c.N, in.Now.Sub(c.At).Seconds()
		v.Connections, v.ConnectionsSource, v.ConnectionsAge = &n, c.Source, &age
		switch {
		case in.StaleAfter > 0 && in.Now.Sub(c.At) > in.StaleAfter:
			conns("connection count too old: %.0f connections reported %.1fs ago by %s, more than stale_after %v", n, age, c.Source, in.StaleAfter)
		case n > 0:
			conns("%.0f connections (%s, %.1fs ago)", n, c.Source, age)
		case in.OperatorDrain && c.At.Before(in.DrainedAt.Add(in.CountLag)):
			conns("no count taken after the drain yet: 0 connections reported %.1fs after it, and a count may be up to %v old when reported",
				c.At.Sub(in.DrainedAt).Seconds(), in.CountLag)
		}
	}
	v.Safe = len(v.Holding) == 0
	texts := make([]string, len(v.Holding))
	for i, h := range v.Holding {
		texts[i] = h.Text
	}
	v.Reason = strings.Join(texts, "; ")
	return v
}

// weightOnSwitches checks that the latest intent gives the backend weight 0 in every service
// that lists it, and that every connected switch those services are placed on holds that
// intent (or a later one) and was planned with weight 0 for it.
func weightOnSwitches(in DrainInput, weight, hold func(string, ...any)) []SwitchDrain {
	var services []*intent.Service
	for i := range in.Intent.Services {
		s := &in.Intent.Services[i]
		for _, be := range s.Backends {
			if be.Name != in.Backend {
				continue
			}
			services = append(services, s)
			switch {
			case s.Held:
				weight("service %s: held as the switches hold it (the controller restarted less than stale_after ago)", s.Name)
			case be.Weight > 0:
				weight("service %s: weight %d in the latest update", s.Name, be.Weight)
			}
		}
	}
	out := []SwitchDrain{}
	if len(services) == 0 {
		return out // in no service: no switch sends it anything
	}
	connected := map[uint64]bool{}
	for _, st := range in.Switches {
		connected[st.DPID] = true
		placed := false
		for _, s := range services {
			placed = placed || s.PlacedOn(st.DPID)
		}
		if !placed {
			continue
		}
		sd := SwitchDrain{DPID: fmt.Sprintf("%016x", st.DPID)}
		switch w, svc := plannedWeight(st, in.Backend); {
		case !st.Known:
			sd.Why = "what it holds is not known yet (read-back pending)"
		case st.Role == "slave":
			sd.Why = "this controller is a standby there; ask the leader's API"
		case st.Seq < in.Intent.Seq:
			sd.Why = fmt.Sprintf("holds update %d, not yet update %d", st.Seq, in.Intent.Seq)
		case w > 0:
			sd.Why = fmt.Sprintf("weight %d in service %s", w, svc)
		default:
			sd.WeightZero = true
		}
		if !sd.WeightZero {
			hold("weight 0 not confirmed on switch %s: %s", sd.DPID, sd.Why)
		}
		out = append(out, sd)
	}
	missing := 0
	for _, s := range services {
		for _, d := range s.Datapaths {
			if !connected[d] {
				missing++
				hold("service %s: placed on switch %016x, which is not connected", s.Name, d)
			}
		}
	}
	if len(out) == 0 && missing == 0 {
		hold("no connected switch holds its services: weight 0 cannot be confirmed")
	}
	return out
}

// plannedWeight is the largest weight the switch's last plan gave the backend, and in which
// service.
func plannedWeight(st *switchsync.Status, name string) (uint16, string) {
	var w uint16
	var svc string
	for _, s := range st.Planned {
		for _, be := range s.Backends {
			if be.Name == name && be.Weight > w {
				w, svc = be.Weight, s.Name
			}
		}
	}
	return w, svc
}

// Drained is Decide for the backend name as the board sees it now; it fails with an error
// wrapping ErrNoBackend for a name that is not configured.
func (b *Board) Drained(name string) (DrainedView, error) {
	src := b.sources()
	if src.Pool == nil {
		return DrainedView{}, fmt.Errorf("%w: %q (the controller is not running)", ErrNoBackend, name)
	}
	st, ok := src.Pool.Get(name)
	if !ok {
		return DrainedView{}, fmt.Errorf("%w: %q", ErrNoBackend, name)
	}
	snap := b.Latest()
	return Decide(DrainInput{Backend: name, OperatorDrain: st.OperatorDrain, DrainedAt: st.DrainedAt, CountLag: CountLag, Conns: connectionsOf(&st, sourceOf(snap, name)),
		Intent: snap.Intent, Switches: b.SwitchStatuses(), Now: src.Now(), StaleAfter: src.Pool.StaleAfter()}), nil
}

// sourceOf is the backend's configured source ("probe" or "snmp") in the snapshot.
func sourceOf(snap *Snapshot, name string) string {
	for _, s := range snap.Services {
		for _, be := range s.Base.Backends {
			if be.Name == name {
				return be.Source
			}
		}
	}
	return "probe"
}
