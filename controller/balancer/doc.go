// Package balancer runs the controller: it owns the state between the collector and the
// switches (the configuration, each service's weights and what was learned for them) and
// runs one update per period, in one direction:
//
//	ingest (collector/push, collector/poll) → state (collector.Pool, services)
//	→ weights (weights.Compute) → intent (controller/intent) → per-switch sync (controller/switchsync)
//
// An update builds one immutable intent under the state lock and offers it to every
// connected switch's syncer; it never waits on a switch. What a syncer learns that an update
// needs (the weights a switch holds, a restart's seed only when switches agree: seed.go;
// throughput counters) comes back as the syncer's published status, read at the next update.
// It also routes each switch's packet-ins to that switch's syncer (which answers ARP/ND and
// locates backends: switchsync/arp.go), hands the collector's SNMP runner its jobs
// (snmpjobs.go), and applies configuration reloads atomically. It builds the runtime objects
// the configuration describes (health checks, SNMP targets, probe keys: build.go), since
// controller/config only decodes and validates.
//
// What the loop needs besides that is behind small types (docs/design.md, "Inside the
// controller"): a Lead says whether this controller may write (solo alone, elected with HA:
// ha.go); a Store keeps the state document (the state file, or etcd: store.go) and the keeper
// decides what to write and when (persist.go); drains owns operator drains (drains.go). After
// every update the loop publishes an immutable snapshot on a view.Board (publish.go), which
// the API and the metrics collectors read without this package's lock. A service's
// shadow_policy is computed in the same update from the same inputs, with state of its own,
// and published beside the live weights; it never reaches the intent (shadow.go).
//
// The arithmetic lives in weights, the flow layout in dataplane, the bytes in ofswitch and
// ofwire, everything about one switch in switchsync, the read side in controller/view; this
// package holds the loops and the state between them. Nothing below controller/ imports it.
package balancer
