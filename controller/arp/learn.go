package arp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/google/gopacket/layers"
)

// Location is where a backend is on one switch: its MAC and the OpenFlow port it answers on.
type Location struct {
	MAC  net.HardwareAddr
	Port uint32
}

// Equal reports whether two locations are the same MAC on the same port.
func (l Location) Equal(o Location) bool { return l.Port == o.Port && bytes.Equal(l.MAC, o.MAC) }

// Trust says how far a location has been checked; see the package documentation.
type Trust uint8

const (
	TrustNone      Trust = iota // nothing known
	TrustTentative              // answered our request; its round is still open; not used for forwarding
	TrustAdopted                // read back from the switch (our own earlier write); used, being re-checked
	TrustConfirmed              // a round of our own requests agreed on it; used
)

var trustNames = [...]string{"none", "tentative", "adopted", "confirmed"}

func (t Trust) String() string {
	if int(t) < len(trustNames) {
		return trustNames[t]
	}
	return "invalid"
}

// Usable reports whether forwarding may use a location of this trust.
func (t Trust) Usable() bool { return t == TrustAdopted || t == TrustConfirmed }

// Pin is what the configuration fixes about a backend: a zero field is learned, a set one is
// the only value accepted.
type Pin struct {
	MAC  net.HardwareAddr
	Port uint32
}

// Reason says why a frame taught the learner nothing. The set is fixed (Reasons lists it), so
// it is safe as a metric label.
type Reason string

const (
	ReasonMalformed        Reason = "malformed"         // claims to be ARP but does not decode
	ReasonGratuitous       Reason = "gratuitous"        // sender IP = target IP, or a reply to broadcast: an announcement, not an answer
	ReasonBadAddress       Reason = "bad_address"       // sender MAC multicast or zero, sender IP unspecified
	ReasonInconsistent     Reason = "inconsistent"      // Ethernet source differs from the ARP sender MAC
	ReasonBadPort          Reason = "bad_port"          // in_port is not a physical port (0, LOCAL, CONTROLLER…)
	ReasonNotBackend       Reason = "not_backend"       // sender IP is no configured backend
	ReasonWrongPort        Reason = "wrong_port"        // the backend's switch_port is configured and this is another port
	ReasonWrongMAC         Reason = "wrong_mac"         // the backend's mac is configured and this is another MAC
	ReasonUnsolicited      Reason = "unsolicited"       // no request of ours for this switch and IP is open
	ReasonWrongDestination Reason = "wrong_destination" // addressed to someone other than the address we asked from
	ReasonDisagrees        Reason = "disagrees"         // solicited, but not where the backend is: held for re-confirmation
	ReasonRequest          Reason = "request"           // an ARP request claiming a backend's IP from elsewhere: never learnt from
	ReasonConflict         Reason = "conflict"          // a round got competing answers (reported by Expire)
)

// Reasons is every Reason, for metrics that are created up front.
var Reasons = []Reason{ReasonMalformed, ReasonGratuitous, ReasonBadAddress, ReasonInconsistent, ReasonBadPort,
	ReasonNotBackend, ReasonWrongPort, ReasonWrongMAC, ReasonUnsolicited, ReasonWrongDestination, ReasonDisagrees,
	ReasonRequest, ReasonConflict}

// Verdict is what one frame did.
type Verdict struct {
	// ARP is false for a frame that is neither Ethernet/IPv4 ARP nor an IPv6 neighbour
	// solicitation or advertisement (nothing to count).
	ARP bool
	// Reason is set when the frame was refused; empty for an accepted answer and for ARP
	// requests that say nothing about a backend.
	Reason Reason
	IP     netip.Addr // the ARP sender IP, when decoded
	Loc    Location   // the sender MAC and the in_port
	// Deadline is when the round this answer joined closes (zero when it joined none): the
	// caller should call Expire then, since nothing is learnt before.
	Deadline time.Time
	// Challenge asks the caller to send a fresh request for IP on this switch now: the frame
	// disagreed with the backend's usable location (Ask rate-limits it).
	Challenge bool
}

// ChangeKind is what closing a round did to a backend's location.
type ChangeKind uint8

const (
	ChangeLearned   ChangeKind = iota + 1 // first location, now usable
	ChangeConfirmed                       // an adopted location was confirmed
	ChangeMoved                           // a usable location moved after re-confirmation
	ChangeCandidate                       // one round agreed on a new location; another is needed (re-ask)
	ChangeDropped                         // a tentative location lost to a competing answer; nothing usable
	ChangeConflict                        // competing answers; the usable location is kept
)

var changeNames = [...]string{"", "learned", "confirmed", "moved", "candidate", "dropped", "conflict"}

func (k ChangeKind) String() string {
	if int(k) < len(changeNames) {
		return changeNames[k]
	}
	return "invalid"
}

// Change is one round's outcome worth telling the caller about.
type Change struct {
	DPID uint64
	IP   netip.Addr
	Kind ChangeKind
	From Location // the location before (zero for ChangeLearned)
	To   Location // the location after; for ChangeCandidate and ChangeConflict the competing one
}

// Errors from Ask.
var (
	// ErrOutstanding: a request for this switch and IP is still open (or closed but not yet
	// expired by Expire); one at a time is what rate-limits requests and challenges.
	ErrOutstanding = errors.New("arp: a request for this address is already outstanding")
	// ErrTableFull: LearnerConfig.MaxOutstanding requests are open.
	ErrTableFull = errors.New("arp: outstanding request table is full")
)

// LearnerConfig bounds the learner. Zero fields take the defaults.
type LearnerConfig struct {
	// MaxOutstanding bounds the open requests over all switches; default 4096 (four times the
	// largest service's backend count).
	MaxOutstanding int
	// RequestTTL is how long a request's round stays open for answers; default 1s (a LAN
	// answers in well under a millisecond; the rest is room for a loaded controller).
	RequestTTL time.Duration
	// ConfirmRounds is how many consecutive rounds must agree on a new location, with no
	// answer from the old one, before a usable location moves; default 2, at least 2.
	ConfirmRounds int
	// Refresh is how long a confirmed location goes without a round before Wants asks for one
	// again, so a backend that moved (VM migration, re-cabling, ports renumbered) is found
	// even if nothing it sends reaches the controller; default 30s.
	Refresh time.Duration
}

const (
	DefaultMaxOutstanding = 4096
	DefaultRequestTTL     = time.Second
	DefaultConfirmRounds  = 2
	DefaultRefresh        = 30 * time.Second
)

// Learner decides where backends are from ARP answers to its own requests. It owns the
// outstanding requests and the locations; it does no I/O and takes the time from its caller.
// Safe for concurrent use.
type Learner struct {
	cfg LearnerConfig

	mu     sync.Mutex
	rounds map[lkey]*round
	locs   map[lkey]*entry
}

type lkey struct {
	dpid uint64
	ip   netip.Addr
}

// round is one request of ours and the answers it got. Answers are summarised in constant
// space: whether the current location answered, the first other location, and whether a
// second distinct other one did.
type round struct {
	fromMAC  net.HardwareAddr
	fromIP   netip.Addr
	deadline time.Time

	sawCurrent bool
	other      Location
	haveOther  bool
	manyOthers bool
}

type entry struct {
	loc        Location
	trust      Trust
	cand       Location // a different location one or more rounds agreed on
	candRounds int
	reask      bool      // a round wants a follow-up request (re-confirmation)
	asked      time.Time // when the last request for it was recorded (Refresh counts from here)
}

// NewLearner returns an empty learner.
func NewLearner(cfg LearnerConfig) *Learner {
	if cfg.MaxOutstanding <= 0 {
		cfg.MaxOutstanding = DefaultMaxOutstanding
	}
	if cfg.RequestTTL <= 0 {
		cfg.RequestTTL = DefaultRequestTTL
	}
	if cfg.ConfirmRounds < 2 {
		cfg.ConfirmRounds = DefaultConfirmRounds
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	return &Learner{cfg: cfg, rounds: map[lkey]*round{}, locs: map[lkey]*entry{}}
}

// Config returns the effective configuration (defaults filled in).
func (l *Learner) Config() LearnerConfig { return l.cfg }

// Ask records that the controller is about to send, on switch dpid, a request for target
// from fromMAC/fromIP, and opens its round until now+RequestTTL. Send the request only when
// it returns nil.
func (l *Learner) Ask(dpid uint64, target netip.Addr, fromMAC net.HardwareAddr, fromIP netip.Addr, now time.Time) error {
	k := lkey{dpid, target.Unmap()}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.rounds[k]; open {
		return ErrOutstanding
	}
	if len(l.rounds) >= l.cfg.MaxOutstanding {
		return ErrTableFull
	}
	l.rounds[k] = &round{fromMAC: bytes.Clone(fromMAC), fromIP: fromIP.Unmap(), deadline: now.Add(l.cfg.RequestTTL)}
	if e := l.locs[k]; e != nil {
		e.reask, e.asked = false, now
	}
	return nil
}

// Outstanding is the number of open (or closed but not yet expired) requests.
func (l *Learner) Outstanding() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.rounds)
}

// Usable returns the location forwarding may use for ip on switch dpid.
func (l *Learner) Usable(dpid uint64, ip netip.Addr) (Location, Trust, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.locs[lkey{dpid, ip}]
	if e == nil || !e.trust.Usable() {
		return Location{}, TrustNone, false
	}
	return e.loc, e.trust, true
}

// Wants reports whether a request for ip on switch dpid should be sent now: nothing usable
// is known, the location was only adopted, a re-confirmation round is due, or the location
// was last asked about Refresh ago; and no request is open.
func (l *Learner) Wants(dpid uint64, ip netip.Addr, now time.Time) bool {
	k := lkey{dpid, ip}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.rounds[k]; open {
		return false
	}
	e := l.locs[k]
	return e == nil || e.trust == TrustNone || e.trust == TrustAdopted || e.reask || now.Sub(e.asked) >= l.cfg.Refresh
}

// Adopt takes a location read back from the switch for a backend the learner knows nothing
// about yet (after a restart). It never replaces a known location; see the package
// documentation for the trust it gets.
func (l *Learner) Adopt(dpid uint64, ip netip.Addr, loc Location) bool {
	if !usableMAC(loc.MAC) || loc.Port == 0 || loc.Port > maxPort {
		return false
	}
	k := lkey{dpid, ip}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.locs[k]; e != nil && e.trust != TrustNone {
		return false
	}
	l.locs[k] = &entry{loc: Location{MAC: bytes.Clone(loc.MAC), Port: loc.Port}, trust: TrustAdopted}
	return true
}

// maxPort is OFPP_MAX: ports above it are reserved (IN_PORT, FLOOD, CONTROLLER, LOCAL…).
const maxPort = 0xffffff00

// Observe judges one packet-in frame that arrived on switch dpid, port inPort. pin says
// whether an address is a configured backend and what its configuration fixes. The frame
// is ARP or IPv6 neighbour discovery (the package documentation).
func (l *Learner) Observe(dpid uint64, inPort uint32, frame []byte, pin func(netip.Addr) (Pin, bool), now time.Time) Verdict {
	c, ok, err := decodeClaim(frame)
	if err != nil {
		return Verdict{ARP: true, Reason: ReasonMalformed}
	}
	if !ok {
		return Verdict{}
	}
	sender, target := c.sender, c.target
	v := Verdict{ARP: true, IP: sender, Loc: Location{MAC: c.senderMAC, Port: inPort}}
	refuse := func(r Reason) Verdict { v.Reason = r; return v }
	switch c.op {
	case opRequest:
		return l.observeRequest(dpid, v, target, pin)
	case opReply:
	default:
		return refuse(ReasonMalformed) // ARP opcodes other than request and reply are not ours
	}
	if sender == target || !usableMAC(c.ethDst) || c.unsolicited {
		return refuse(ReasonGratuitous)
	}
	if !usableMAC(v.Loc.MAC) || !sender.IsValid() || sender.IsUnspecified() {
		return refuse(ReasonBadAddress)
	}
	if !bytes.Equal(c.ethSrc, v.Loc.MAC) {
		return refuse(ReasonInconsistent)
	}
	if inPort == 0 || inPort > maxPort {
		return refuse(ReasonBadPort)
	}
	p, isBackend := pin(sender)
	if !isBackend {
		return refuse(ReasonNotBackend)
	}
	if p.Port != 0 && p.Port != inPort {
		return refuse(ReasonWrongPort)
	}
	if p.MAC != nil && !bytes.Equal(p.MAC, v.Loc.MAC) {
		return refuse(ReasonWrongMAC)
	}
	k := lkey{dpid, sender}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.locs[k]
	disagrees := e != nil && e.trust.Usable() && !e.loc.Equal(v.Loc)
	r := l.rounds[k]
	if r == nil || !now.Before(r.deadline) {
		v.Challenge = disagrees
		return refuse(ReasonUnsolicited)
	}
	if target != r.fromIP || !bytes.Equal(c.targetMAC, r.fromMAC) || !bytes.Equal(c.ethDst, r.fromMAC) {
		v.Challenge = disagrees
		return refuse(ReasonWrongDestination)
	}
	v.Deadline = r.deadline
	switch {
	case e == nil || e.trust == TrustNone:
		l.locs[k] = &entry{loc: v.Loc, trust: TrustTentative, asked: now}
		r.sawCurrent = true
		return v
	case e.loc.Equal(v.Loc):
		r.sawCurrent = true
		return v
	}
	switch {
	case !r.haveOther:
		r.other, r.haveOther = v.Loc, true
	case !r.other.Equal(v.Loc):
		r.manyOthers = true
	}
	return refuse(ReasonDisagrees)
}

// claim is what an ARP frame or an IPv6 neighbour discovery message says, in ARP's terms, so
// that one set of rules judges both (the package documentation).
type claim struct {
	op             int // opRequest, opReply, or another ARP opcode
	ethSrc, ethDst net.HardwareAddr
	// sender is whom the frame speaks for: the ARP sender, the NA's target, the NS's source;
	// senderMAC its link-layer address (ARP sender MAC, NA target link-layer option, NS
	// source link-layer option).
	sender    netip.Addr
	senderMAC net.HardwareAddr
	// target is whom it is addressed to: the ARP target, the NA's IPv6 destination, the NS's
	// target; targetMAC the ARP target MAC or, for an NA, its Ethernet destination.
	target    netip.Addr
	targetMAC net.HardwareAddr
	// unsolicited marks an NA without the solicited flag: an announcement.
	unsolicited bool
}

const (
	opRequest = 1
	opReply   = 2
	opOther   = -1
)

// decodeClaim reads an ARP frame or, failing that, an NS or NA. ok is false for anything
// else; err for a malformed frame of either kind.
func decodeClaim(frame []byte) (claim, bool, error) {
	d, isARP, err := decode(frame)
	if err != nil {
		return claim{}, false, err
	}
	if isARP {
		c := claim{op: int(d.arp.Operation), ethSrc: d.eth.SrcMAC, ethDst: d.eth.DstMAC,
			senderMAC: bytes.Clone(d.arp.SourceHwAddress), targetMAC: d.arp.DstHwAddress}
		c.sender, _ = netip.AddrFromSlice(d.arp.SourceProtAddress)
		c.target, _ = netip.AddrFromSlice(d.arp.DstProtAddress)
		if c.op != int(layers.ARPRequest) && c.op != int(layers.ARPReply) {
			c.op = opOther
		}
		return c, true, nil
	}
	m, isND, err := decodeND(frame)
	if err != nil || !isND {
		return claim{}, false, err
	}
	c := claim{ethSrc: m.l2.eth.SrcMAC, ethDst: m.l2.eth.DstMAC, senderMAC: m.lla}
	if m.typ == icmpv6NS {
		c.op, c.sender, c.target = opRequest, m.src, m.target
		if c.senderMAC == nil {
			c.senderMAC = bytes.Clone(m.l2.eth.SrcMAC)
		}
		return c, true, nil
	}
	// An NA without a target link-layer option leaves senderMAC nil: bad_address (our
	// solicitations are multicast, and RFC 4861 §7.2.4 requires the option in answers to them).
	c.op, c.sender, c.target, c.targetMAC = opReply, m.target, m.dst, m.l2.eth.DstMAC
	c.unsolicited = m.flags&naSolicited == 0
	return c, true, nil
}

// observeRequest: requests are never learnt from (anyone may send one with any sender), but
// one claiming a backend's IP from a place other than its location is counted, and a VIP
// request with sender = target is an announcement.
func (l *Learner) observeRequest(dpid uint64, v Verdict, target netip.Addr, pin func(netip.Addr) (Pin, bool)) Verdict {
	if v.IP == target {
		v.Reason = ReasonGratuitous
		return v
	}
	if _, isBackend := pin(v.IP); !isBackend {
		return v
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.locs[lkey{dpid, v.IP}]; e != nil && e.trust != TrustNone && !e.loc.Equal(v.Loc) {
		v.Reason = ReasonRequest
	}
	return v
}

// Expire closes every round whose deadline is not after now and returns what that changed.
func (l *Learner) Expire(now time.Time) []Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Change
	for k, r := range l.rounds {
		if now.Before(r.deadline) {
			continue
		}
		delete(l.rounds, k)
		if c, ok := l.close(k, r); ok {
			out = append(out, c)
		}
	}
	return out
}

// close applies one finished round to its backend's entry (the rules in the package doc).
func (l *Learner) close(k lkey, r *round) (Change, bool) {
	e := l.locs[k]
	if e == nil || e.trust == TrustNone {
		return Change{}, false
	}
	c := Change{DPID: k.dpid, IP: k.ip, From: e.loc}
	resetCand := func() { e.cand, e.candRounds = Location{}, 0 }
	if e.trust == TrustTentative {
		if r.haveOther {
			delete(l.locs, k)
			c.Kind, c.To = ChangeDropped, r.other
			return c, true
		}
		e.trust = TrustConfirmed
		c.Kind, c.From, c.To = ChangeLearned, Location{}, e.loc
		return c, true
	}
	switch {
	case r.haveOther && (r.sawCurrent || r.manyOthers):
		resetCand()
		e.reask = false
		c.Kind, c.To = ChangeConflict, r.other
		return c, true
	case r.sawCurrent:
		resetCand()
		if e.trust == TrustAdopted {
			e.trust = TrustConfirmed
			c.Kind, c.To = ChangeConfirmed, e.loc
			return c, true
		}
		return Change{}, false
	case r.haveOther:
		if e.candRounds > 0 && e.cand.Equal(r.other) {
			e.candRounds++
		} else {
			e.cand, e.candRounds = r.other, 1
		}
		if e.candRounds >= l.cfg.ConfirmRounds {
			e.loc, e.trust = e.cand, TrustConfirmed
			resetCand()
			e.reask = false
			c.Kind, c.To = ChangeMoved, e.loc
			return c, true
		}
		e.reask = true
		c.Kind, c.To = ChangeCandidate, e.cand
		return c, true
	default:
		// Nobody answered: consecutive means consecutive, so a candidate starts over.
		resetCand()
		e.reask = false
		return Change{}, false
	}
}
