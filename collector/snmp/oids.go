package snmp

// Numeric OIDs, leading dot as gosnmp returns them. Names are used only in
// error messages; no MIB files are loaded anywhere.
const (
	oidSysUpTime = ".1.3.6.1.2.1.1.3.0"

	// UCD-SNMP-MIB systemStats raw tick counters (Counter32, USER_HZ ticks
	// summed over all CPUs). On Linux net-snmp 5.9 ssCpuRawSystem is the
	// "system" column of /proc/stat alone (checked here: it excludes irq and
	// softirq), so summing it with Interrupt and SoftIRQ counts nothing
	// twice. ssCpuRawKernel (.55) is left out on purpose: it reads 0 on
	// Linux and, on platforms where it is filled, ssCpuRawSystem already
	// includes it.
	oidSsCpuRawUser      = ".1.3.6.1.4.1.2021.11.50.0"
	oidSsCpuRawNice      = ".1.3.6.1.4.1.2021.11.51.0"
	oidSsCpuRawSystem    = ".1.3.6.1.4.1.2021.11.52.0"
	oidSsCpuRawIdle      = ".1.3.6.1.4.1.2021.11.53.0"
	oidSsCpuRawWait      = ".1.3.6.1.4.1.2021.11.54.0"
	oidSsCpuRawInterrupt = ".1.3.6.1.4.1.2021.11.56.0"
	oidSsCpuRawSoftIRQ   = ".1.3.6.1.4.1.2021.11.61.0"
	oidSsCpuRawSteal     = ".1.3.6.1.4.1.2021.11.64.0"

	// UCD-SNMP-MIB memory group, INTEGER in kB. On Linux net-snmp 5.9
	// memAvailReal is MemFree, not MemAvailable (checked here against
	// /proc/meminfo), so page cache would count as used; memBuffer and
	// memCached are added back to approximate MemAvailable, which is what the
	// push probe (gopsutil) reports.
	oidMemTotalReal = ".1.3.6.1.4.1.2021.4.5.0"
	oidMemAvailReal = ".1.3.6.1.4.1.2021.4.6.0"
	oidMemBuffer    = ".1.3.6.1.4.1.2021.4.14.0"
	oidMemCached    = ".1.3.6.1.4.1.2021.4.15.0"

	// TCP-MIB.
	oidTCPCurrEstab = ".1.3.6.1.2.1.6.9.0"
	// tcpConnectionState column of the RFC 4022 tcpConnectionTable; the
	// index is localAddrType.localAddr(length-prefixed).localPort.
	// remAddrType.remAddr(length-prefixed).remPort. Checked here: walking
	// this column works although walking the table's root (.6.19) answers
	// noSuchObject (so a walk of the table reads as empty; docs/design.md). See
	// tcp.go for when it is used.
	oidTCPConnectionState = ".1.3.6.1.2.1.6.19.1.7"
	// tcpConnState column of the legacy IPv4-only tcpConnTable; the index
	// is localAddr(4 arcs).localPort.remAddr(4 arcs).remPort.
	oidTCPConnState = ".1.3.6.1.2.1.6.13.1.1"

	// HOST-RESOURCES-MIB hrProcessorEntry; column 1 is hrProcessorFrwID
	// (one row per processor), column 2 hrProcessorLoad (percent over the
	// last minute, absent during the agent's first minute).
	oidHrProcessorEntry = ".1.3.6.1.2.1.25.3.3.1"
)

// TCP-MIB tcpConnState/tcpConnectionState values.
const (
	tcpStateListen      = 2
	tcpStateEstablished = 5
)

// scalarOIDs are fetched with one GET per poll, in this order.
var scalarOIDs = []string{
	oidSysUpTime,
	oidSsCpuRawUser, oidSsCpuRawNice, oidSsCpuRawSystem, oidSsCpuRawIdle,
	oidSsCpuRawWait, oidSsCpuRawInterrupt, oidSsCpuRawSoftIRQ, oidSsCpuRawSteal,
	oidMemTotalReal, oidMemAvailReal, oidMemBuffer, oidMemCached,
	oidTCPCurrEstab,
}

// oidNames gives the MIB name of every scalar OID for error messages.
var oidNames = map[string]string{
	oidSysUpTime:         "sysUpTime",
	oidSsCpuRawUser:      "ssCpuRawUser",
	oidSsCpuRawNice:      "ssCpuRawNice",
	oidSsCpuRawSystem:    "ssCpuRawSystem",
	oidSsCpuRawIdle:      "ssCpuRawIdle",
	oidSsCpuRawWait:      "ssCpuRawWait",
	oidSsCpuRawInterrupt: "ssCpuRawInterrupt",
	oidSsCpuRawSoftIRQ:   "ssCpuRawSoftIRQ",
	oidSsCpuRawSteal:     "ssCpuRawSteal",
	oidMemTotalReal:      "memTotalReal",
	oidMemAvailReal:      "memAvailReal",
	oidMemBuffer:         "memBuffer",
	oidMemCached:         "memCached",
	oidTCPCurrEstab:      "tcpCurrEstab",
}
