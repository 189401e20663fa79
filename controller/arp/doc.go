// Package arp builds and parses the ARP frames the controller needs, and decides where
// backends are. Answering requests for virtual IPs (which live on no host, so only the
// controller can answer) is Reply; locating backends is the Learner. It is pure: frames in,
// frames and decisions out, built with gopacket's layers (never pcap), time given by the
// caller. It must not import the OpenFlow session (controller/ofswitch) nor log; the caller
// moves frames through packet-in and packet-out, logs and counts.
//
// IPv6 services resolve by neighbour discovery instead (nd.go): Reply answers a neighbour
// solicitation for an IPv6 VIP with an advertisement from the VIP's MAC, Request builds a
// solicitation from the VIP for an IPv6 backend, and the Learner reads advertisements by the
// rules below, in ARP's terms: the advertisement's target address and target link-layer
// option are the sender IP and MAC, its IPv6 and Ethernet destinations the target, and an
// advertisement without the solicited flag is gratuitous. Solicitations are requests (never
// learnt from). ND messages that fail RFC 4861's validity checks (hop limit 255, code 0,
// checksum, option lengths) are malformed, counted like malformed ARP.
//
// # Whom the Learner believes
//
// A backend's location (MAC and switch port) decides where its share of the VIP's traffic
// goes, so learning it is a trust decision. ARP has no authentication: any host on the
// segment can send a reply claiming any IP. The Learner therefore believes only answers to
// its own questions, and never lets one answer move a location it already uses:
//
//   - Solicited only. The controller calls Ask before it sends a request, which opens a
//     round for (switch, target IP) for LearnerConfig.RequestTTL (default 1 s). A reply
//     counts only if a round for that switch and its sender IP is open, and it is addressed
//     to the address we asked from (ARP target IP and MAC, and Ethernet destination, equal
//     the request's sender). Replies to nobody's request, gratuitous ARP (sender IP = target
//     IP, or a reply to broadcast), replies from an IP that is not a backend, frames whose
//     Ethernet source differs from the ARP sender, and every ARP request (its sender fields
//     are whatever the sender wrote) teach nothing. Open rounds are bounded
//     (MaxOutstanding, default 4096) and only Ask creates them, so no frame from the network
//     can grow the learner's tables; one round per (switch, IP) at a time is also the rate
//     limit on requests.
//   - Configuration wins. A configured switch_port admits answers on that port only, a
//     configured mac answers with that MAC only.
//   - First location. The first solicited answer for a backend with no location makes it
//     tentative, not usable: when the round closes (Expire), it becomes confirmed only if no
//     other location answered in the same round. With competing answers (a spoofer racing
//     the backend) it is dropped and the backend gets no forwarding until a later round is
//     unanimous: withholding a backend's traffic is recoverable, sending it to an impostor is
//     not.
//   - Moving. A usable location moves only after ConfirmRounds (default 2) consecutive rounds
//     in which every answer named the same new location and none came from the old one. A
//     reply that disagrees with the location (solicited or not) asks the caller for a fresh
//     request (Verdict.Challenge, rate-limited by Ask). Why two rounds and "none from the
//     old": a spoofer can always answer a request, because requests are flooded, but it
//     cannot silence the real backend, which answers every round from where it is; any round
//     where the old location answers too is a conflict and resets the count. A backend that
//     really moved (VM migration, re-cabling) stops answering from the old place, so two
//     quiet-old rounds are what a real move looks like and what a spoofer cannot fake while
//     the backend is up. Two rounds rather than one also rule out a single late or replayed
//     answer, since rounds are at least one RequestTTL apart. A silent round (no answers)
//     breaks the sequence. What remains: when the backend is down, a spoofer answering two
//     rounds wins; pin mac and switch_port in the configuration where that matters.
//   - Refresh. A confirmed location is asked about again when nobody asked for Refresh
//     (default 30 s): a backend that moved sends nothing the controller sees (its
//     gratuitous ARP is not for the VIP), so without this it would never be found; the
//     refresh rounds are ordinary rounds, so a move still needs two of them.
//   - Adopted locations. After a restart the controller reads its own forwarding flows back
//     from the switch and adopts their MACs and ports (Adopt), so traffic keeps flowing
//     before ARP answers. They are the controller's own earlier writes (only a party that can
//     already program the switch could have forged them), so they are usable at once; but they
//     may be stale (the backend may have moved while the controller was down), so they are
//     re-checked with a request immediately (Wants). Moving away from an adopted location
//     takes the same two-round re-confirmation as a confirmed one, so a restart is no window
//     in which one spoofed reply wins; an answering round only upgrades it to confirmed.
package arp
