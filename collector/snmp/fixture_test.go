package snmp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosnmp/gosnmp"
)

// A fixture is what testdata/record wrote: the varbinds one real snmpd
// request returned, with gosnmp's type names.
type fixture struct {
	Comment        string `json:"comment"`
	Request        string `json:"request"`
	ListenPort     uint16 `json:"listen_port"`
	ListenPortDual uint16 `json:"listen_port_dual"`
	Conns          int    `json:"conns"`
	PDUs           []struct {
		OID   string `json:"oid"`
		Type  string `json:"type"`
		Value any    `json:"value"`
	} `json:"pdus"`
}

var asn1Types = map[string]gosnmp.Asn1BER{}

func init() {
	for _, t := range []gosnmp.Asn1BER{gosnmp.Integer, gosnmp.Counter32, gosnmp.Gauge32, gosnmp.TimeTicks,
		gosnmp.ObjectIdentifier, gosnmp.OctetString, gosnmp.NoSuchObject, gosnmp.NoSuchInstance, gosnmp.EndOfMibView, gosnmp.Counter64} {
		asn1Types[t.String()] = t
	}
}

// loadFixture reads testdata/NAME.json and rebuilds the varbinds with the Go
// value types gosnmp's decoder produces (helper.go decodeValue): Integer as
// int, Counter32 and Gauge32 as uint, TimeTicks as uint32, Counter64 as
// uint64, OIDs as string, the NoSuch* exceptions as nil.
func loadFixture(tb testing.TB, name string) (fixture, []gosnmp.SnmpPDU) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		tb.Fatalf("fixture %s: %v", name, err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		tb.Fatalf("fixture %s: %v", name, err)
	}
	pdus := make([]gosnmp.SnmpPDU, 0, len(f.PDUs))
	for i, p := range f.PDUs {
		t, ok := asn1Types[p.Type]
		if !ok {
			tb.Fatalf("fixture %s pdu %d: unknown type %q", name, i, p.Type)
		}
		pdu := gosnmp.SnmpPDU{Name: p.OID, Type: t}
		num, _ := p.Value.(float64)
		switch t {
		case gosnmp.Integer:
			pdu.Value = int(num)
		case gosnmp.Counter32, gosnmp.Gauge32:
			pdu.Value = uint(num)
		case gosnmp.TimeTicks:
			pdu.Value = uint32(num)
		case gosnmp.Counter64:
			pdu.Value = uint64(num)
		case gosnmp.ObjectIdentifier, gosnmp.OctetString:
			pdu.Value = p.Value
		}
		pdus = append(pdus, pdu)
	}
	return f, pdus
}

// fixtureValue returns the recorded numeric value of oid in a fixture.
func fixtureValue(tb testing.TB, f fixture, oid string) uint64 {
	tb.Helper()
	for _, p := range f.PDUs {
		if p.OID == oid {
			v, ok := p.Value.(float64)
			if !ok {
				tb.Fatalf("fixture %q: %s has no numeric value", f.Comment, oid)
			}
			return uint64(v)
		}
	}
	tb.Fatalf("fixture %q: no %s", f.Comment, oid)
	return 0
}

// fakeAgent answers like snmpd from recorded varbinds: a GET returns the
// requested OIDs (NoSuchObject for those not recorded), a walk returns the
// recorded varbinds below root.
type fakeAgent struct {
	scalars []gosnmp.SnmpPDU
	walks   map[string][]gosnmp.SnmpPDU
	errs    map[string]error // by "get" or walk root
	calls   []string
	closed  bool
	// ignoreMax: return the whole walk even past BulkWalk's max, like an
	// Agent implementation that forgot the bound.
	ignoreMax bool
}

func (a *fakeAgent) Get(_ context.Context, oids []string) ([]gosnmp.SnmpPDU, error) {
	a.calls = append(a.calls, "get")
	if err := a.errs["get"]; err != nil {
		return nil, err
	}
	byName := make(map[string]gosnmp.SnmpPDU, len(a.scalars))
	for _, p := range a.scalars {
		byName[p.Name] = p
	}
	out := make([]gosnmp.SnmpPDU, 0, len(oids))
	for _, o := range oids {
		p, ok := byName[o]
		if !ok {
			p = gosnmp.SnmpPDU{Name: o, Type: gosnmp.NoSuchObject}
		}
		out = append(out, p)
	}
	return out, nil
}

func (a *fakeAgent) BulkWalk(_ context.Context, root string, budget Budget) ([]gosnmp.SnmpPDU, error) {
	a.calls = append(a.calls, root)
	if err := a.errs[root]; err != nil {
		return nil, err
	}
	if !a.ignoreMax {
		if err := budget.check(a.walks[root]); err != nil {
			return nil, err
		}
	}
	return a.walks[root], nil
}

func (a *fakeAgent) Close() error {
	if a.closed {
		return fmt.Errorf("closed twice")
	}
	a.closed = true
	return nil
}

// recordedAgent builds a fakeAgent from the fixtures with one prefix; the
// TCP tables are empty for prefixes recorded without them.
func recordedAgent(tb testing.TB, prefix string) *fakeAgent {
	tb.Helper()
	_, sc := loadFixture(tb, prefix+"_scalars")
	_, hr := loadFixture(tb, prefix+"_hrprocessor")
	a := &fakeAgent{
		scalars: sc,
		walks:   map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: hr},
		errs:    map[string]error{},
	}
	for suffix, root := range map[string]string{"_tcpconn": oidTCPConnState, "_tcpconnection": oidTCPConnectionState} {
		if _, err := os.Stat(filepath.Join("testdata", prefix+suffix+".json")); err == nil {
			_, a.walks[root] = loadFixture(tb, prefix+suffix)
		}
	}
	return a
}
