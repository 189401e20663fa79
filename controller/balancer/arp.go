package balancer

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strconv"

	"flowweight/controller/arp"
	"flowweight/controller/ofswitch"

	"github.com/netrack/openflow/ofp"
)

// PacketIn implements ofswitch.Handler: answer ARP for the VIPs, learn backends' MACs and
// ports from the ARP traffic that reaches us (replies to our requests, or their own requests
// for a VIP).
func (b *Balancer) PacketIn(sw *ofswitch.Switch, pi ofswitch.PacketIn) {
	vips := b.vipTable()
	if reply, ok, err := arp.Reply(pi.Data, func(ip netip.Addr) (net.HardwareAddr, bool) { m, ok := vips[ip]; return m, ok }); err != nil {
		b.metrics.arpFault(arpInvalidFrame)
		b.plog.Debug(arpInvalidFrame, "packet-in is not a valid ARP frame", "dpid", sw.String(), "in_port", pi.InPort, "err", err)
		return
	} else if ok {
		ctx, cancel := context.WithTimeout(b.context(), b.Config().Controller.BarrierTimeout)
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
	// An ARP reply from a configured backend (to our request from the VIP) says where it is.
	if ip, mac, ok := arp.ParseReply(pi.Data); ok {
		b.learn(sw, ip, mac, pi.InPort)
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

func (b *Balancer) vipTable() map[netip.Addr]net.HardwareAddr {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := make(map[netip.Addr]net.HardwareAddr, len(b.services))
	for _, s := range b.services {
		m[s.cfg.ParsedVIP()] = vipMAC(&s.cfg)
	}
	return m
}

func (b *Balancer) learn(sw *ofswitch.Switch, ip netip.Addr, mac net.HardwareAddr, port uint32) {
	if port == 0 || port > uint32(ofp.PortMax) {
		return
	}
	b.mu.Lock()
	known := false
	for _, s := range b.services {
		for _, be := range s.cfg.Backends {
			if be.ParsedIP() == ip {
				known = true
			}
		}
	}
	k := hostKey{sw.DatapathID(), ip}
	old, had := b.learned[k]
	changed := known && (!had || old.port != port || old.mac.String() != mac.String())
	if known {
		b.learned[k] = host{mac: append(net.HardwareAddr(nil), mac...), port: port, seen: b.now()}
	}
	b.mu.Unlock()
	if changed {
		// Keyed by backend (a configured, bounded set): a peer flapping one backend's port
		// cannot flood the log, and backends located together are each logged.
		b.plog.Log(slog.LevelInfo, "located "+ip.String(), "backend located", "dpid", sw.String(), "ip", ip.String(), "mac", mac.String(), "port", port)
		b.events.add(Event{Time: b.now(), Kind: "arp", Text: "learned " + ip.String() + " at " + mac.String() + " on port " + strconv.FormatUint(uint64(port), 10)})
		b.Kick()
	}
}

// resolveBackends sends an ARP request, from the service's VIP, for every backend whose MAC or
// port a switch does not know yet. The reply comes back to the VIP MAC and reaches us through
// the VIP's ARP flow.
func (b *Balancer) resolveBackends(ctx context.Context, switches []*switchState) {
	for _, st := range switches {
		type want struct {
			src   netip.Addr
			mac   net.HardwareAddr
			ip    netip.Addr
			known bool
		}
		var todo []want
		b.mu.Lock()
		for _, s := range b.services {
			for _, be := range s.cfg.Backends {
				if be.ParsedMAC() != nil && be.SwitchPort != 0 {
					continue
				}
				if _, ok := b.learned[hostKey{st.sw.DatapathID(), be.ParsedIP()}]; ok {
					continue
				}
				todo = append(todo, want{src: s.cfg.ParsedVIP(), mac: vipMAC(&s.cfg), ip: be.ParsedIP()})
			}
		}
		b.mu.Unlock()
		for _, w := range todo {
			frame, err := arp.Request(w.mac, w.src, w.ip)
			if err != nil {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, b.Config().Controller.BarrierTimeout)
			err = st.sw.PacketOut(cctx, uint32(ofp.PortController), ofp.Actions{&ofp.ActionOutput{Port: ofp.PortFlood, MaxLen: ofp.ContentLenNoBuffer}}, frame)
			cancel()
			if err != nil {
				b.metrics.arpFault(arpRequestNotSent)
				b.plog.Debug(arpRequestNotSent, "ARP request not sent", "dpid", st.sw.String(), "target", w.ip.String(), "err", err)
			}
		}
	}
}
