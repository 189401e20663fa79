package snmp

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gosnmp/gosnmp"
)

// TCP connection tables, measured on Debian's snmpd 5.9:
//
//   - the legacy tcpConnTable lists IPv4 sockets only, listeners included,
//     and its cache is at most about 5 s old;
//   - the RFC 4022 tcpConnectionTable also lists IPv6 sockets, including
//     the IPv4-mapped ones a dual-stack listener (Go's net.Listen("tcp",
//     ":port"), nginx "listen [::]:80") accepts, which the legacy table
//     never shows; listeners are not in it, and the agent caches it for up
//     to about a minute.
//
// So a service port with an IPv4 listener is counted from the fresh legacy
// table, and only a port without one (its listener is an IPv6 or
// dual-stack socket) from tcpConnectionTable.

// tcpTable is one walked connection table, reduced to what counting needs.
type tcpTable struct {
	rows        int               // rows in any state
	established map[uint16]uint32 // established connections by local port
	listening   map[uint16]bool   // local ports in state listen(2)
}

func newTCPTable() tcpTable {
	return tcpTable{established: map[uint16]uint32{}, listening: map[uint16]bool{}}
}

func (t *tcpTable) add(localPort uint16, state uint64) {
	t.rows++
	switch state {
	case tcpStateEstablished:
		t.established[localPort]++
	case tcpStateListen:
		t.listening[localPort] = true
	}
}

// tcpState validates a tcpConnState/tcpConnectionState value: closed(1) to
// deleteTCB(12).
func tcpState(p gosnmp.SnmpPDU, name string) (uint64, error) {
	state, err := unsigned(p, name, 12, gosnmp.Integer)
	if err != nil {
		return 0, err
	}
	if state == 0 {
		return 0, fmt.Errorf("%s (%s): state 0 is not a TCP state", name, p.Name)
	}
	return state, nil
}

// parseTCPConnTable reads a walk of the legacy tcpConnTable's tcpConnState
// column.
func parseTCPConnTable(pdus []gosnmp.SnmpPDU) (tcpTable, error) {
	t := newTCPTable()
	for _, p := range pdus {
		index, ok := strings.CutPrefix(p.Name, oidTCPConnState+".")
		if !ok {
			return tcpTable{}, fmt.Errorf("tcpConnTable walk returned OID %s outside %s", p.Name, oidTCPConnState)
		}
		if absent(p) {
			continue
		}
		arcs := strings.Split(index, ".")
		if len(arcs) != 10 {
			return tcpTable{}, fmt.Errorf("tcpConnState (%s): index has %d arcs, want 10 (addr.port.addr.port)", p.Name, len(arcs))
		}
		var localPort uint16
		for i, a := range arcs {
			bits := 8
			if i == 4 || i == 9 {
				bits = 16
			}
			v, err := strconv.ParseUint(a, 10, bits)
			if err != nil {
				return tcpTable{}, fmt.Errorf("tcpConnState (%s): index arc %d %q out of range", p.Name, i+1, a)
			}
			if i == 4 {
				localPort = uint16(v)
			}
		}
		state, err := tcpState(p, "tcpConnState")
		if err != nil {
			return tcpTable{}, err
		}
		t.add(localPort, state)
	}
	return t, nil
}

// inetAddressLen maps an InetAddressType to its address length in octets
// (ipv4, ipv6, ipv4z, ipv6z).
var inetAddressLen = map[uint64]int{1: 4, 2: 16, 3: 8, 4: 20}

// parseInetEndpoint reads type.length.octets....port from arcs and returns
// the port and the arcs after it.
func parseInetEndpoint(arcs []string) (port uint16, rest []string, err error) {
	if len(arcs) < 2 {
		return 0, nil, fmt.Errorf("index ends before an address")
	}
	typ, err := strconv.ParseUint(arcs[0], 10, 8)
	want, known := inetAddressLen[typ]
	if err != nil || !known {
		return 0, nil, fmt.Errorf("address type %q is not ipv4(1), ipv6(2), ipv4z(3) or ipv6z(4)", arcs[0])
	}
	n, err := strconv.ParseUint(arcs[1], 10, 8)
	if err != nil || int(n) != want {
		return 0, nil, fmt.Errorf("address length %q, want %d for type %d", arcs[1], want, typ)
	}
	arcs = arcs[2:]
	if len(arcs) < want+1 {
		return 0, nil, fmt.Errorf("index ends inside an address")
	}
	for _, a := range arcs[:want] {
		if _, err := strconv.ParseUint(a, 10, 8); err != nil {
			return 0, nil, fmt.Errorf("address octet %q out of range", a)
		}
	}
	p, err := strconv.ParseUint(arcs[want], 10, 16)
	if err != nil {
		return 0, nil, fmt.Errorf("port %q out of range", arcs[want])
	}
	return uint16(p), arcs[want+1:], nil
}

// parseTCPConnectionTable reads a walk of the RFC 4022 tcpConnectionTable's
// tcpConnectionState column.
func parseTCPConnectionTable(pdus []gosnmp.SnmpPDU) (tcpTable, error) {
	t := newTCPTable()
	for _, p := range pdus {
		index, ok := strings.CutPrefix(p.Name, oidTCPConnectionState+".")
		if !ok {
			return tcpTable{}, fmt.Errorf("tcpConnectionTable walk returned OID %s outside %s", p.Name, oidTCPConnectionState)
		}
		if absent(p) {
			continue
		}
		localPort, arcs, err := parseInetEndpoint(strings.Split(index, "."))
		if err == nil {
			_, arcs, err = parseInetEndpoint(arcs)
		}
		if err == nil && len(arcs) != 0 {
			err = fmt.Errorf("%d arcs after the remote port", len(arcs))
		}
		if err != nil {
			return tcpTable{}, fmt.Errorf("tcpConnectionState (%s): %w", p.Name, err)
		}
		state, err := tcpState(p, "tcpConnectionState")
		if err != nil {
			return tcpTable{}, err
		}
		t.add(localPort, state)
	}
	return t, nil
}

// needsConnectionTable reports whether any service port lacks an IPv4
// listener in the legacy table (or the legacy table is empty), so that
// tcpConnectionTable must be walked too.
func needsConnectionTable(ports []uint16, legacy tcpTable) bool {
	if legacy.rows == 0 {
		return true
	}
	for _, p := range ports {
		if !legacy.listening[p] {
			return true
		}
	}
	return false
}

// countServiceConns adds up the established connections on the service
// ports: from the legacy table for ports with an IPv4 listener there, from
// tcpConnectionTable (when it has rows; nil when not walked) for the others.
// ok is false when neither table has any row, and the caller falls back to
// tcpCurrEstab. source names the table used, tcpConnectionTable as soon as
// one port was counted from it.
func countServiceConns(ports []uint16, legacy tcpTable, modern *tcpTable) (n uint32, source string, ok bool) {
	useModern := modern != nil && modern.rows > 0
	if legacy.rows == 0 && !useModern {
		return 0, "", false
	}
	source = ConnSourceTCPConnTable
	for _, p := range ports {
		if useModern && (!legacy.listening[p] || legacy.rows == 0) {
			n += modern.established[p]
			source = ConnSourceTCPConnectionTable
		} else {
			n += legacy.established[p]
		}
	}
	return n, source, true
}
