// Package poll runs the collector's own polls of backends that run no probe: one goroutine
// per backend polls its snmpd (collector/snmp) and runs its health check (internal/health) on
// a pace (pace.go: HAProxy's fastinter after a failed check), and hands the samples and
// results to a Sink, the collector.Pool, as the push server does with probe reports.
//
// The Runner is given its jobs whole (Set) and starts, restarts or stops only what changed,
// so the controller reconfigures it on every reload. What a job is built from (the backend's
// [snmp] and [health] sections) is the caller's: this package knows no configuration file,
// and, being part of the collector, imports nothing of controller/.
package poll
