package switchsync

import (
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"flowweight/controller/arp"
	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/controller/ratelog"

	"github.com/prometheus/client_golang/prometheus"
)

// Neighbours is where backends are on every switch, shared by all the syncers: the ARP
// learner (controller/arp.Learner, which has its own lock), the counters of the ARP/ND
// traffic, and the timer that closes the learner's rounds. It sends nothing: each syncer
// plans from it and sends its switch's requests and replies itself (arp.go), so the syncer
// stays the only writer to its switch. Safe for concurrent use.
type Neighbours struct {
	learner *arp.Learner
	log     *slog.Logger
	plog    *ratelog.Limiter
	now     func() time.Time
	m       ARPMetrics
	up      Upward

	mu     sync.Mutex
	expiry time.Time // when the pending round-closing timer fires (zero: none)
}

// ARPMetrics are the ARP/ND counters (shared by every switch); nil fields count nothing.
type ARPMetrics struct {
	Replies, Requests, RequestsDropped prometheus.Counter
	// Refused counts frames that taught nothing, by arp.Reason; Changes the closed rounds'
	// outcomes, by arp.ChangeKind; Faults the packet-outs not sent (ARPReplyNotSent,
	// ARPRequestNotSent).
	Refused, Changes, Faults *prometheus.CounterVec
}

// ARP fault reasons (ARPMetrics.Faults' label values).
const (
	ARPReplyNotSent   = "reply_not_sent"
	ARPRequestNotSent = "request_not_sent"
)

// NeighboursConfig is what a Neighbours is given. Zero fields take defaults.
type NeighboursConfig struct {
	Learner *arp.Learner // default arp.NewLearner(arp.LearnerConfig{})
	Logger  *slog.Logger
	// Limited logs the per-packet lines, at most one per reason per ratelog.Every; default one
	// over Logger.
	Limited *ratelog.Limiter
	Now     func() time.Time
	Metrics ARPMetrics
	// Up hears of located backends (Kick: replan) and records their changes (Event "arp").
	Up Upward
}

// NewNeighbours returns an empty table of locations.
func NewNeighbours(cfg NeighboursConfig) *Neighbours {
	n := &Neighbours{learner: cfg.Learner, log: cfg.Logger, plog: cfg.Limited, now: cfg.Now, m: cfg.Metrics, up: cfg.Up}
	if n.learner == nil {
		n.learner = arp.NewLearner(arp.LearnerConfig{})
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.now == nil {
		n.now = time.Now
	}
	if n.plog == nil {
		n.plog = ratelog.New(n.log, n.now)
	}
	if n.up == nil {
		n.up = nopUp{}
	}
	return n
}

// Learner is the learner underneath, for tests and for adopting locations by hand.
func (n *Neighbours) Learner() *arp.Learner { return n.learner }

// Locator is the learner's view of one switch, for planning.
func (n *Neighbours) Locator(dpid uint64) Locator {
	return func(ip netip.Addr) (dataplane.Location, bool) {
		loc, _, ok := n.learner.Usable(dpid, ip)
		return dataplane.Location{MAC: loc.MAC, Port: loc.Port}, ok
	}
}

// Wanted plans one switch's requests: each backend placed on dpid, not pinned by the config,
// that the learner wants asked about (not located, only adopted, being re-confirmed, or not
// asked about for LearnerConfig.Refresh). Pure but for the learner's state; nothing is sent.
func (n *Neighbours) Wanted(in *intent.Intent, dpid uint64) []intent.ARPTarget {
	now := n.now()
	var out []intent.ARPTarget
	for _, t := range in.ARP(dpid) {
		if !t.Pinned() && n.learner.Wants(dpid, t.IP, now) {
			out = append(out, t)
		}
	}
	return out
}

// Observe hands one frame a switch sent to the controller to the learner, which believes only
// answers to our own requests (controller/arp's package doc). It counts and logs a refusal,
// schedules the closing of the round the frame joined, and returns the verdict: Challenge
// asks the caller to send a fresh request.
func (n *Neighbours) Observe(dpid uint64, inPort uint32, frame []byte, in *intent.Intent) arp.Verdict {
	pin := func(ip netip.Addr) (arp.Pin, bool) {
		t, ok := in.Target(ip)
		return arp.Pin{MAC: t.MAC, Port: t.Port}, ok
	}
	now := n.now()
	v := n.learner.Observe(dpid, inPort, frame, pin, now)
	if v.Reason != "" {
		n.refused(fmt.Sprintf("%016x", dpid), v.Reason, v.IP, v.Loc)
	}
	if !v.Deadline.IsZero() {
		n.schedule(v.Deadline)
	}
	return v
}

// Adopt records a location a switch's read-back showed (our own earlier write), usable until
// ARP answers.
func (n *Neighbours) Adopt(dpid uint64, ip netip.Addr, loc dataplane.Location) {
	n.learner.Adopt(dpid, ip, arp.Location{MAC: loc.MAC, Port: loc.Port})
}

// schedule closes the rounds due at deadline soon after it, so a backend is located one
// RequestTTL after it answers rather than at the next update. A timer already due at or
// after deadline covers it (all deadlines are one TTL after their request), so answers
// flooding into open rounds cannot pile up timers.
func (n *Neighbours) schedule(deadline time.Time) {
	n.mu.Lock()
	if !n.expiry.IsZero() && !n.expiry.Before(deadline) {
		n.mu.Unlock()
		return
	}
	n.expiry = deadline
	n.mu.Unlock()
	time.AfterFunc(deadline.Sub(n.now())+10*time.Millisecond, func() {
		n.mu.Lock()
		if n.expiry.Equal(deadline) {
			n.expiry = time.Time{}
		}
		n.mu.Unlock()
		n.Expire()
	})
}

// Expire applies the learner's closed rounds: log, count, record, and ask for a replan when a
// location forwarding uses changed or a follow-up request is due. The update loop calls it
// too, each update.
func (n *Neighbours) Expire() {
	now := n.now()
	kick := false
	for _, c := range n.learner.Expire(now) {
		if n.m.Changes != nil {
			n.m.Changes.WithLabelValues(c.Kind.String()).Inc()
		}
		dpid := fmt.Sprintf("%016x", c.DPID)
		switch c.Kind {
		case arp.ChangeLearned, arp.ChangeMoved:
			kick = true
			n.log.Info("backend located", "dpid", dpid, "ip", c.IP.String(), "change", c.Kind.String(),
				"mac", c.To.MAC.String(), "port", c.To.Port, "from_mac", c.From.MAC.String(), "from_port", c.From.Port)
			n.up.Event("arp", "", fmt.Sprintf("%s %s at %s on port %d", c.Kind, c.IP, c.To.MAC, c.To.Port))
		case arp.ChangeConfirmed:
			n.log.Info("adopted backend location confirmed", "dpid", dpid, "ip", c.IP.String(), "mac", c.To.MAC.String(), "port", c.To.Port)
		case arp.ChangeCandidate:
			kick = true // the next update sends the re-confirmation request
			n.log.Warn("backend answers from a new location; re-confirming before moving", "dpid", dpid, "ip", c.IP.String(),
				"mac", c.To.MAC.String(), "port", c.To.Port, "current_mac", c.From.MAC.String(), "current_port", c.From.Port)
			n.up.Event("arp", "", fmt.Sprintf("%s answers from %s on port %d (at %s on port %d): re-confirming", c.IP, c.To.MAC, c.To.Port, c.From.MAC, c.From.Port))
		case arp.ChangeDropped, arp.ChangeConflict:
			n.refused(dpid, arp.ReasonConflict, c.IP, c.To)
			n.up.Event("arp", "", fmt.Sprintf("%s: competing ARP answers (%s on port %d and %s on port %d); %s",
				c.IP, c.From.MAC, c.From.Port, c.To.MAC, c.To.Port, map[bool]string{true: "not located", false: "location kept"}[c.Kind == arp.ChangeDropped]))
		}
	}
	if kick {
		n.up.Kick()
	}
}

// refused counts a refused frame and logs it, one line per reason per ratelog.Every.
func (n *Neighbours) refused(dpid string, r arp.Reason, ip netip.Addr, loc arp.Location) {
	if n.m.Refused != nil {
		n.m.Refused.WithLabelValues(string(r)).Inc()
	}
	n.plog.Warn("arp:"+string(r), "ARP frame not learnt from", "reason", string(r), "dpid", dpid, "ip", ip.String(),
		"mac", loc.MAC.String(), "in_port", loc.Port)
}

func (n *Neighbours) fault(reason string) {
	if n.m.Faults != nil {
		n.m.Faults.WithLabelValues(reason).Inc()
	}
}
