// Package ofswitch owns the OpenFlow 1.3 sessions with switches: the listener, HELLO and
// FEATURES, echo keepalives, transaction ids, applying planned messages confirmed by a
// Barrier reply, reading back group and flow state, delivering packet-ins, and asking for and
// tracking the session's controller role.
//
// It must not decide what to install (that is controller/dataplane) nor parse probe reports.
// The bytes are controller/ofwire's: this package frames, reads and routes messages through
// that codec and keeps only the session's own rules about them (which bodies to read, how
// much of each, who waits for a reply); PacketIn, RoleReply, RoleName and ErrMalformed are the
// codec's, kept here under the names the session's callers use.
//
// # A peer is not trusted to be a switch
//
// Anyone who can reach the OpenFlow port can claim to be a switch, so everything a peer can
// make the session hold is bounded, and every refusal is counted by Fault (Stats.Faults, a
// fixed set) and logged at most once per 10 s per fault and source address and per fault and
// datapath id. The limits live on the Server (peerlog.go), not in the session, so a peer
// reconnecting in a loop cannot reset them; the switch's description and other per-session
// lines are limited the same way, and a bounded table of scopes keeps the memory fixed:
//
//   - Writes: one writer goroutine per session drains a queue bounded in messages and bytes
//     (Config.WriteQueueMessages, WriteQueueBytes). Our own requests wait for room; replies
//     the peer provokes (ECHO_REPLY) have a quarter of each on top and never wait, and a peer
//     that owes us more than that without reading is closed with ErrPeerNotReading, as is one
//     that does not take a write within Config.WriteTimeout (set before each write).
//   - Reads: the header comes first; a body nobody waits for (unsolicited replies, message
//     types the session does not use, packet-ins over Config.MaxPacketInBytes) is skipped in
//     the read buffer without being allocated, and an OFPT_ERROR keeps 1 KiB of its data.
//   - Replies: each request takes only the replies it asked for, once per xid; a multipart
//     reply is bounded by a Limit (per call, default Config.MaxMultipartBytes and
//     MaxMultipartParts) and one over it, or of another type than asked, fails that request
//     alone (ErrReplyTooLarge, ErrMalformed) while the rest of it is discarded.
//   - Connections: Config.MaxHandshakes bounds connections still in HELLO/FEATURES, and
//     more are closed at accept. When the table is full, a source under its share
//     (Config.MaxHandshakesPerSource; an IPv6 /64 counts as one source) takes the slot of
//     the oldest handshake of a source over it, so one host cannot hold every slot while one
//     host's many bridges still connect at once; when no source is over its share, a newcomer
//     takes the slot of the oldest handshake idle past 250 ms. Config.MaxSwitches bounds the
//     connected datapath ids.
//
// # Controller roles
//
// For high availability several controllers connect to every switch, and the switch fences
// them (OpenFlow 1.3.5 §6.3.5): RequestRole asks for MASTER or SLAVE with a generation_id;
// the switch refuses a generation older than the newest it has seen (IsStale) and every write
// from a SLAVE (IsSlave, on Apply's errors). Role is what the switch last confirmed for this
// session, EQUAL until it says otherwise, and RoleChanged wakes a watcher when that changes,
// also when the switch demotes us on its own: Open vSwitch then sends OpenFlow 1.4's role
// status, to 1.3 controllers as the ONF extension ONFT_ROLE_STATUS (OFPT_EXPERIMENTER,
// experimenter 0x4F4E4600, exp_type 1911), which the reader takes like any reply, bounded and
// never as a fault. Which role to ask for is the caller's decision (docs/design.md,
// "Controller roles").
//
// # Who owns a datapath id
//
// The established session wins unless it is dead. When a second connection claims a
// connected datapath id, the existing session is probed: if nothing was received from it for
// Config.EchoTimeout it is dead; otherwise it is sent an ECHO_REQUEST, ahead of whatever of
// ours is queued for it, and if that is answered, or anything else is read from it, within
// Config.ProbeTimeout the newcomer is refused (ErrDuplicateDatapath, counted, logged
// rate-limited) and closed. Dead means silent, never busy: a full write queue is a switch
// still reading what we sent. If nothing arrives, the old session is closed (ErrReplaced)
// and the newcomer takes over. Only one claim per id is probed at a time; others meanwhile
// are refused.
//
// With TLS client certificates, the id is also bound to a certificate. By default the first
// session of an id pins the identity of its certificate (subject and issuer names, which a
// renewal by the same CA keeps, or the SHA-256 of the public key when the subject is empty),
// and a later claim of that id with another identity is refused (ErrIdentityMismatch) even
// when the old session is dead. These bindings are bounded so that no certificate can keep
// another from connecting (bindings.go): at most Config.MaxBindingsPerCertificate per
// certificate (its next new id replaces its own oldest binding that is not connected), at most
// 4×MaxSwitches in all, and in a full table a binding whose switch has been away for
// Config.BindingIdleTimeout lapses. Stronger, keeping no binding at all, and surviving
// restarts, is Config.CertNamesDatapath: the certificate must then name the id it claims, its
// subject CN being the datapath id as 16 hex digits ("0000feedface0001", as ovs-ofctl show
// prints after "dpid:", with or without that prefix) or one of its DNS SANs being those 16
// digits. Open vSwitch presents one certificate (ovs-vsctl set-ssl) for all bridges of a
// host, so a host with several bridges needs each bridge's id as a DNS SAN. Operators issue
// such a certificate per switch host from their switch CA, e.g.
// `openssl req -new -subj /CN=$(ovs-vsctl get bridge br0 datapath_id | tr -d '"') ...`,
// and should fix the bridge's id (ovs-vsctl set bridge br0 other-config:datapath-id=...) so it
// does not change with the bridge's MAC.
package ofswitch
