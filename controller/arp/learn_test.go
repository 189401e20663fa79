package arp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

const dpid = 0x1

var (
	t0       = time.Unix(1_700_000_000, 0)
	vipMAC   = VIPMAC(vip)
	b1       = netip.MustParseAddr("10.77.0.11") // learnt
	b2       = netip.MustParseAddr("10.77.0.12") // switch_port 7 configured
	b3       = netip.MustParseAddr("10.77.0.13") // mac configured
	stranger = netip.MustParseAddr("10.77.0.99") // no backend
	macA     = net.HardwareAddr{0x3a, 0, 0, 0, 0, 0x0a}
	macB     = net.HardwareAddr{0x3a, 0, 0, 0, 0, 0x0b}
	macC     = net.HardwareAddr{0x3a, 0, 0, 0, 0, 0x0c}
	pinnedB3 = net.HardwareAddr{0x3a, 0, 0, 0, 0, 0x13}
)

func pins(ip netip.Addr) (Pin, bool) {
	switch ip {
	case b1:
		return Pin{}, true
	case b2:
		return Pin{Port: 7}, true
	case b3:
		return Pin{MAC: pinnedB3}, true
	}
	return Pin{}, false
}

// answer is a backend's correct reply to our request from the VIP.
func answer(t testing.TB, ip netip.Addr, mac net.HardwareAddr) []byte {
	return frameOf(t, vipMAC, layers.ARPReply, mac, ip, vipMAC, vip, -1)
}

// rawFrame serialises Ethernet + ARP with every field chosen by the caller.
func rawFrame(t testing.TB, ethSrc, ethDst net.HardwareAddr, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: ethSrc, DstMAC: ethDst, EthernetType: layers.EthernetTypeARP}
	a := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: op, SourceHwAddress: sha, SourceProtAddress: spa.AsSlice(), DstHwAddress: tha, DstProtAddress: tpa.AsSlice()}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, a); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func newTestLearner() *Learner { return NewLearner(LearnerConfig{}) }

func ask(t testing.TB, l *Learner, ip netip.Addr, now time.Time) {
	t.Helper()
	if err := l.Ask(dpid, ip, vipMAC, vip, now); err != nil {
		t.Fatalf("Ask(%v): %v", ip, err)
	}
}

// learnAt confirms ip at loc through one clean round starting at now; it returns the time
// after the round closed.
func learnAt(t testing.TB, l *Learner, ip netip.Addr, loc Location, now time.Time) time.Time {
	t.Helper()
	ask(t, l, ip, now)
	if v := l.Observe(dpid, loc.Port, answer(t, ip, loc.MAC), pins, now.Add(time.Millisecond)); v.Reason != "" {
		t.Fatalf("clean answer refused: %s", v.Reason)
	}
	end := now.Add(l.Config().RequestTTL)
	l.Expire(end)
	if got, _, ok := l.Usable(dpid, ip); !ok || !got.Equal(loc) {
		t.Fatalf("after a clean round %v is at %v (%v), want %v", ip, got, ok, loc)
	}
	return end
}

func TestObserveRefuses(t *testing.T) {
	ipv4 := func() []byte {
		eth := &layers.Ethernet{SrcMAC: macA, DstMAC: vipMAC, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: b1.AsSlice(), DstIP: vip.AsSlice()}
		buf := gopacket.NewSerializeBuffer()
		gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, ip, gopacket.Payload("x"))
		return buf.Bytes()
	}()
	good := answer(t, b1, macA)
	tests := []struct {
		name   string
		asked  bool // a request for b1 is open
		ip     netip.Addr
		port   uint32
		frame  []byte
		notARP bool
		reason Reason
	}{
		{"unsolicited reply", false, b1, 3, good, false, ReasonUnsolicited},
		{"gratuitous reply", true, b1, 3, frameOf(t, broadcast, layers.ARPReply, macA, b1, broadcast, b1, -1), false, ReasonGratuitous},
		{"reply to broadcast", true, b1, 3, frameOf(t, broadcast, layers.ARPReply, macA, b1, vipMAC, vip, -1), false, ReasonGratuitous},
		{"gratuitous request claiming the VIP", true, vip, 3, frameOf(t, broadcast, layers.ARPRequest, macA, vip, make(net.HardwareAddr, 6), vip, -1), false, ReasonGratuitous},
		{"reply from an IP that is no backend", true, stranger, 3, answer(t, stranger, macA), false, ReasonNotBackend},
		{"reply to another IP", true, b1, 3, frameOf(t, vipMAC, layers.ARPReply, macA, b1, vipMAC, client, -1), false, ReasonWrongDestination},
		{"reply to another MAC", true, b1, 3, frameOf(t, clientMAC, layers.ARPReply, macA, b1, clientMAC, vip, -1), false, ReasonWrongDestination},
		{"ARP target MAC not ours", true, b1, 3, frameOf(t, vipMAC, layers.ARPReply, macA, b1, clientMAC, vip, -1), false, ReasonWrongDestination},
		{"zero sender MAC", true, b1, 3, rawFrame(t, macA, vipMAC, layers.ARPReply, make(net.HardwareAddr, 6), b1, vipMAC, vip), false, ReasonBadAddress},
		{"multicast sender MAC", true, b1, 3, frameOf(t, vipMAC, layers.ARPReply, net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}, b1, vipMAC, vip, -1), false, ReasonBadAddress},
		{"Ethernet source is not the ARP sender", true, b1, 3, rawFrame(t, macB, vipMAC, layers.ARPReply, macA, b1, vipMAC, vip), false, ReasonInconsistent},
		{"in_port 0", true, b1, 0, good, false, ReasonBadPort},
		{"in_port CONTROLLER", true, b1, 0xfffffffd, good, false, ReasonBadPort},
		{"truncated", true, b1, 3, good[:14+20], false, ReasonMalformed},
		{"lying hlen", true, b1, 3, func() []byte { b := bytes.Clone(good); b[14+4] = 150; return b }(), false, ReasonMalformed},
		{"RARP opcode", true, b1, 3, func() []byte { b := bytes.Clone(good); b[14+7] = 3; return b }(), false, ReasonMalformed},
		{"not ARP", true, b1, 3, ipv4, true, ""},
		{"empty", true, b1, 3, nil, false, ReasonMalformed},
		// A request claiming a backend's IP teaches nothing even when nothing is known.
		{"request with a backend as sender", true, b1, 3, frameOf(t, broadcast, layers.ARPRequest, macA, b1, make(net.HardwareAddr, 6), vip, -1), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLearner()
			if tt.asked {
				ask(t, l, b1, t0)
				ask(t, l, stranger, t0) // even a request we sent does not make a stranger a backend
			}
			v := l.Observe(dpid, tt.port, tt.frame, pins, t0.Add(time.Millisecond))
			if v.Reason != tt.reason || v.ARP == tt.notARP {
				t.Fatalf("verdict %+v, want reason %q ARP %v", v, tt.reason, !tt.notARP)
			}
			if v.Challenge {
				t.Error("nothing was known, yet a challenge was asked for")
			}
			if c := l.Expire(t0.Add(time.Hour)); len(c) != 0 {
				t.Errorf("closing the round changed %+v", c)
			}
			for _, ip := range []netip.Addr{b1, stranger, vip} {
				if loc, _, ok := l.Usable(dpid, ip); ok {
					t.Errorf("%v located at %v by a refused frame", ip, loc)
				}
			}
			if len(l.locs) != 0 {
				t.Errorf("refused frame left %d location entries", len(l.locs))
			}
		})
	}
}

func TestPins(t *testing.T) {
	tests := []struct {
		name   string
		ip     netip.Addr
		mac    net.HardwareAddr
		port   uint32
		reason Reason
	}{
		{"configured port, other port", b2, macA, 8, ReasonWrongPort},
		{"configured port, that port", b2, macA, 7, ""},
		{"configured MAC, other MAC", b3, macA, 3, ReasonWrongMAC},
		{"configured MAC, that MAC; port learnt", b3, pinnedB3, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLearner()
			ask(t, l, tt.ip, t0)
			if v := l.Observe(dpid, tt.port, answer(t, tt.ip, tt.mac), pins, t0); v.Reason != tt.reason {
				t.Fatalf("reason %q, want %q", v.Reason, tt.reason)
			}
			l.Expire(t0.Add(time.Hour))
			loc, _, ok := l.Usable(dpid, tt.ip)
			if ok != (tt.reason == "") || (ok && !loc.Equal(Location{tt.mac, tt.port})) {
				t.Fatalf("located %v %v", loc, ok)
			}
		})
	}
}

func TestSolicitedReplyLearnsWhenItsRoundCloses(t *testing.T) {
	l := newTestLearner()
	ask(t, l, b1, t0)
	v := l.Observe(dpid, 3, answer(t, b1, macA), pins, t0.Add(time.Millisecond))
	if v.Reason != "" || v.Deadline != t0.Add(DefaultRequestTTL) || v.IP != b1 {
		t.Fatalf("verdict %+v", v)
	}
	// Tentative: not used for forwarding while a competing answer may still come.
	if _, _, ok := l.Usable(dpid, b1); ok {
		t.Fatal("usable before its round closed")
	}
	if c := l.Expire(v.Deadline.Add(-time.Nanosecond)); len(c) != 0 {
		t.Fatalf("round closed early: %+v", c)
	}
	c := l.Expire(v.Deadline)
	if len(c) != 1 || c[0].Kind != ChangeLearned || !c[0].To.Equal(Location{macA, 3}) || c[0].IP != b1 || c[0].DPID != dpid {
		t.Fatalf("changes %+v", c)
	}
	loc, trust, ok := l.Usable(dpid, b1)
	if !ok || trust != TrustConfirmed || !loc.Equal(Location{macA, 3}) {
		t.Fatalf("after close: %v %v %v", loc, trust, ok)
	}
	if l.Wants(dpid, b1, t0) {
		t.Error("a confirmed location still wants requests")
	}
	// Another switch knows nothing of it.
	if _, _, ok := l.Usable(dpid+1, b1); ok {
		t.Error("location leaked to another switch")
	}
}

func TestRacingFirstAnswersLocateNothing(t *testing.T) {
	l := newTestLearner()
	ask(t, l, b1, t0)
	l.Observe(dpid, 3, answer(t, b1, macA), pins, t0)
	if v := l.Observe(dpid, 4, answer(t, b1, macB), pins, t0); v.Reason != ReasonDisagrees {
		t.Fatalf("second answer: %q", v.Reason)
	}
	c := l.Expire(t0.Add(DefaultRequestTTL))
	if len(c) != 1 || c[0].Kind != ChangeDropped {
		t.Fatalf("changes %+v", c)
	}
	if _, _, ok := l.Usable(dpid, b1); ok || !l.Wants(dpid, b1, t0) {
		t.Fatal("a contested first location is usable, or not asked for again")
	}
}

func TestConfirmedLocationDoesNotFollowOneReply(t *testing.T) {
	home := Location{macA, 3}
	tests := []struct {
		name      string
		solicited bool
		loc       Location
		reason    Reason
	}{
		{"unsolicited, other MAC", false, Location{macB, 3}, ReasonUnsolicited},
		{"unsolicited, other port", false, Location{macA, 4}, ReasonUnsolicited},
		{"solicited, other MAC", true, Location{macB, 3}, ReasonDisagrees},
		{"solicited, other port", true, Location{macA, 4}, ReasonDisagrees},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLearner()
			now := learnAt(t, l, b1, home, t0)
			if tt.solicited {
				ask(t, l, b1, now)
			}
			v := l.Observe(dpid, tt.loc.Port, answer(t, b1, tt.loc.MAC), pins, now)
			if v.Reason != tt.reason {
				t.Fatalf("reason %q, want %q", v.Reason, tt.reason)
			}
			if v.Challenge == tt.solicited {
				t.Errorf("challenge %v: an unsolicited disagreement must ask again, a solicited one is already being asked", v.Challenge)
			}
			c := l.Expire(now.Add(time.Hour))
			if loc, _, _ := l.Usable(dpid, b1); !loc.Equal(home) {
				t.Fatalf("moved to %v by one reply (changes %+v)", loc, c)
			}
			if tt.solicited && (len(c) != 1 || c[0].Kind != ChangeCandidate || !l.Wants(dpid, b1, t0)) {
				t.Errorf("one disagreeing round: changes %+v, wants %v; want a candidate and a follow-up request", c, l.Wants(dpid, b1, t0))
			}
		})
	}
}

// TestReconfirmation drives rounds of answers at a backend confirmed at home.
func TestReconfirmation(t *testing.T) {
	home, away, other := Location{macA, 3}, Location{macB, 4}, Location{macC, 5}
	tests := []struct {
		name   string
		rounds [][]Location
		want   Location
	}{
		{"two rounds from the new place", [][]Location{{away}, {away}}, away},
		{"one round only", [][]Location{{away}}, home},
		{"old one answers in the second round", [][]Location{{away}, {away, home}}, home},
		{"old one answers first in the second round", [][]Location{{away}, {home, away}}, home},
		{"conflict resets the count", [][]Location{{away}, {away, home}, {away}}, home},
		{"after a conflict two clean rounds move", [][]Location{{away}, {away, home}, {away}, {away}}, away},
		{"silent round breaks the sequence", [][]Location{{away}, {}, {away}}, home},
		{"silent round then two", [][]Location{{away}, {}, {away}, {away}}, away},
		{"two different new places", [][]Location{{away}, {other}}, home},
		{"two new places in one round", [][]Location{{away, other}, {away, other}}, home},
		{"old place answering keeps it", [][]Location{{home}, {home}}, home},
		{"duplicate answers count once", [][]Location{{away, away}, {away, away}}, away},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLearner()
			now := learnAt(t, l, b1, home, t0)
			for i, answers := range tt.rounds {
				if err := l.Ask(dpid, b1, vipMAC, vip, now); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				for _, a := range answers {
					l.Observe(dpid, a.Port, answer(t, b1, a.MAC), pins, now.Add(time.Millisecond))
				}
				now = now.Add(DefaultRequestTTL)
				l.Expire(now)
				if i < len(tt.rounds)-1 {
					if loc, _, _ := l.Usable(dpid, b1); !loc.Equal(home) {
						t.Fatalf("moved to %v after round %d", loc, i)
					}
				}
			}
			loc, trust, ok := l.Usable(dpid, b1)
			if !ok || !loc.Equal(tt.want) || trust != TrustConfirmed {
				t.Fatalf("at %v (%v %v), want %v", loc, trust, ok, tt.want)
			}
		})
	}
}

func TestAdopted(t *testing.T) {
	home, away := Location{macA, 3}, Location{macB, 4}
	l := newTestLearner()
	if l.Adopt(dpid, b1, Location{net.HardwareAddr{1, 2, 3, 4, 5, 6}, 3}) || l.Adopt(dpid, b1, Location{macA, 0}) {
		t.Fatal("adopted a multicast MAC or port 0")
	}
	if !l.Adopt(dpid, b1, home) {
		t.Fatal("not adopted")
	}
	loc, trust, ok := l.Usable(dpid, b1)
	if !ok || trust != TrustAdopted || !loc.Equal(home) || !l.Wants(dpid, b1, t0) {
		t.Fatalf("adopted: %v %v %v wants %v; want usable at once and re-checked", loc, trust, ok, l.Wants(dpid, b1, t0))
	}
	if l.Adopt(dpid, b1, away) {
		t.Fatal("a second read-back replaced a known location")
	}
	// One answer from elsewhere does not move it either.
	now := t0
	ask(t, l, b1, now)
	l.Observe(dpid, away.Port, answer(t, b1, away.MAC), pins, now)
	now = now.Add(DefaultRequestTTL)
	l.Expire(now)
	if loc, _, _ := l.Usable(dpid, b1); !loc.Equal(home) {
		t.Fatalf("adopted location moved by one round to %v", loc)
	}
	// The old place answers: confirmed.
	ask(t, l, b1, now)
	l.Observe(dpid, home.Port, answer(t, b1, home.MAC), pins, now)
	c := l.Expire(now.Add(DefaultRequestTTL))
	if _, trust, _ := l.Usable(dpid, b1); trust != TrustConfirmed || len(c) != 1 || c[0].Kind != ChangeConfirmed {
		t.Fatalf("trust %v changes %+v after the adopted place answered", trust, c)
	}
	if l.Adopt(dpid, b1, away) {
		t.Fatal("read-back replaced a confirmed location")
	}
}

func TestOutstandingRequestsExpire(t *testing.T) {
	l := newTestLearner()
	ask(t, l, b1, t0)
	if err := l.Ask(dpid, b1, vipMAC, vip, t0.Add(time.Millisecond)); !errors.Is(err, ErrOutstanding) {
		t.Fatalf("second Ask while one is open: %v", err)
	}
	if l.Wants(dpid, b1, t0) {
		t.Fatal("wants a request while one is open")
	}
	// A reply after the deadline but before Expire ran is not an answer.
	if v := l.Observe(dpid, 3, answer(t, b1, macA), pins, t0.Add(DefaultRequestTTL)); v.Reason != ReasonUnsolicited {
		t.Fatalf("late reply: %q", v.Reason)
	}
	l.Expire(t0.Add(DefaultRequestTTL - time.Nanosecond))
	if l.Outstanding() != 1 {
		t.Fatal("request expired before its TTL")
	}
	l.Expire(t0.Add(DefaultRequestTTL))
	if l.Outstanding() != 0 || !l.Wants(dpid, b1, t0) {
		t.Fatalf("after TTL: %d outstanding, wants %v", l.Outstanding(), l.Wants(dpid, b1, t0))
	}
	ask(t, l, b1, t0.Add(DefaultRequestTTL))
	if _, _, ok := l.Usable(dpid, b1); ok {
		t.Fatal("the late reply located the backend")
	}
}

func TestTablesStayBoundedUnderFlood(t *testing.T) {
	const n = 100_000
	l := NewLearner(LearnerConfig{MaxOutstanding: 1000})
	everyone := func(netip.Addr) (Pin, bool) { return Pin{}, true }
	full := 0
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		switch err := l.Ask(dpid, ip, vipMAC, vip, t0); {
		case errors.Is(err, ErrTableFull):
			full++
		case err != nil:
			t.Fatal(err)
		}
	}
	if l.Outstanding() != 1000 || full != n-1000 {
		t.Fatalf("%d outstanding, %d refused; want 1000 and %d", l.Outstanding(), full, n-1000)
	}
	// Frames from the network never grow anything: replies from many IPs that are not in an
	// open round, requests from many IPs, and replies to the open rounds only add to those.
	for i := range n {
		ip := netip.AddrFrom4([4]byte{172, byte(i >> 16), byte(i >> 8), byte(i)})
		l.Observe(dpid, 3, answer(t, ip, macA), everyone, t0)
		l.Observe(dpid, 3, frameOf(t, broadcast, layers.ARPRequest, macA, ip, make(net.HardwareAddr, 6), vip, -1), everyone, t0)
	}
	if len(l.locs) != 0 || l.Outstanding() != 1000 {
		t.Fatalf("flood of frames created %d locations, %d rounds", len(l.locs), l.Outstanding())
	}
	l.Expire(t0.Add(DefaultRequestTTL))
	if l.Outstanding() != 0 {
		t.Fatalf("%d rounds left after their TTL", l.Outstanding())
	}
	if err := l.Ask(dpid, b1, vipMAC, vip, t0.Add(DefaultRequestTTL)); err != nil {
		t.Fatalf("table still full after expiry: %v", err)
	}
}

// FuzzObserve: whatever one frame says, it never moves a confirmed location, and it locates
// an unknown backend only at the port it arrived on, only once its round closes.
func FuzzObserve(f *testing.F) {
	f.Add(answer(f, b1, macB), uint32(4))
	f.Add(answer(f, b2, macB), uint32(7))
	f.Add(frameOf(f, broadcast, layers.ARPRequest, macB, b1, make(net.HardwareAddr, 6), vip, 9), uint32(4))
	f.Add([]byte{}, uint32(1))
	home := Location{macA, 3}
	f.Fuzz(func(t *testing.T, frame []byte, port uint32) {
		l := newTestLearner()
		now := learnAt(t, l, b1, home, t0)
		ask(t, l, b1, now)
		ask(t, l, b2, now)
		v := l.Observe(dpid, port, frame, pins, now)
		if v.Reason != "" && v.Reason != ReasonDisagrees && v.Deadline != (time.Time{}) {
			t.Fatalf("refused frame joined a round: %+v", v)
		}
		if _, _, ok := l.Usable(dpid, b2); ok {
			t.Fatal("usable before its round closed")
		}
		l.Expire(now.Add(time.Hour))
		if loc, _, _ := l.Usable(dpid, b1); !loc.Equal(home) {
			t.Fatalf("one frame moved b1 to %v", loc)
		}
		if loc, _, ok := l.Usable(dpid, b2); ok && (loc.Port != 7 || loc.Port != port || !usableMAC(loc.MAC)) {
			t.Fatalf("b2 located at %v from in_port %d", loc, port)
		}
	})
}

// TestRefreshFindsAMovedBackend: a confirmed location is asked about again after Refresh,
// so a backend that moved without sending anything the controller sees is found, through
// the same two-round re-confirmation.
func TestRefreshFindsAMovedBackend(t *testing.T) {
	home, away := Location{macA, 3}, Location{macA, 9} // same NIC, new port
	l := newTestLearner()
	now := learnAt(t, l, b1, home, t0)
	if l.Wants(dpid, b1, t0.Add(DefaultRefresh-time.Second)) {
		t.Fatal("asked again before Refresh")
	}
	now = t0.Add(DefaultRefresh + time.Second)
	if !l.Wants(dpid, b1, now) {
		t.Fatal("not asked again after Refresh")
	}
	for i := range 2 {
		if !l.Wants(dpid, b1, now) {
			t.Fatalf("round %d: no request wanted", i)
		}
		ask(t, l, b1, now)
		l.Observe(dpid, away.Port, answer(t, b1, away.MAC), pins, now)
		now = now.Add(DefaultRequestTTL)
		l.Expire(now)
	}
	if loc, _, _ := l.Usable(dpid, b1); !loc.Equal(away) {
		t.Fatalf("at %v after two refresh rounds from %v", loc, away)
	}
	if l.Wants(dpid, b1, now) {
		t.Fatal("still asking right after the move")
	}
}
