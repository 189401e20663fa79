// Package snmp is the collector's SNMP metric source: it polls a stock
// net-snmp snmpd on a backend (SNMP v2c or v3 authPriv, via gosnmp) and turns
// the agent's answers into one Sample per poll: CPU utilisation and count,
// memory utilisation and size, and established TCP connections.
//
// It exists for backends where the flowweight probe cannot be installed but
// an SNMP agent already runs. Everything it reads was checked against
// Debian's snmpd 5.9 (see /work/shared/DESIGN.md, "Metrics sources"):
//
//   - CPU utilisation comes from the UCD ssCpuRaw* tick counters, as the
//     difference between two polls (busy = all ticks except idle and iowait,
//     the same definition gopsutil and therefore the push probe use). The
//     agent refreshes these counters only every 5 s and reports all of them
//     as 0 until its first refresh, so a Poller needs two polls at least 5 s
//     apart before it can compute a delta. Until then it falls back to the
//     mean hrProcessorLoad (which the agent only fills after its first
//     minute); when neither exists Sample.CPUKnown is false and CPUUtil is 0.
//   - CPU count is the number of hrProcessorTable rows.
//   - Memory is memTotalReal; available memory is the sum of memAvailReal,
//     memBuffer and memCached, because on Linux memAvailReal is MemFree
//     (page cache would count as used).
//   - Connections are counted per service port from the legacy tcpConnTable
//     when the port has an IPv4 listener there (that table is fresh, about
//     5 s), and from the RFC 4022 tcpConnectionTable otherwise: connections
//     accepted on a dual-stack or IPv6 listener (Go's net.Listen("tcp",
//     ":port")) appear only there, as IPv4-mapped IPv6, and the agent caches
//     that table for up to a minute. With no service ports configured, or
//     both tables empty, tcpCurrEstab (all ports) is used.
//
// Gathering is split from parsing: the parse* functions are pure functions
// from []gosnmp.SnmpPDU to values, tested on PDUs recorded from the real
// agent (testdata/) and fuzzed; the Poller only sequences requests through
// the small Agent interface and keeps the previous counters.
//
// The package does not log and registers no metrics: it returns wrapped
// errors that name the backend address and the OID or step that failed.
// It must not import the weights or controller packages.
package snmp
