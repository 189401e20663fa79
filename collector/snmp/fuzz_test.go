package snmp

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gosnmp/gosnmp"
)

// The fuzz input is a list of varbinds in a simple byte form, so the fuzzer
// can vary names, ASN.1 types and Go value types independently:
//
//	[name length u8][name][asn1 type u8][value kind u8][value: 8 bytes, or length u8 + bytes]
const (
	kindNil byte = iota
	kindInt
	kindUint
	kindUint32
	kindUint64
	kindString
	kindBytes
	kindFloat
	kindCount
)

func encodePDUs(pdus []gosnmp.SnmpPDU) []byte {
	var b []byte
	for _, p := range pdus {
		name := p.Name
		if len(name) > 255 {
			name = name[:255]
		}
		b = append(b, byte(len(name)))
		b = append(b, name...)
		b = append(b, byte(p.Type))
		var n uint64
		kind := kindNil
		switch v := p.Value.(type) {
		case int:
			kind, n = kindInt, uint64(v)
		case uint:
			kind, n = kindUint, uint64(v)
		case uint32:
			kind, n = kindUint32, uint64(v)
		case uint64:
			kind, n = kindUint64, v
		case string:
			b = append(b, kindString, byte(min(len(v), 255)))
			b = append(b, v[:min(len(v), 255)]...)
			continue
		}
		b = append(b, kind)
		if kind != kindNil {
			b = binary.BigEndian.AppendUint64(b, n)
		}
	}
	return b
}

func decodePDUs(b []byte) []gosnmp.SnmpPDU {
	var out []gosnmp.SnmpPDU
	for len(b) > 0 {
		n := int(b[0])
		b = b[1:]
		if len(b) < n+2 {
			return out
		}
		p := gosnmp.SnmpPDU{Name: string(b[:n]), Type: gosnmp.Asn1BER(b[n])}
		kind := b[n+1] % kindCount
		b = b[n+2:]
		switch kind {
		case kindString, kindBytes:
			if len(b) < 1 || len(b) < 1+int(b[0]) {
				return out
			}
			s := b[1 : 1+int(b[0])]
			b = b[1+int(b[0]):]
			if kind == kindString {
				p.Value = string(s)
			} else {
				p.Value = append([]byte(nil), s...)
			}
		case kindNil:
		default:
			if len(b) < 8 {
				return out
			}
			v := binary.BigEndian.Uint64(b)
			b = b[8:]
			switch kind {
			case kindInt:
				p.Value = int(int64(v))
			case kindUint:
				p.Value = uint(v)
			case kindUint32:
				p.Value = uint32(v)
			case kindUint64:
				p.Value = v
			case kindFloat:
				p.Value = math.Float64frombits(v)
			}
		}
		out = append(out, p)
	}
	return out
}

// FuzzParsePDUs feeds arbitrary varbinds (names, ASN.1 types, Go value types,
// negative and huge values, duplicates, missing OIDs) to every parser: they
// must return values within their documented ranges or an error, never
// panic.
func FuzzParsePDUs(f *testing.F) {
	for _, name := range []string{"fresh_scalars", "t1_scalars", "t2_scalars", "warm_scalars",
		"warm_hrprocessor", "fresh_hrprocessor", "warm_tcpconn", "warm_tcpconnection", "fresh_tcpconnection"} {
		_, pdus := loadFixture(f, name)
		f.Add(encodePDUs(pdus))
	}
	f.Add(encodePDUs(goodScalars()))
	f.Add(encodePDUs(withPDU(oidMemTotalReal, gosnmp.Integer, -1)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		pdus := decodePDUs(data)
		if s, err := parseScalars(pdus); err == nil {
			if s.memTotalKB == 0 || s.memAvailKB > s.memTotalKB {
				t.Fatalf("accepted memory total %d avail %d", s.memTotalKB, s.memAvailKB)
			}
			if b, u := s.memory(); b != s.memTotalKB*1024 || u < 0 || u > 1 || math.IsNaN(u) {
				t.Fatalf("memory() = %d, %v", b, u)
			}
			if u, ok := cpuUtil(cpuTicks{}, s.cpu); ok && (u < 0 || u > 1 || math.IsNaN(u)) {
				t.Fatalf("cpuUtil = %v", u)
			}
		}
		if p, err := parseProcessors(pdus); err == nil {
			if p.count <= 0 || (p.loadOK && (p.meanLoad < 0 || p.meanLoad > 1)) {
				t.Fatalf("processors %+v", p)
			}
		}
		var tables [2]tcpTable
		for i, parse := range []func([]gosnmp.SnmpPDU) (tcpTable, error){parseTCPConnTable, parseTCPConnectionTable} {
			tt, err := parse(pdus)
			if err != nil {
				continue
			}
			var est uint64
			for _, n := range tt.established {
				est += uint64(n)
			}
			if est+uint64(len(tt.listening)) > uint64(tt.rows) || tt.rows > len(pdus) {
				t.Fatalf("table %d: %d established, %d listening of %d rows from %d varbinds", i, est, len(tt.listening), tt.rows, len(pdus))
			}
			tables[i] = tt
		}
		if n, _, ok := countServiceConns([]uint16{80, 8080}, tables[0], &tables[1]); !ok && n != 0 {
			t.Fatalf("countServiceConns = %d without a table", n)
		}
		// The whole poll over the same varbinds: errors, never panics.
		a := &fakeAgent{scalars: pdus, walks: map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: pdus, oidTCPConnState: pdus, oidTCPConnectionState: pdus}}
		p, err := NewPollerWithAgent(v2cTarget(80), a)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := p.Poll(t.Context()); err == nil && s.CPUKnown && (s.CPUUtil < 0 || s.CPUUtil > 1) {
			t.Fatalf("poll CPUUtil %v", s.CPUUtil)
		}
	})
}

func TestFuzzCodecRoundTrip(t *testing.T) {
	_, pdus := loadFixture(t, "warm_scalars")
	got := decodePDUs(encodePDUs(pdus))
	if len(got) != len(pdus) {
		t.Fatalf("round trip: %d varbinds, want %d", len(got), len(pdus))
	}
	for i := range pdus {
		if got[i] != pdus[i] {
			t.Errorf("varbind %d: %+v, want %+v", i, got[i], pdus[i])
		}
	}
}
