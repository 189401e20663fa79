// Package ha elects one active controller among several through etcd and
// keeps the state that must not fork between them (drained backends, the
// leader's state document) in etcd.
//
// Every controller connects to every switch; only the leader asks the
// switches for the OpenFlow MASTER role, with the election's term as the
// generation_id, and writes. The term is the create revision of the leader's
// election key, so it strictly increases from one leader to the next and a
// switch refuses a deposed leader's role request and writes. The package is
// standalone: it imports nothing of the controller.
//
// Election. A session is an etcd lease of Config.LeaseTTL (etcd may grant
// more: its minimum is ceil(1.5 × election timeout); Leadership.TTL is the
// granted one) kept alive by the client every TTL/3, and a key
// Prefix+"/leader/LEASE" holding {"name","fingerprint"} (the concurrency
// package's Election). The first key by create revision leads. Before
// campaigning the Elector reads the current leader; if it has a different
// Fingerprint the Elector does not campaign (Err says why) and waits for the
// leadership to change, and if it was already queued it withdraws its key,
// so controllers with different service configurations never take over from
// each other. The election prefix is watched, so standbys know LeaderName and
// Term too.
//
// ValidUntil. Beside the session's keepalive the Elector sends its own
// keepalive every TTL/4 and notes when it sent it: the server extends the
// lease after that moment, so send time + TTL is a lower bound of the
// lease's end. ValidUntil is that minus a margin (TTL/10, at least 50 ms)
// for clock rates and a write already on its way. Leading is true only while
// Now() < ValidUntil; a leader whose lease is not confirmed by then gives up
// its session (the lease is revoked best-effort once etcd answers again) and
// campaigns anew. So with etcd down no controller writes, and a deposed or
// partitioned leader stops writing before etcd can elect another.
//
// Deposing. A switch's claim that another controller is master goes to
// Verify, which reads the election's first key and calls StepDown only if it
// is not ours in our term: only etcd deposes a leader, never one switch.
//
// Failover. A resigning leader (Run's context ends, Close, StepDown) deletes
// its key and revokes its lease: the next candidate leads within a round
// trip. A dead leader's lease runs out after at most TTL on the server, which
// checks expiry every 500 ms: with a 1 s TTL another controller leads 1.0 to
// 1.5 s after the old one's last keepalive.
//
// Shared state. Drains are keys Prefix+"/drain/BACKEND" any controller may
// put or delete; WatchDrains delivers the full set after every change. The
// state document Prefix+"/state" is written only by the leader, in a
// transaction that succeeds only while the leader's key exists with the
// leader's term as its create revision (ErrNotLeader otherwise).
//
// See docs/ha.md, "Election".
package ha
