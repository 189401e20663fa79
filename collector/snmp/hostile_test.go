package snmp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
)

// hostileAgent is an SNMP v2c agent on loopback that answers every GETBULK with reps
// varbinds below the requested OID, each an OctetString of valueLen bytes, without end: the
// walk ends only when the poller stops asking. It counts the requests it answered.
type hostileAgent struct {
	addr     string
	requests atomic.Int64
}

func startHostileAgent(t *testing.T, reps, valueLen int) *hostileAgent {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileAgent{addr: pc.LocalAddr().String()}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	dec := &gosnmp.GoSNMP{Version: gosnmp.Version2c, Community: "public", Logger: gosnmp.NewLogger(nil)}
	value := []byte(strings.Repeat("A", valueLen))
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		next := 0
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			req, err := dec.SnmpDecodePacket(buf[:n])
			if err != nil || len(req.Variables) == 0 {
				continue
			}
			h.requests.Add(1)
			resp := &gosnmp.SnmpPacket{Version: gosnmp.Version2c, Community: "public", PDUType: gosnmp.GetResponse,
				RequestID: req.RequestID}
			for range reps {
				next++
				resp.Variables = append(resp.Variables, gosnmp.SnmpPDU{
					Name: fmt.Sprintf("%s.1.%d", oidHrProcessorEntry, next), Type: gosnmp.OctetString, Value: value})
			}
			out, err := resp.MarshalMsg()
			if err != nil {
				t.Errorf("hostile agent: %v", err)
				return
			}
			pc.WriteTo(out, from)
		}
	}()
	return h
}

// A hostile agent that answers a walk with endless or huge values is stopped by bytes, not
// only by rows: the walk sends no request past its budget, and the error names the agent and
// the OID. Before, one hrProcessorTable walk held 16,384 values of 8 KB (131 MB).
func TestHostileAgentWalkBytes(t *testing.T) {
	perVarbind := len(oidHrProcessorEntry+".1.1") + 200 // the smallest varbind it sends
	tests := []struct {
		name         string
		reps         int
		valueLen     int
		maxRequests  int64
		wantInReason string
	}{
		{"8 KB values", 7, 8000, 1, "more than 256"},
		{"200-byte values up to the walk's bytes", 50, 200, int64(MaxProcessorWalkBytes/(50*perVarbind) + 1), fmt.Sprintf("more than %d bytes", MaxProcessorWalkBytes)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startHostileAgent(t, tc.reps, tc.valueLen)
			tg := v2cTarget()
			tg.Address, tg.Community, tg.Timeout, tg.Retries = h.addr, "public", 2*time.Second, 0
			g, err := tg.session()
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Connect(); err != nil {
				t.Fatal(err)
			}
			defer g.Conn.Close()
			p := newPoller(tg, &gosnmpAgent{g: g})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pdus, err := p.walk(ctx, processorStep, oidHrProcessorEntry,
				Budget{Varbinds: processorColumns * MaxProcessors, Bytes: MaxProcessorWalkBytes}, "processors", MaxProcessors)
			if !errors.Is(err, ErrTooLarge) || pdus != nil {
				t.Fatalf("walk = %d varbinds, %v; want ErrTooLarge", len(pdus), err)
			}
			for _, want := range []string{h.addr, oidHrProcessorEntry, tc.wantInReason} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if n := h.requests.Load(); n > tc.maxRequests {
				t.Errorf("the agent answered %d requests, want at most %d", n, tc.maxRequests)
			}
		})
	}
}

// Every place the poller collects an agent's answer is bounded in bytes: the scalar GET, the
// hrProcessorTable walk and each TCP connection table walk, also from an Agent that ignores
// its budget.
func TestByteBounds(t *testing.T) {
	big := func(oid string) gosnmp.SnmpPDU {
		return gosnmp.SnmpPDU{Name: oid, Type: gosnmp.OctetString, Value: []byte(strings.Repeat("x", 8000))}
	}
	bigRows := func(n, valueLen int) []gosnmp.SnmpPDU {
		rows := processorRows(n)
		for i := range rows[:n] {
			rows[i].Value = strings.Repeat("1", valueLen) // an OID value, as gosnmp gives hrProcessorFrwID
		}
		return rows
	}
	conn := func(n int) Target { t := v2cTarget(80); t.MaxWalkBytes = n; return t }
	tests := []struct {
		name      string
		target    Target
		scalars   func([]gosnmp.SnmpPDU) []gosnmp.SnmpPDU
		walks     map[string][]gosnmp.SnmpPDU
		ignoreMax bool
		contains  []string // nil: the poll succeeds
	}{
		{"one huge FrwID", v2cTarget(), nil, map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: append(processorRows(2), big(oidHrProcessorEntry+".1.9"))}, false,
			[]string{"192.0.2.7:161", oidHrProcessorEntry, "is 80", "more than 256"}},
		{"one huge FrwID, Agent ignoring its budget", v2cTarget(), nil, map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: append(processorRows(2), big(oidHrProcessorEntry+".1.9"))}, true,
			[]string{"192.0.2.7:161", oidHrProcessorEntry, "more than 256"}},
		{"8192 processors of 200-byte FrwIDs", v2cTarget(), nil, map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: bigRows(MaxProcessors, 200)}, true,
			[]string{"192.0.2.7:161", oidHrProcessorEntry, fmt.Sprintf("more than %d bytes", MaxProcessorWalkBytes)}},
		{"8192 processors of net-snmp's size fit", v2cTarget(), nil, map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(MaxProcessors)}, false, nil},
		{"connection table over its bytes", conn(10_000), nil,
			map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(2), oidTCPConnState: connRows(500)}, false,
			[]string{"192.0.2.7:161", oidTCPConnState, "more than 10000 bytes"}},
		{"RFC 4022 table over its bytes", conn(10_000), nil,
			map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(2), oidTCPConnectionState: connectionRows(500)}, true,
			[]string{"192.0.2.7:161", oidTCPConnectionState, "more than 10000 bytes"}},
		{"huge scalar", v2cTarget(), func(s []gosnmp.SnmpPDU) []gosnmp.SnmpPDU { s[0] = big(s[0].Name); return s },
			map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(2)}, false,
			[]string{"192.0.2.7:161", "get sysUpTime", oidSysUpTime, "more than 256"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := goodScalars()
			if tc.scalars != nil {
				sc = tc.scalars(sc)
			}
			a := &fakeAgent{scalars: sc, walks: tc.walks, errs: map[string]error{}, ignoreMax: tc.ignoreMax}
			s, err := mustPoller(t, tc.target, a).Poll(context.Background())
			if tc.contains == nil {
				if err != nil {
					t.Fatalf("Poll = %+v, %v", s, err)
				}
				return
			}
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			for _, c := range tc.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error %q does not name %q", err, c)
				}
			}
		})
	}
}

// A GET answered with more varbinds than were asked for is refused before it is parsed.
func TestGetExtraVarbinds(t *testing.T) {
	a := &fakeAgent{scalars: goodScalars(), walks: map[string][]gosnmp.SnmpPDU{oidHrProcessorEntry: processorRows(2)}, errs: map[string]error{}}
	p := mustPoller(t, v2cTarget(), &extraGet{a})
	_, err := p.Poll(context.Background())
	if !errors.Is(err, ErrTooManyRows) || !strings.Contains(err.Error(), "192.0.2.7:161") || !strings.Contains(err.Error(), "get sysUpTime") {
		t.Fatalf("err = %v, want ErrTooManyRows naming the agent and the GET", err)
	}
}

// extraGet answers each GET with its varbinds twice.
type extraGet struct{ *fakeAgent }

func (e *extraGet) Get(ctx context.Context, oids []string) ([]gosnmp.SnmpPDU, error) {
	p, err := e.fakeAgent.Get(ctx, oids)
	return append(p, p...), err
}
