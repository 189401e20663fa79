package switchsync

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"flowweight/controller/arp"
	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/controller/ofswitch"

	"github.com/netrack/openflow/ofp"
)

// The ARP/ND traffic of one switch, sent by its syncer's goroutine like every other write to
// it: the replies for the VIPs placed there and the requests that locate its backends. What
// to send is planned from the intent and Neighbours (arp.Reply, Neighbours.Wanted,
// Neighbours.Observe); this file only sends it.

// PacketIn plans the answer to a frame the switch sent to the controller, on the caller's
// goroutine (the session's packet-in goroutine): a reply when it asks for a VIP placed on
// the switch, the frame to the learner (counted and logged at once), and a challenge when the
// learner asks for one. What is to be sent goes to the syncer's goroutine, which sends it
// between syncs; PacketIn waits until the syncer takes it (the session's bounded packet-in
// queue counts what a busy syncer makes it drop) or the session ends.
func (s *Syncer) PacketIn(pi ofswitch.PacketIn) {
	if _, _, kind, ours := dataplane.ParseCookie(pi.Cookie); ours && kind == dataplane.KindDispatch {
		s.dispatchConn(pi)
		return
	}
	nb := s.cfg.Neighbours
	in := s.latest.Load()
	if nb == nil || in == nil || !s.mayAsk() {
		return
	}
	dpid := s.cfg.Conn.DatapathID()
	var out []frameOut
	if reply, ok, err := arp.Reply(pi.Data, func(ip netip.Addr) (net.HardwareAddr, bool) { return in.VIPMAC(dpid, ip) }); err == nil && ok {
		out = append(out, frameOut{reply: reply, port: pi.InPort, timeout: in.BarrierTimeout})
	}
	if v := nb.Observe(dpid, pi.InPort, pi.Data, in); v.Challenge {
		if t, ok := in.Target(v.IP); ok {
			out = append(out, frameOut{ask: t, timeout: in.BarrierTimeout})
		}
	}
	for _, o := range out {
		select {
		case s.out <- o:
		case <-s.cfg.Conn.Done():
			return
		case <-s.stopped:
			return
		}
	}
}

// frameOut is one ARP/ND packet-out for Run's goroutine to send: a reply out of a port, or a
// request for a backend (ask; the learner opens its round first).
type frameOut struct {
	reply   []byte
	port    uint32
	ask     intent.ARPTarget
	timeout time.Duration
}

// mayAsk reports whether this controller sends ARP/ND at all: a standby answers nothing (the
// leader does) and asks nothing, so there is nothing for its learner to believe either. A
// SLAVE gets no packet-ins; this covers the moments before the switch confirmed the role.
func (s *Syncer) mayAsk() bool {
	if s.cfg.Lead == nil {
		return true
	}
	_, ok := s.cfg.Lead.Leading()
	return ok
}

// send sends one planned packet-out.
func (s *Syncer) send(ctx context.Context, o frameOut) {
	if o.reply == nil {
		s.ask(ctx, o.ask, o.timeout)
		return
	}
	nb, sw := s.cfg.Neighbours, s.cfg.Conn
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	// Out of the requester's port. (output:IN_PORT with in_port CONTROLLER would send the
	// reply back to the controller and the VIP would never resolve.)
	err := sw.PacketOut(cctx, uint32(ofp.PortController), ofp.Actions{&ofp.ActionOutput{Port: ofp.PortNo(o.port), MaxLen: ofp.ContentLenNoBuffer}}, o.reply)
	cancel()
	if err != nil {
		nb.fault(ARPReplyNotSent)
		nb.plog.Warn(ARPReplyNotSent, "ARP reply not sent", "dpid", sw.String(), "err", err)
	}
	inc(nb.m.Replies)
}

// resolve asks, on this switch, for each backend placed here that the learner wants a
// request for (Neighbours.Wanted). Run calls it after each intent, so a switch that does not
// read delays only its own requests. (The update closes finished rounds: Neighbours.Expire.)
func (s *Syncer) resolve(ctx context.Context, in *intent.Intent) {
	if s.cfg.Neighbours == nil || !s.mayAsk() {
		return // a packet-out from a standby is a write the switch refuses
	}
	for _, t := range s.cfg.Neighbours.Wanted(in, s.cfg.Conn.DatapathID()) {
		s.ask(ctx, t, in.BarrierTimeout)
	}
}

// ask opens a round with the learner and floods one request for t from the VIP. The learner
// allows one open round per switch and IP: that is the rate limit on challenges.
func (s *Syncer) ask(ctx context.Context, t intent.ARPTarget, timeout time.Duration) {
	nb, sw := s.cfg.Neighbours, s.cfg.Conn
	ip := t.IP
	frame, err := arp.Request(t.VIPMAC, t.VIP, ip)
	if err != nil {
		nb.log.Warn("ARP request not built", "dpid", sw.String(), "target", ip.String(), "err", err)
		return
	}
	switch err := nb.learner.Ask(sw.DatapathID(), ip, t.VIPMAC, t.VIP, nb.now()); {
	case errors.Is(err, arp.ErrOutstanding):
		return
	case err != nil:
		inc(nb.m.RequestsDropped)
		nb.plog.Warn("arp:request:table_full", "ARP request not sent", "dpid", sw.String(), "target", ip.String(), "err", err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	err = sw.PacketOut(cctx, uint32(ofp.PortController), ofp.Actions{&ofp.ActionOutput{Port: ofp.PortFlood, MaxLen: ofp.ContentLenNoBuffer}}, frame)
	cancel()
	if err != nil {
		nb.fault(ARPRequestNotSent)
		nb.plog.Debug(ARPRequestNotSent, "ARP request not sent", "dpid", sw.String(), "target", ip.String(), "err", err)
		return
	}
	inc(nb.m.Requests)
}
