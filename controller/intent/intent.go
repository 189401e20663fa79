package intent

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"flowweight/controller/dataplane"
)

// Intent is one update's decision. Never modify one after Build: syncers read it
// concurrently.
type Intent struct {
	// Seq increases with every intent the balancer builds, so a syncer (and its status) can
	// say which update a switch holds.
	Seq uint64
	// Gen changes only when what the switches should hold may have changed (weights, holds,
	// the configuration, a kick for a learned location): a syncer already at this Gen has
	// nothing to plan, so a fleet does not replan every service every period for nothing.
	Gen      uint64
	Services []Service
	// Owned is every group id this controller has configured since it started: groups carry
	// no cookie, so only these may be planned, read back and deleted.
	Owned map[uint32]bool
	// Normal installs the table-0 NORMAL flow (dataplane.Options.Normal).
	Normal bool
	// BarrierTimeout bounds every request to a switch; ReadbackPeriod is how often a syncer
	// reads its switch back to find drift. They travel with the intent so that a reload
	// reaches every syncer the same way the weights do.
	BarrierTimeout time.Duration
	ReadbackPeriod time.Duration
	// ReadCounters asks the syncers for their flows' byte counters after this intent
	// (throughput_from = "switch", on periodic updates only), each at its own offset within
	// CounterSpread so that a fleet's reads do not all land on the switches at once.
	ReadCounters  bool
	CounterSpread time.Duration

	arp  map[netip.Addr]ARPTarget
	vips map[netip.Addr][]int // VIP -> indexes into Services (packet-ins look up at line rate)
}

// Service is one service as every switch it is placed on should hold it. The embedded
// dataplane.Service has the applied weights and only the configured MACs and ports: each
// syncer adds what its own switch taught the controller (Locate).
type Service struct {
	dataplane.Service
	// Held: the controller started less than stale_after ago and some backend has not
	// reported yet, so the group stays exactly as the switch holds it (a restart must not
	// move traffic on an empty picture).
	Held bool
	// WantSeed: held and nothing written yet, so the weights a switch holds for the group are
	// worth reading back (the balancer starts from them when the hold ends).
	WantSeed bool
	// Datapaths is where the service is placed; nil places it on every switch.
	Datapaths []uint64
	// Canary lists the switches that hold CanaryWeights (the shadow policy's, per backend in
	// Backends order) instead of the backends' live Weight; nil for none. Before the shadow
	// policy's first result (CanaryWeights nil) they hold the live weights.
	Canary        []uint64
	CanaryWeights []uint16
	// Change is this update's rewrite of the weights, nil when they did not change.
	Change *Change
	// CorrectShare lets each switch move the group's slots so that the measured share of all
	// new connections, those client affinity pins past the group included, meets the
	// weights (switchsync/correct.go; config share_correction).
	CorrectShare bool
}

// PlacedOn reports whether s belongs on the switch dpid.
func (s *Service) PlacedOn(dpid uint64) bool {
	return s.Datapaths == nil || slices.Contains(s.Datapaths, dpid)
}

// CanaryOn reports whether the switch dpid holds the shadow policy's weights for s.
func (s *Service) CanaryOn(dpid uint64) bool {
	return len(s.CanaryWeights) == len(s.Backends) && slices.Contains(s.Canary, dpid)
}

// Change is one rewrite of a service's weights, for the logs and the event list.
type Change struct {
	Names         []string
	Before, After []uint16 // Before is nil for the first write
}

// String renders "web1 500->400, web2 500->600".
func (c *Change) String() string {
	var sb strings.Builder
	for i, n := range c.Names {
		if i >= len(c.After) {
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		if c.Before != nil && i < len(c.Before) {
			fmt.Fprintf(&sb, "%s %d->%d", n, c.Before[i], c.After[i])
		} else {
			fmt.Fprintf(&sb, "%s %d", n, c.After[i])
		}
	}
	return sb.String()
}

// ARPTarget is what the controller knows about one backend address: what the config pins,
// and the VIP (and its MAC) it asks from, that of the first service listing the address.
type ARPTarget struct {
	IP     netip.Addr
	MAC    net.HardwareAddr // configured; nil to learn
	Port   uint32           // configured; 0 to learn
	VIP    netip.Addr
	VIPMAC net.HardwareAddr
	// Datapaths: where the services listing this address are placed (nil: everywhere).
	Datapaths []uint64
}

// Pinned reports whether the config gives both MAC and port: nothing to learn.
func (t ARPTarget) Pinned() bool { return t.MAC != nil && t.Port != 0 }

// Build finishes an intent: it indexes the backends' addresses for ARP. Call it once, before
// handing the intent on.
func (in *Intent) Build() *Intent {
	in.arp = map[netip.Addr]ARPTarget{}
	in.vips = map[netip.Addr][]int{}
	for i := range in.Services {
		s := &in.Services[i]
		in.vips[s.VIP] = append(in.vips[s.VIP], i)
		for _, be := range s.Backends {
			t, dup := in.arp[be.IP]
			if !dup {
				in.arp[be.IP] = ARPTarget{IP: be.IP, MAC: be.MAC, Port: be.SwitchPort, VIP: s.VIP, VIPMAC: s.VIPMAC, Datapaths: s.Datapaths}
				continue
			}
			// An address behind services placed apart is wanted on all their switches.
			if t.Datapaths != nil {
				if s.Datapaths == nil {
					t.Datapaths = nil
				} else {
					t.Datapaths = union(t.Datapaths, s.Datapaths)
				}
				in.arp[be.IP] = t
			}
		}
	}
	return in
}

func union(a, b []uint64) []uint64 {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// On returns the services placed on the switch dpid, in the intent's order.
func (in *Intent) On(dpid uint64) []*Service {
	out := make([]*Service, 0, len(in.Services))
	for i := range in.Services {
		if in.Services[i].PlacedOn(dpid) {
			out = append(out, &in.Services[i])
		}
	}
	return out
}

// ARP returns the backend addresses the controller locates on the switch dpid (the pinned
// ones too; callers skip them for requests but need their pins for learning).
func (in *Intent) ARP(dpid uint64) []ARPTarget {
	out := make([]ARPTarget, 0, len(in.arp))
	for _, t := range in.arp {
		if t.Datapaths == nil || slices.Contains(t.Datapaths, dpid) {
			out = append(out, t)
		}
	}
	return out
}

// Target returns what the controller knows about the backend address ip.
func (in *Intent) Target(ip netip.Addr) (ARPTarget, bool) {
	t, ok := in.arp[ip]
	return t, ok
}

// VIPMAC returns the MAC the VIP ip answers ARP with on the switch dpid, if a service with
// that VIP is placed there.
func (in *Intent) VIPMAC(dpid uint64, ip netip.Addr) (net.HardwareAddr, bool) {
	for _, i := range in.vips[ip] {
		if s := &in.Services[i]; s.PlacedOn(dpid) {
			return s.VIPMAC, true
		}
	}
	return nil, false
}
