package dataplane

import (
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/internal/slots"
)

// dnsService is a UDP service over three located backends at 1:2:4.
func dnsService(mode Mode) Service {
	return Service{
		Name: "dns", Index: 2, VIP: ip("10.0.0.53"), VIPMAC: mac("02:00:00:00:02:00"),
		Protocol: "udp", Port: 53, Mode: mode, GroupID: 11, Zone: 8,
		Backends: []Backend{
			{Name: "a", Index: 0, IP: ip("10.0.0.1"), MAC: mac("02:00:00:00:00:01"), SwitchPort: 1, Weight: 100},
			{Name: "b", Index: 1, IP: ip("10.0.0.2"), MAC: mac("02:00:00:00:00:02"), SwitchPort: 2, Weight: 200},
			{Name: "c", Index: 2, IP: ip("10.0.0.3"), MAC: mac("02:00:00:00:00:03"), SwitchPort: 3, Weight: 400},
		},
	}
}

var ovs31 = Options{Normal: true, OVS: slots.Version{Major: 3, Minor: 1}}

// slotsByBackend counts service svc's table-7 flows per backend index (from the cookie), and
// checks each one's match carries its slot exactly once.
func slotsByBackend(t *testing.T, st State, svc uint16) map[uint16]int {
	t.Helper()
	out := map[uint16]int{}
	seen := map[string]bool{}
	for _, f := range st.Flows {
		s, b, k, _ := ParseCookie(f.Cookie)
		if k != KindUDPSlot || s != svc {
			continue
		}
		if f.Table != TableUDPSlot {
			t.Fatalf("slot flow in table %d: %v", f.Table, f)
		}
		if seen[f.Match] {
			t.Fatalf("two slot flows with one match: %v", f)
		}
		seen[f.Match] = true
		out[b]++
	}
	return out
}

func kinds(st State, svc uint16) map[Kind]int {
	out := map[Kind]int{}
	for _, f := range st.Flows {
		if s, _, k, _ := ParseCookie(f.Cookie); s == svc {
			out[k]++
		}
	}
	return out
}

func TestPerFlowUDPDesired(t *testing.T) {
	hashInstr := encodeInstructions(udpHash())
	for _, tc := range []struct {
		name    string
		svc     func() Service
		opt     Options
		perFlow bool
	}{
		{"conntrack on 3.1", func() Service { return dnsService(ModeConntrack) }, ovs31, true},
		{"stateless on 3.1", func() Service { return dnsService(ModeStateless) }, ovs31, true},
		{"2.5.0 is the first", func() Service { return dnsService(ModeConntrack) }, Options{OVS: slots.Version{Major: 2, Minor: 5}}, true},
		{"2.4.9 hashes per address", func() Service { return dnsService(ModeConntrack) }, Options{OVS: slots.Version{Major: 2, Minor: 4, Patch: 9}}, false},
		{"unknown switch hashes per address", func() Service { return dnsService(ModeConntrack) }, Options{}, false},
		{"tcp is the group's", func() Service { s := dnsService(ModeConntrack); s.Protocol = "tcp"; return s }, ovs31, false},
		{"affinity pins by address", func() Service { s := dnsService(ModeConntrack); s.AffinityTimeout = 30; return s }, ovs31, false},
		{"configured per address", func() Service { s := dnsService(ModeConntrack); s.UDPHash = UDPPerAddress; return s }, ovs31, false},
		{"reactive chooses per flow itself", func() Service { s := dnsService(ModeConntrack); s.Dispatch = DispatchReactive; return s }, ovs31, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.svc()
			if got := PerFlowUDP(s, tc.opt); got != tc.perFlow {
				t.Fatalf("PerFlowUDP = %v, want %v", got, tc.perFlow)
			}
			st := Desired([]Service{s}, tc.opt)
			per := slotsByBackend(t, st, s.Index)
			hashed := 0
			for _, f := range st.Flows {
				if f.Instructions == hashInstr {
					hashed++
					if want := map[Mode]uint8{ModeConntrack: TableCT, ModeStateless: TableClassify}[s.Mode]; f.Table != want {
						t.Errorf("hash flow in table %d, want %d", f.Table, want)
					}
				}
			}
			if !tc.perFlow {
				l := Layout(s, tc.opt)
				wantHash, wantNote := UDPPerAddress, s.Protocol == "udp" && s.AffinityTimeout == 0 && s.UDPHash == ""
				if s.Protocol == "tcp" || s.Dispatch == DispatchReactive {
					wantHash = ""
				}
				noted := false
				for _, n := range l.Notes {
					noted = noted || strings.Contains(n.Text, "per client address")
				}
				if l.UDPHash != wantHash || noted != (wantNote && s.Dispatch != DispatchReactive) {
					t.Errorf("layout says %q, noted %v (%v)", l.UDPHash, noted, l.Notes)
				}
				if len(per) != 0 || hashed != 0 {
					t.Fatalf("per-address service has %d hash flows and slot flows %v", hashed, per)
				}
				return
			}
			if hashed != 1 {
				t.Fatalf("%d hash flows, want 1", hashed)
			}
			want := slots.Apportion([]uint16{100, 200, 400}, UDPSlots)
			for i, n := range want {
				if per[uint16(i)] != n {
					t.Errorf("backend %d has %d slot flows, want %d (%v)", i, per[uint16(i)], n, per)
				}
			}
			// The group is still written with the weights (dump-groups), but nothing uses it.
			if len(st.Groups) != 1 || st.Groups[0].ID != s.GroupID {
				t.Fatalf("groups %v, want the service's", st.Groups)
			}
			if k := kinds(st, s.Index); k[KindNew] != 0 {
				t.Errorf("a new-connection flow to the group is left: %v", k)
			}
			l := Layout(s, tc.opt)
			if l.UDPHash != UDPPerFlow || l.N != UDPSlots || l.Table.NHash != UDPSlots {
				t.Fatalf("layout %+v, want the per-flow table of %d", l, UDPSlots)
			}
			for i, b := range l.Backends {
				if b.Slots != want[i] {
					t.Errorf("layout: %s has %d slots, want %d", b.Name, b.Slots, want[i])
				}
			}
		})
	}
}

// TestPerFlowUDPUnlocatedBackends: a backend without a location gets no slot; with none
// located the hash flow stays and finds no slot flow (the packet is dropped, as by a group
// without buckets).
func TestPerFlowUDPUnlocatedBackends(t *testing.T) {
	s := dnsService(ModeConntrack)
	s.Backends[2].MAC = nil
	per := slotsByBackend(t, Desired([]Service{s}, ovs31), s.Index)
	if per[2] != 0 || per[0]+per[1] != UDPSlots {
		t.Fatalf("slots %v: want all %d on a and b", per, UDPSlots)
	}
	for i := range s.Backends {
		s.Backends[i].MAC = nil
	}
	st := Desired([]Service{s}, ovs31)
	if per := slotsByBackend(t, st, s.Index); len(per) != 0 {
		t.Fatalf("slots %v with no backend located", per)
	}
	if k := kinds(st, s.Index); k[KindUDPHash] != 1 {
		t.Fatalf("kinds %v: want the hash flow kept", k)
	}
}

// TestPerFlowUDPKeepSlots: a reweight rewrites exactly the slots that must move, and equal
// weights rewrite nothing.
func TestPerFlowUDPKeepSlots(t *testing.T) {
	s := dnsService(ModeConntrack)
	held := KeepSlots(Desired([]Service{s}, ovs31), State{})
	if stages := Plan(KeepSlots(Desired([]Service{s}, ovs31), held), held); len(stages) != 0 {
		t.Fatalf("same weights planned %d stages", len(stages))
	}
	before := slots.Apportion([]uint16{100, 200, 400}, UDPSlots)
	for _, w := range [][3]uint16{{200, 200, 300}, {400, 200, 100}, {0, 200, 400}, {1, 1, 1}} {
		for i := range s.Backends {
			s.Backends[i].Weight = w[i]
		}
		next := KeepSlots(Desired([]Service{s}, ovs31), held)
		after := slots.Apportion(w[:], UDPSlots)
		must := 0
		for i := range after {
			must += max(0, after[i]-before[i])
		}
		changed := 0
		for _, st := range Plan(next, held) {
			for _, m := range st {
				if strings.Contains(m.Desc, "udp-slot") {
					changed++
				}
			}
		}
		if changed != must {
			t.Errorf("weights %v: %d slot flows rewritten, %d must move (%v -> %v)", w, changed, must, before, after)
		}
		if per := slotsByBackend(t, next, s.Index); per[0] != after[0] || per[1] != after[1] || per[2] != after[2] {
			t.Errorf("weights %v: slots %v, want %v", w, per, after)
		}
		held, before = next, after
	}
}

// TestUDPSlotCounts: the slot flows' counters sum per backend with the youngest flow's age;
// a counter naming no backend of the service, and a split of a slot flow naming none, fail
// naming the service; other services' and other kinds' counters are not counted.
func TestUDPSlotCounts(t *testing.T) {
	s := dnsService(ModeConntrack)
	slot := func(svc, b uint16, packets uint64, age uint32) FlowCounter {
		return FlowCounter{Cookie: MakeCookie(svc, b, KindUDPSlot), Table: TableUDPSlot, Packets: packets, DurationSec: age}
	}
	per, youngest, ok, err := UDPSlotCounts(s, []FlowCounter{
		slot(2, 0, 5, 30), slot(2, 2, 7, 12), slot(2, 2, 1, 40), slot(3, 1, 100, 1),
		{Cookie: MakeCookie(2, 1, KindForward), Packets: 50},
	})
	if err != nil || !ok || youngest != 12*time.Second || per[0] != 5 || per[1] != 0 || per[2] != 8 {
		t.Fatalf("UDPSlotCounts = %v, %v, %v, %v; want [5 0 8], 12s", per, youngest, ok, err)
	}
	if _, _, ok, err := UDPSlotCounts(s, []FlowCounter{slot(3, 0, 1, 1)}); ok || err != nil {
		t.Fatalf("another service's counters only: ok %v err %v, want neither", ok, err)
	}
	if _, _, _, err := UDPSlotCounts(s, []FlowCounter{slot(2, 9, 1, 1)}); err == nil || !strings.Contains(err.Error(), `service "dns"`) {
		t.Fatalf("a counter naming backend 9: error %v", err)
	}

	st := Desired([]Service{s}, ovs31)
	sp, err := UDPSplitOf(s, st.Flows)
	want := slots.Apportion([]uint16{100, 200, 400}, UDPSlots)
	if err != nil || sp.NHash != UDPSlots || sp.Slots[0] != want[0] || sp.Slots[1] != want[1] || sp.Slots[2] != want[2] {
		t.Fatalf("UDPSplitOf = %+v, %v; want slots %v of %d", sp, err, want, UDPSlots)
	}
	bad := slices.Clone(st.Flows)
	for i := range bad {
		if _, _, k, _ := ParseCookie(bad[i].Cookie); k == KindUDPSlot {
			bad[i].Cookie = MakeCookie(s.Index, 9, KindUDPSlot)
			break
		}
	}
	if _, err := UDPSplitOf(s, bad); err == nil || !strings.Contains(err.Error(), "backend index 9") {
		t.Fatalf("a slot flow naming backend 9: error %v", err)
	}
}

// TestPerFlowUDPSlotsBeforeTheHash: turning a service to per-flow hashing writes its slot
// flows in a stage before the hash flow that leads to them (each stage ends in a barrier), so
// no new flow is hashed into a slot the switch does not hold yet.
func TestPerFlowUDPSlotsBeforeTheHash(t *testing.T) {
	s := dnsService(ModeConntrack)
	byAddress := Desired([]Service{s}, Options{Normal: true}) // unknown version: the group
	stages := Plan(KeepSlots(Desired([]Service{s}, ovs31), byAddress), byAddress)
	slotStage, hashStage := -1, -1
	for i, st := range stages {
		for _, m := range st {
			switch {
			case strings.Contains(m.Desc, "udp-slot") && slotStage < 0:
				slotStage = i
			case strings.Contains(m.Desc, "udp-hash"):
				hashStage = i
			}
			if strings.Contains(m.Desc, "udp-slot") && i != slotStage {
				t.Fatalf("slot flows in stages %d and %d", slotStage, i)
			}
		}
	}
	if slotStage < 0 || hashStage <= slotStage {
		t.Fatalf("slot flows in stage %d, the hash flow in stage %d: want the slots first", slotStage, hashStage)
	}
}

// TestUDPSplitOfAnotherLayout: slot flows whose cookie names a backend but whose action sends
// to another (a reload that reordered the backends, read before the rewrite) are refused.
func TestUDPSplitOfAnotherLayout(t *testing.T) {
	s := dnsService(ModeConntrack)
	st := Desired([]Service{s}, ovs31)
	swapped := s
	swapped.Backends = slices.Clone(s.Backends)
	swapped.Backends[0].IP, swapped.Backends[1].IP = s.Backends[1].IP, s.Backends[0].IP
	if _, err := UDPSplitOf(swapped, st.Flows); err == nil || !strings.Contains(err.Error(), "sends elsewhere") {
		t.Fatalf("split of another layout: error %v", err)
	}
	if _, err := UDPSplitOf(s, st.Flows); err != nil {
		t.Fatalf("split of its own layout: %v", err)
	}
}
