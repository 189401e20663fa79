// Package snmp is the collector's SNMP metric source: it polls a stock
// net-snmp snmpd on a backend (SNMP v2c or v3 authPriv, via gosnmp) and turns
// the agent's answers into one Sample per poll: CPU utilisation and count,
// memory utilisation and size, and established TCP connections.
//
// It exists for backends where the flowweight probe cannot be installed but
// an SNMP agent already runs. Everything it reads was checked against
// Debian's snmpd 5.9 (see docs/design.md, "Metrics sources"):
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
// An agent's answers are the backend's own claims, so they are bounded and
// checked; each bad value fails the poll with an error naming the agent and
// the OID (the poll's CPU baseline is kept unless said otherwise):
//
//   - Walks are bounded while they run (the walk stops, no further requests):
//     hrProcessorTable at MaxProcessors (8192, Linux's largest NR_CPUS) rows,
//     each TCP connection table at Target.MaxConnRows (default 100,000)
//     rows; more is ErrTooManyRows, not a huge CPU or connection count.
//   - Rows bound no memory (one varbind can carry an OctetString of nearly
//     64 KiB), so every answer is bounded in bytes too, counted as the text
//     of each varbind's OID and value: at most MaxVarbindBytes (256) per
//     varbind, MaxProcessorWalkBytes (1 MiB) per hrProcessorTable walk,
//     Target.MaxWalkBytes (default 16 MiB) per TCP table walk, and the
//     scalar GET to one varbind per OID asked. A walk stops at the first
//     varbind past its budget (no further request), and the poll fails with
//     ErrTooLarge (or ErrTooManyRows) naming the agent and the OID.
//   - Values must have their MIB type and range: negative INTEGERs, values
//     past their type's maximum, hrProcessorLoad over 100, TCP states outside
//     1..12, memTotalReal of 0 and memAvailReal above memTotalReal are errors.
//     memTotalReal is INTEGER kB, so at most 2 TiB; a large but possible
//     size is accepted here and bounded relative to the pool by the
//     weighting (max_capacity_ratio), as is the CPU count.
//   - ssCpuRaw counters (Counter32) are taken modulo 2^32 across a wrap, but a
//     counter that went backwards (a delta of 2^31 or more) while sysUpTime did
//     not, or more ticks than the processors can count in the sysUpTime
//     elapsed (4× USER_HZ, plus 10 s for the agent's cache), is ErrCounters;
//     that reading becomes the new baseline, so one jump fails one poll.
//     sysUpTime going back is an agent restart: the baseline is dropped.
//   - tcpCurrEstab is a Gauge32; a huge value only saturates the connection
//     term of the backend's own load.
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
