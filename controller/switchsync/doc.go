// Package switchsync keeps one switch in step with the controller's intent. A Syncer per
// connected switch owns everything about that switch: its session, what it is believed to
// hold (read back at connect, after a failed rewrite and every read-back period), drift
// repair, its flow counters and the slot table it lays groups out for. It plans from the
// latest intent it was offered and skips the ones it missed, so a slow or dead switch delays
// only itself: the balancer never waits on a syncer, and a syncer never takes the balancer's
// lock.
//
// A syncer's goroutine (Run) is the only one that writes to its switch: syncs, role requests,
// the renewals of leased flows (lease.go: reactive dispatch's flow to the controller, which
// must lapse when no controller leads), and the switch's ARP/ND traffic (arp.go). After each
// intent it asks for the backends placed on the switch that the learner wants located; a packet-in handed to it (PacketIn, from the
// session's packet-in goroutine) is planned there (the reply for a VIP placed on the switch,
// the frame to the learner, a challenge) and sent from Run between syncs. Neighbours
// (neighbours.go) is where backends are on every switch, shared by the syncers: the ARP
// learner, which has its own lock, the ARP counters and the timer closing the learner's
// rounds. A read-back's backend locations are adopted into it.
//
// What a syncer learns that the balancer needs (seeds for a restarted controller's weights,
// throughput counters, the planned layout for the views) it publishes as an immutable Status;
// the balancer reads it at its next update. Status.Measured is what its groups' bucket
// counters measured (measuring.go reads them, measure.go is the pure computation). All it tells the balancer directly goes through
// Upward: Kick (update soon) and Event (for the operator); it never reads the balancer's
// state.
//
// The planning itself is pure (plan.go: Desired, Hold, Seeds, Rates) and tested without a
// switch. This package must not import controller/balancer.
package switchsync
