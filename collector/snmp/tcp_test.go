package snmp

import (
	"strings"
	"testing"

	"github.com/gosnmp/gosnmp"
)

// TestParseTCPTablesRecorded checks both tables against what the recorder
// held open: f.Conns connections to an IPv4 listener (ListenPort) and as
// many to a dual-stack listener (ListenPortDual).
func TestParseTCPTablesRecorded(t *testing.T) {
	for _, prefix := range []string{"fresh", "warm"} {
		t.Run(prefix, func(t *testing.T) {
			f, pdus := loadFixture(t, prefix+"_tcpconn")
			legacy, err := parseTCPConnTable(pdus)
			if err != nil {
				t.Fatal(err)
			}
			if legacy.rows != len(f.PDUs) {
				t.Errorf("legacy rows %d, want %d", legacy.rows, len(f.PDUs))
			}
			if int(legacy.established[f.ListenPort]) != f.Conns || !legacy.listening[f.ListenPort] {
				t.Errorf("legacy IPv4 listener port: %d established, listening %v; want %d and true",
					legacy.established[f.ListenPort], legacy.listening[f.ListenPort], f.Conns)
			}
			// The legacy table never shows a dual-stack listener's sockets.
			if legacy.established[f.ListenPortDual] != 0 || legacy.listening[f.ListenPortDual] {
				t.Errorf("legacy shows the dual-stack port: %d established, listening %v",
					legacy.established[f.ListenPortDual], legacy.listening[f.ListenPortDual])
			}

			fm, mpdus := loadFixture(t, prefix+"_tcpconnection")
			modern, err := parseTCPConnectionTable(mpdus)
			if err != nil {
				t.Fatal(err)
			}
			if fm.ListenPort != f.ListenPort || fm.ListenPortDual != f.ListenPortDual {
				t.Fatalf("fixtures of one recording disagree on ports")
			}
			for _, port := range []uint16{f.ListenPort, f.ListenPortDual} {
				if int(modern.established[port]) != f.Conns {
					t.Errorf("tcpConnectionTable port %d: %d established, want %d", port, modern.established[port], f.Conns)
				}
			}
			if len(modern.listening) != 0 {
				t.Errorf("tcpConnectionTable has listeners %v; they live in tcpListenerTable", modern.listening)
			}

			ports := []uint16{f.ListenPort, f.ListenPortDual}
			if !needsConnectionTable(ports, legacy) || needsConnectionTable(ports[:1], legacy) {
				t.Errorf("needsConnectionTable: want true with the dual-stack port, false without")
			}
			n, source, ok := countServiceConns(ports, legacy, &modern)
			if !ok || int(n) != 2*f.Conns || source != ConnSourceTCPConnectionTable {
				t.Errorf("countServiceConns = %d, %q, %v; want %d from %s", n, source, ok, 2*f.Conns, ConnSourceTCPConnectionTable)
			}
		})
	}
}

func legacyRow(index string, typ gosnmp.Asn1BER, v any) gosnmp.SnmpPDU {
	return gosnmp.SnmpPDU{Name: oidTCPConnState + "." + index, Type: typ, Value: v}
}

func TestParseTCPConnTable(t *testing.T) {
	est := func(index string) gosnmp.SnmpPDU { return legacyRow(index, gosnmp.Integer, 5) }
	tests := []struct {
		name       string
		pdus       []gosnmp.SnmpPDU
		wantEst    map[uint16]uint32
		wantListen []uint16
		wantRows   int
		wantErr    string
	}{
		{name: "states and ports", pdus: []gosnmp.SnmpPDU{
			legacyRow("0.0.0.0.80.0.0.0.0.0", gosnmp.Integer, 2), // listen
			est("10.0.0.1.80.10.0.0.2.5000"),
			est("10.0.0.1.443.10.0.0.2.5001"),
			legacyRow("10.0.0.1.80.10.0.0.3.5002", gosnmp.Integer, 11), // timeWait
			est("10.0.0.1.80.10.0.0.2.5003"),
			est("10.0.0.2.5000.10.0.0.1.80"), // client side: remote port 80
		}, wantEst: map[uint16]uint32{80: 2, 443: 1, 5000: 1}, wantListen: []uint16{80}, wantRows: 6},
		{name: "empty table", pdus: nil, wantEst: map[uint16]uint32{}, wantRows: 0},
		{name: "NoSuchObject only", pdus: []gosnmp.SnmpPDU{legacyRow("0", gosnmp.NoSuchObject, nil)}, wantEst: map[uint16]uint32{}, wantRows: 0},
		{name: "outside", pdus: []gosnmp.SnmpPDU{{Name: ".1.3.6.1.2.1.6.13.1.2.0.0.0.0.80.0.0.0.0.0", Type: gosnmp.Integer, Value: 5}}, wantErr: "outside"},
		{name: "short index", pdus: []gosnmp.SnmpPDU{est("10.0.0.1.80")}, wantErr: "5 arcs"},
		{name: "address arc too big", pdus: []gosnmp.SnmpPDU{est("10.0.0.256.80.10.0.0.2.5000")}, wantErr: "arc 4"},
		{name: "port too big", pdus: []gosnmp.SnmpPDU{est("10.0.0.1.65536.10.0.0.2.5000")}, wantErr: "arc 5"},
		{name: "negative arc", pdus: []gosnmp.SnmpPDU{est("10.0.0.1.-1.10.0.0.2.5000")}, wantErr: "arc 5"},
		{name: "state as Gauge32", pdus: []gosnmp.SnmpPDU{legacyRow("10.0.0.1.80.10.0.0.2.5000", gosnmp.Gauge32, uint(5))}, wantErr: "want type Integer"},
		{name: "state 13", pdus: []gosnmp.SnmpPDU{legacyRow("10.0.0.1.80.10.0.0.2.5000", gosnmp.Integer, 13)}, wantErr: "exceeds 12"},
		{name: "state 0", pdus: []gosnmp.SnmpPDU{legacyRow("10.0.0.1.80.10.0.0.2.5000", gosnmp.Integer, 0)}, wantErr: "state 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTCPConnTable(tc.pdus)
			checkTCPTable(t, got, err, tc.wantErr, tc.wantRows, tc.wantEst, tc.wantListen)
		})
	}
}

func checkTCPTable(t *testing.T, got tcpTable, err error, wantErr string, wantRows int, wantEst map[uint16]uint32, wantListen []uint16) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if got.rows != wantRows {
		t.Errorf("rows %d, want %d", got.rows, wantRows)
	}
	if len(got.established) != len(wantEst) {
		t.Errorf("established %v, want %v", got.established, wantEst)
	}
	for port, n := range wantEst {
		if got.established[port] != n {
			t.Errorf("established[%d] = %d, want %d", port, got.established[port], n)
		}
	}
	if len(got.listening) != len(wantListen) {
		t.Errorf("listening %v, want %v", got.listening, wantListen)
	}
	for _, port := range wantListen {
		if !got.listening[port] {
			t.Errorf("port %d not listening", port)
		}
	}
}

func TestParseTCPConnectionTable(t *testing.T) {
	row := func(index string, typ gosnmp.Asn1BER, v any) gosnmp.SnmpPDU {
		return gosnmp.SnmpPDU{Name: oidTCPConnectionState + "." + index, Type: typ, Value: v}
	}
	est := func(index string) gosnmp.SnmpPDU { return row(index, gosnmp.Integer, 5) }
	const mapped = "2.16.0.0.0.0.0.0.0.0.0.0.255.255.127.0.0.1"
	const v6 = "2.16.32.1.13.184.0.0.0.0.0.0.0.0.0.0.0.1"
	tests := []struct {
		name     string
		pdus     []gosnmp.SnmpPDU
		wantEst  map[uint16]uint32
		wantRows int
		wantErr  string
	}{
		{name: "ipv4, ipv6 and mapped", pdus: []gosnmp.SnmpPDU{
			est("1.4.127.0.0.1.8080.1.4.127.0.0.1.40000"),
			est(mapped + ".8080." + mapped + ".40001"),
			est(v6 + ".8080." + v6 + ".40002"),
			row(v6+".8080."+v6+".40003", gosnmp.Integer, 11),
			est("3.8.10.0.0.1.0.0.0.1.9000.3.8.10.0.0.2.0.0.0.1.40004"),                                                     // ipv4z
			est("4.20.254.128.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.2.9000.4.20.254.128.0.0.0.0.0.0.0.0.0.0.0.0.0.2.0.0.0.2.1"), // ipv6z
		}, wantEst: map[uint16]uint32{8080: 3, 9000: 2}, wantRows: 6},
		{name: "empty", pdus: nil, wantEst: map[uint16]uint32{}},
		{name: "outside", pdus: []gosnmp.SnmpPDU{{Name: ".1.3.6.1.2.1.6.19.1.8.1.4.127.0.0.1.80.1.4.127.0.0.1.1", Type: gosnmp.Integer, Value: 5}}, wantErr: "outside"},
		{name: "unknown address type", pdus: []gosnmp.SnmpPDU{est("5.4.127.0.0.1.80.1.4.127.0.0.1.1")}, wantErr: "address type"},
		{name: "length does not match type", pdus: []gosnmp.SnmpPDU{est("1.16.127.0.0.1.80.1.4.127.0.0.1.1")}, wantErr: "length"},
		{name: "ends inside address", pdus: []gosnmp.SnmpPDU{est("1.4.127.0.0")}, wantErr: "inside an address"},
		{name: "ends before remote", pdus: []gosnmp.SnmpPDU{est("1.4.127.0.0.1.80")}, wantErr: "before an address"},
		{name: "trailing arcs", pdus: []gosnmp.SnmpPDU{est("1.4.127.0.0.1.80.1.4.127.0.0.1.1.7")}, wantErr: "after the remote port"},
		{name: "octet too big", pdus: []gosnmp.SnmpPDU{est("1.4.127.0.0.300.80.1.4.127.0.0.1.1")}, wantErr: "octet"},
		{name: "port too big", pdus: []gosnmp.SnmpPDU{est("1.4.127.0.0.1.70000.1.4.127.0.0.1.1")}, wantErr: "port"},
		{name: "state wrong type", pdus: []gosnmp.SnmpPDU{row("1.4.127.0.0.1.80.1.4.127.0.0.1.1", gosnmp.OctetString, []byte{5})}, wantErr: "tcpConnectionState"},
		{name: "state 0", pdus: []gosnmp.SnmpPDU{row("1.4.127.0.0.1.80.1.4.127.0.0.1.1", gosnmp.Integer, 0)}, wantErr: "state 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTCPConnectionTable(tc.pdus)
			checkTCPTable(t, got, err, tc.wantErr, tc.wantRows, tc.wantEst, nil)
		})
	}
}

func TestCountServiceConns(t *testing.T) {
	legacy := tcpTable{rows: 4, established: map[uint16]uint32{80: 3, 22: 1}, listening: map[uint16]bool{80: true, 22: true}}
	modern := tcpTable{rows: 9, established: map[uint16]uint32{80: 4, 22: 1, 8080: 5}, listening: map[uint16]bool{}}
	empty := tcpTable{}
	tests := []struct {
		name       string
		ports      []uint16
		legacy     tcpTable
		modern     *tcpTable
		wantN      uint32
		wantSource string
		wantOK     bool
		wantNeed   bool
	}{
		{"IPv4 listener: fresh legacy table", []uint16{80}, legacy, nil, 3, ConnSourceTCPConnTable, true, false},
		{"IPv4 listener wins over the modern table", []uint16{80}, legacy, &modern, 3, ConnSourceTCPConnTable, true, false},
		{"dual-stack listener: modern table", []uint16{8080}, legacy, &modern, 5, ConnSourceTCPConnectionTable, true, true},
		{"mixed ports", []uint16{80, 8080}, legacy, &modern, 8, ConnSourceTCPConnectionTable, true, true},
		{"modern table empty: legacy, 0 on the dual port", []uint16{80, 8080}, legacy, &empty, 3, ConnSourceTCPConnTable, true, true},
		{"legacy empty: modern for all", []uint16{80, 8080}, empty, &modern, 9, ConnSourceTCPConnectionTable, true, true},
		{"both empty", []uint16{80}, empty, &empty, 0, "", false, true},
		{"legacy empty, modern not walked", []uint16{80}, empty, nil, 0, "", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, source, ok := countServiceConns(tc.ports, tc.legacy, tc.modern)
			if n != tc.wantN || source != tc.wantSource || ok != tc.wantOK {
				t.Errorf("countServiceConns = %d, %q, %v; want %d, %q, %v", n, source, ok, tc.wantN, tc.wantSource, tc.wantOK)
			}
			if got := needsConnectionTable(tc.ports, tc.legacy); got != tc.wantNeed {
				t.Errorf("needsConnectionTable = %v, want %v", got, tc.wantNeed)
			}
		})
	}
}
