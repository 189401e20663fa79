package dataplane

import "fmt"

// Cookie layout (64 bits, most significant first):
//
//	| 16 bits CookieMagic>>48 | 16 bits service index | 16 bits backend index | 16 bits Kind |
//
// The magic lets the controller read and delete only its own flows (FLOW_STATS and strict
// deletes use CookieMask); the service and backend indexes are the stable indexes from the
// configuration, so `ovs-ofctl dump-flows` names what a flow is for and per-backend counters
// can be attributed. Flows not tied to one service or backend carry NoIndex there.
const (
	CookieMagic uint64 = 0xf1e0 << 48 // "flowweight"
	CookieMask  uint64 = 0xffff << 48 // selects the magic only
	NoIndex     uint16 = 0xffff       // service or backend index of shared flows
)

// Kind says which rule of the design a flow implements; it is the low 16 bits of the cookie.
type Kind uint16

const (
	KindARP          Kind = 1  // table 0: ARP for the VIP → controller
	KindVIP          Kind = 2  // table 0: client → VIP (ct or group)
	KindNew          Kind = 3  // table 1: +new+trk → group
	KindEst          Kind = 4  // table 1: +est+trk → table 2 (shared)
	KindRel          Kind = 5  // table 1: +rel+trk → table 2 (shared)
	KindForward      Kind = 6  // table 2: per backend delivery
	KindReturn       Kind = 7  // table 0: backend → client
	KindReturnVIP    Kind = 8  // table 3: source VIP → eth_src, NORMAL
	KindReturnNormal Kind = 9  // table 3: anything else → NORMAL (shared)
	KindNormal       Kind = 10 // table 0: lowest priority NORMAL (shared)
	KindNS           Kind = 11 // table 0: IPv6 neighbour solicitation for the VIP → controller
	KindNA           Kind = 12 // table 0: IPv6 neighbour advertisement to the VIP → controller
	// Client affinity (affinity.go). KindAffinity flows are written by the switch's learn
	// action, never planned: read-back drops them (State.WithoutLearned) and Plan never
	// deletes them; AffinityDelete removes one backend's by cookie.
	KindAffinity          Kind = 13 // table 4: learned client → reg0/reg1 = its backend
	KindAffinityNone      Kind = 14 // table 4: lowest priority, no action (shared)
	KindAffinityHit       Kind = 15 // table 5: per backend, learned backend → ct commit nat
	KindAffinityMiss      Kind = 16 // table 5: no learned backend → group
	KindAffinityLearn     Kind = 17 // table 6: per backend, learn the client, → table 2
	KindAffinityLearnNone Kind = 18 // table 6: lowest priority → table 2 (shared)
	// Reactive dispatch (dispatch.go).
	KindDispatch     Kind = 19 // table 1: +new+trk to the VIP → controller
	KindDispatchPick Kind = 20 // table 1: per backend, +new+trk and reg3 = it → ct commit nat
	// UDP per flow (udpflow.go).
	KindUDPHash Kind = 21 // table 1 (0 stateless): a new UDP flow to the VIP → multipath → table 7
	KindUDPSlot Kind = 22 // table 7: per slot, backend in the cookie → the backend's bucket action
	// Client affinity's counters (affinity.go).
	KindAffinityPinned     Kind = 23 // table 8: per backend, a pinned new connection after its NAT → table 2
	KindAffinityPinnedNone Kind = 24 // table 8: lowest priority → table 2 (shared)
	// Reactive dispatch's fallback (dispatch.go).
	KindDispatchFallback Kind = 25 // table 1: +new+trk to the VIP → group, below KindDispatch's lease
)

var kindNames = map[Kind]string{
	KindARP: "arp", KindVIP: "vip", KindNew: "new", KindEst: "est", KindRel: "rel",
	KindForward: "forward", KindReturn: "return", KindReturnVIP: "return-vip",
	KindReturnNormal: "return-normal", KindNormal: "normal", KindNS: "ns", KindNA: "na",
	KindAffinity: "affinity", KindAffinityNone: "affinity-none", KindAffinityHit: "affinity-hit", KindAffinityMiss: "affinity-miss",
	KindAffinityLearn: "affinity-learn", KindAffinityLearnNone: "affinity-learn-none",
	KindDispatch: "dispatch", KindDispatchPick: "dispatch-pick",
	KindUDPHash: "udp-hash", KindUDPSlot: "udp-slot",
	KindAffinityPinned: "affinity-pinned", KindAffinityPinnedNone: "affinity-pinned-none",
	KindDispatchFallback: "dispatch-fallback",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", uint16(k))
}

// MakeCookie builds the cookie of a flow.
func MakeCookie(service, backend uint16, kind Kind) uint64 {
	return CookieMagic | uint64(service)<<32 | uint64(backend)<<16 | uint64(kind)
}

// ParseCookie splits a cookie; ok is false for a cookie that is not ours.
func ParseCookie(c uint64) (service, backend uint16, kind Kind, ok bool) {
	return uint16(c >> 32), uint16(c >> 16), Kind(c), c&CookieMask == CookieMagic
}

// describeCookie renders a cookie for message descriptions and test failures.
func describeCookie(c uint64) string {
	s, b, k, ok := ParseCookie(c)
	if !ok {
		return fmt.Sprintf("cookie=%#x (foreign)", c)
	}
	idx := func(i uint16) string {
		if i == NoIndex {
			return "-"
		}
		return fmt.Sprint(i)
	}
	return fmt.Sprintf("%s service=%s backend=%s", k, idx(s), idx(b))
}
