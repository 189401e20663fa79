// Package switchsync keeps one switch in step with the controller's intent. A Syncer per
// connected switch owns everything about that switch: its session, what it is believed to
// hold (read back at connect, after a failed rewrite and every read-back period), drift
// repair, its flow counters and the slot table it lays groups out for. It plans from the
// latest intent it was offered and skips the ones it missed, so a slow or dead switch delays
// only itself: the balancer never waits on a syncer, and a syncer never takes the balancer's
// lock.
//
// What a syncer learns that the balancer needs (seeds for a restarted controller's weights,
// throughput counters, the planned layout for the views) it publishes as an immutable Status;
// the balancer reads it at its next update. Backend locations go to the ARP learner through
// Config.Locate and Config.Adopt, which has its own lock.
//
// The planning itself is pure (plan.go: Desired, Hold, Seeds, Rates) and tested without a
// switch. This package must not import controller/balancer.
package switchsync
