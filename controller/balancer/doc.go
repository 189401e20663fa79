// Package balancer runs the controller: it owns the state between the collector and the
// switches (the configuration, each service's weights and what was learned for them) and
// runs one update per period, in one direction:
//
//	ingest (collector/push, the SNMP pollers) → state (collector.Pool, services)
//	→ weights (weights.Compute) → intent (controller/intent) → per-switch sync (controller/switchsync)
//
// An update builds one immutable intent under the state lock and offers it to every
// connected switch's syncer; it never waits on a switch. What a syncer learns that an update
// needs (the weights a switch holds, a restart's seed only when switches agree: seed.go;
// throughput counters) comes back as the syncer's published status, read at the next update.
// It also answers ARP for the VIPs from the latest intent and applies configuration reloads
// atomically.
//
// The arithmetic lives in weights, the flow layout in dataplane, the bytes in ofswitch and
// ofwire, and everything about one switch in switchsync; this package holds the loops and the
// state between them. Nothing below it may import it.
package balancer
