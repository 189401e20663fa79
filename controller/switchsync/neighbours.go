package balancer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"flowweight/controller/arp"
	"flowweight/controller/intent"
	"flowweight/controller/ofswitch"

	"github.com/netrack/openflow/ofp"
)

// PacketIn implements ofswitch.Handler: answer ARP for the VIPs placed on this switch, and
// hand every ARP frame to the learner, which believes only answers to our own requests
// (controller/arp's package doc). It reads the latest intent, not the balancer's state.
func (b *Balancer) PacketIn(sw *ofswitch.Switch, pi ofswitch.PacketIn) {
	if !b.writes() {
		// A standby answers nothing (the leader does) and asks nothing, so there is nothing
		// for its learner to believe either. A SLAVE gets no packet-ins; this covers the
		// moments before the switch confirmed the role.
		return
	}
	in := b.current()
	dpid := sw.DatapathID()
	if reply, ok, err := arp.Reply(pi.Data, func(ip netip.Addr) (net.HardwareAddr, bool) { return in.VIPMAC(dpid, ip) }); err == nil && ok {
		ctx, cancel := context.WithTimeout(b.context(), in.BarrierTimeout)
		// Out of the requester's port. (output:IN_PORT with in_port CONTROLLER would send the
		// reply back to the controller and the VIP would never resolve.)
		err := sw.PacketOut(ctx, uint32(ofp.PortController), ofp.Actions{&ofp.ActionOutput{Port: ofp.PortNo(pi.InPort), MaxLen: ofp.ContentLenNoBuffer}}, reply)
		cancel()
		if err != nil {
			b.metrics.arpFault(arpReplyNotSent)
			b.plog.Warn(arpReplyNotSent, "ARP reply not sent", "dpid", sw.String(), "err", err)
		}
		b.metrics.arpReplies.Inc()
	}
	pin := func(ip netip.Addr) (arp.Pin, bool) {
		t, ok := in.Target(ip)
		return arp.Pin{MAC: t.MAC, Port: t.Port}, ok
	}
	now := b.now()
	v := b.arpl.Observe(dpid, pi.InPort, pi.Data, pin, now)
	if v.Reason != "" {
		b.refusedARP(sw.String(), v.Reason, v.IP, v.Loc, now)
	}
	if !v.Deadline.IsZero() {
		b.scheduleARPExpiry(v.Deadline)
	}
	if v.Challenge {
		if t, ok := in.Target(v.IP); ok {
			b.askARP(b.context(), sw, t, in.BarrierTimeout)
		}
	}
}

func (b *Balancer) context() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return context.Background()
	}
	return b.ctx
}

// askARP opens a round with the learner and floods one request for ip from the VIP. The
// learner allows one open round per switch and IP: that is the rate limit on challenges.
func (b *Balancer) askARP(ctx context.Context, sw *ofswitch.Switch, t intent.ARPTarget, timeout time.Duration) {
	ip := t.IP
	frame, err := arp.Request(t.VIPMAC, t.VIP, ip)
	if err != nil {
		b.log.Warn("ARP request not built", "dpid", sw.String(), "target", ip.String(), "err", err)
		return
	}
	switch err := b.arpl.Ask(sw.DatapathID(), ip, t.VIPMAC, t.VIP, b.now()); {
	case errors.Is(err, arp.ErrOutstanding):
		return
	case err != nil:
		b.metrics.arpRequestsDropped.Inc()
		b.plog.Warn("arp:request:table_full", "ARP request not sent", "dpid", sw.String(), "target", ip.String(), "err", err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	err = sw.PacketOut(cctx, uint32(ofp.PortController), ofp.Actions{&ofp.ActionOutput{Port: ofp.PortFlood, MaxLen: ofp.ContentLenNoBuffer}}, frame)
	cancel()
	if err != nil {
		b.metrics.arpFault(arpRequestNotSent)
		b.plog.Debug(arpRequestNotSent, "ARP request not sent", "dpid", sw.String(), "target", ip.String(), "err", err)
		return
	}
	b.metrics.arpRequests.Inc()
}

// resolveBackends asks, on one switch, for each backend placed there that the learner wants a
// request for: not located, only adopted, being re-confirmed, or not asked about for
// LearnerConfig.Refresh. Its syncer runs it after each intent, so a switch that does not
// read delays only its own requests. (The update closes finished rounds: expireARP.)
func (b *Balancer) resolveBackends(ctx context.Context, sw *ofswitch.Switch, in *intent.Intent) {
	if !b.writes() {
		return // a packet-out from a standby is a write the switch refuses
	}
	now := b.now()
	dpid := sw.DatapathID()
	for _, t := range in.ARP(dpid) {
		if t.Pinned() || !b.arpl.Wants(dpid, t.IP, now) {
			continue
		}
		b.askARP(ctx, sw, t, in.BarrierTimeout)
	}
}

// scheduleARPExpiry closes the rounds due at deadline soon after it, so a backend is located
// one RequestTTL after it answers rather than at the next update. A timer already due at or
// after deadline covers it (all deadlines are one TTL after their request), so answers
// flooding into open rounds cannot pile up timers.
func (b *Balancer) scheduleARPExpiry(deadline time.Time) {
	b.mu.Lock()
	if !b.arpExpiry.IsZero() && !b.arpExpiry.Before(deadline) {
		b.mu.Unlock()
		return
	}
	b.arpExpiry = deadline
	b.mu.Unlock()
	time.AfterFunc(deadline.Sub(b.now())+10*time.Millisecond, func() {
		b.mu.Lock()
		if b.arpExpiry.Equal(deadline) {
			b.arpExpiry = time.Time{}
		}
		b.mu.Unlock()
		b.expireARP()
	})
}

// expireARP applies the learner's closed rounds: log, count, record, and replan when a
// location forwarding uses changed or a follow-up request is due.
func (b *Balancer) expireARP() {
	now := b.now()
	kick := false
	for _, c := range b.arpl.Expire(now) {
		b.metrics.arpChanges.WithLabelValues(c.Kind.String()).Inc()
		dpid := fmt.Sprintf("%016x", c.DPID)
		switch c.Kind {
		case arp.ChangeLearned, arp.ChangeMoved:
			kick = true
			b.log.Info("backend located", "dpid", dpid, "ip", c.IP.String(), "change", c.Kind.String(),
				"mac", c.To.MAC.String(), "port", c.To.Port, "from_mac", c.From.MAC.String(), "from_port", c.From.Port)
			b.events.addPeer(Event{Time: now, Kind: "arp", Text: fmt.Sprintf("%s %s at %s on port %d", c.Kind, c.IP, c.To.MAC, c.To.Port)})
		case arp.ChangeConfirmed:
			b.log.Info("adopted backend location confirmed", "dpid", dpid, "ip", c.IP.String(), "mac", c.To.MAC.String(), "port", c.To.Port)
		case arp.ChangeCandidate:
			kick = true // the next update sends the re-confirmation request
			b.log.Warn("backend answers from a new location; re-confirming before moving", "dpid", dpid, "ip", c.IP.String(),
				"mac", c.To.MAC.String(), "port", c.To.Port, "current_mac", c.From.MAC.String(), "current_port", c.From.Port)
			b.events.addPeer(Event{Time: now, Kind: "arp", Text: fmt.Sprintf("%s answers from %s on port %d (at %s on port %d): re-confirming", c.IP, c.To.MAC, c.To.Port, c.From.MAC, c.From.Port)})
		case arp.ChangeDropped, arp.ChangeConflict:
			b.refusedARP(dpid, arp.ReasonConflict, c.IP, c.To, now)
			b.events.addPeer(Event{Time: now, Kind: "arp", Text: fmt.Sprintf("%s: competing ARP answers (%s on port %d and %s on port %d); %s",
				c.IP, c.From.MAC, c.From.Port, c.To.MAC, c.To.Port, map[bool]string{true: "not located", false: "location kept"}[c.Kind == arp.ChangeDropped])})
		}
	}
	if kick {
		b.Kick()
	}
}

// refusedARP counts a refused frame and logs it, one line per reason per ratelog.Every.
func (b *Balancer) refusedARP(dpid string, r arp.Reason, ip netip.Addr, loc arp.Location, now time.Time) {
	b.metrics.arpRefused.WithLabelValues(string(r)).Inc()
	b.plog.Warn("arp:"+string(r), "ARP frame not learnt from", "reason", string(r), "dpid", dpid, "ip", ip.String(),
		"mac", loc.MAC.String(), "in_port", loc.Port)
}
