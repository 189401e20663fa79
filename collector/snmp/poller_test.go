package snmp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
)

func v2cTarget(ports ...uint16) Target {
	return Target{Address: "192.0.2.7:161", Version: "v2c", Community: "c", Timeout: time.Second, Retries: 1, ServicePorts: ports}
}

func v3Target() Target {
	return Target{Address: "192.0.2.7:161", Version: "v3", User: "fwuser", AuthProtocol: "SHA", AuthPassphrase: "authpass1",
		PrivProtocol: "AES", PrivPassphrase: "privpass1", Timeout: time.Second, Retries: 2}
}

func mustPoller(t *testing.T, tg Target, a Agent) *Poller {
	t.Helper()
	p, err := NewPollerWithAgent(tg, a)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPollRecordedSequence replays one real agent's life: its first answer
// (counters 0, no hrProcessorLoad), a second one 7 s later (first non-zero
// counters), a third after a busy loop, and the third again (the agent's 5 s
// refresh had not come yet).
func TestPollRecordedSequence(t *testing.T) {
	agent := recordedAgent(t, "fresh")
	fTCP, _ := loadFixture(t, "fresh_tcpconn")
	p := mustPoller(t, v2cTarget(), agent)
	ctx := context.Background()

	steps := []struct {
		prefix     string
		wantKnown  bool
		wantSource string
	}{
		{"fresh", false, ""},
		{"t1", false, ""}, // first non-zero counters: a baseline, no delta
		{"t2", true, CPUSourceUCDRaw},
		{"t2", true, CPUSourceUCDRaw}, // counters unchanged: last delta reused
	}
	var utils []float64
	for i, st := range steps {
		a := recordedAgent(t, st.prefix)
		agent.scalars, agent.walks = a.scalars, a.walks
		s, err := p.Poll(ctx)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, st.prefix, err)
		}
		if s.CPUKnown != st.wantKnown || s.CPUSource != st.wantSource {
			t.Errorf("step %d (%s): CPUKnown %v source %q; want %v %q", i, st.prefix, s.CPUKnown, s.CPUSource, st.wantKnown, st.wantSource)
		}
		fh, _ := loadFixture(t, st.prefix+"_hrprocessor")
		rows := 0
		for _, p := range fh.PDUs {
			if strings.HasPrefix(p.OID, oidHrProcessorEntry+".1.") {
				rows++
			}
		}
		if s.CPUCount != float64(rows) || rows == 0 {
			t.Errorf("step %d: CPUCount %v, want %d recorded rows", i, s.CPUCount, rows)
		}
		if s.ConnSource != ConnSourceTCPCurrEstab {
			t.Errorf("step %d: ConnSource %q without service ports", i, s.ConnSource)
		}
		utils = append(utils, s.CPUUtil)
	}
	if utils[2] <= 0.5 || utils[2] > 1 || utils[3] != utils[2] {
		t.Errorf("CPU utils %v: want step 2 in (0.5,1] (busy loop) and step 3 equal to it", utils)
	}
	// Without service ports no tcpConnTable walk is made.
	for _, c := range agent.calls {
		if c == oidTCPConnState {
			t.Fatalf("walked tcpConnTable without ServicePorts: calls %v (fixture %q)", agent.calls, fTCP.Comment)
		}
	}
}

func TestPollWarmAgent(t *testing.T) {
	f, _ := loadFixture(t, "warm_tcpconn")
	fs, _ := loadFixture(t, "warm_scalars")
	fh, hr := loadFixture(t, "warm_hrprocessor")
	p := mustPoller(t, v2cTarget(f.ListenPort, f.ListenPortDual), recordedAgent(t, "warm"))
	s, err := p.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// First poll of an agent older than a minute: hrProcessorLoad stands in.
	if !s.CPUKnown || s.CPUSource != CPUSourceHRLoad {
		t.Errorf("CPU %v %q, want known from %s", s.CPUKnown, s.CPUSource, CPUSourceHRLoad)
	}
	var sum float64
	var loads int
	for _, p := range fh.PDUs {
		if strings.HasPrefix(p.OID, oidHrProcessorEntry+".2.") {
			sum += p.Value.(float64)
			loads++
		}
	}
	if want := sum / float64(loads) / 100; s.CPUUtil != want {
		t.Errorf("CPUUtil %v, want mean recorded load %v", s.CPUUtil, want)
	}
	if want := float64(len(hr) - loads); s.CPUCount != want {
		t.Errorf("CPUCount %v, want %v rows", s.CPUCount, want)
	}
	if want := fixtureValue(t, fs, oidMemTotalReal) * 1024; s.MemBytes != want {
		t.Errorf("MemBytes %d, want %d", s.MemBytes, want)
	}
	// Both listeners' connections, the dual-stack one's from tcpConnectionTable.
	if s.ConnSource != ConnSourceTCPConnectionTable || int(s.Conns) != 2*f.Conns {
		t.Errorf("Conns %d from %q, want %d from %s", s.Conns, s.ConnSource, 2*f.Conns, ConnSourceTCPConnectionTable)
	}
}

func TestPollConnTables(t *testing.T) {
	f, _ := loadFixture(t, "warm_tcpconn")
	tests := []struct {
		name       string
		ports      []uint16
		dropTables []string // walks that come back empty
		dropEstab  bool
		badTable   string // walk root whose answer is malformed
		wantConns  int
		wantSource string
		wantWalks  []string // TCP tables walked, in order
		wantErr    string
	}{
		{name: "IPv4 listener: legacy table only", ports: []uint16{f.ListenPort},
			wantConns: f.Conns, wantSource: ConnSourceTCPConnTable, wantWalks: []string{oidTCPConnState}},
		{name: "duplicate ports count once", ports: []uint16{f.ListenPort, f.ListenPort},
			wantConns: f.Conns, wantSource: ConnSourceTCPConnTable, wantWalks: []string{oidTCPConnState}},
		{name: "dual-stack listener: both tables", ports: []uint16{f.ListenPortDual},
			wantConns: f.Conns, wantSource: ConnSourceTCPConnectionTable, wantWalks: []string{oidTCPConnState, oidTCPConnectionState}},
		{name: "no legacy table: modern one", ports: []uint16{f.ListenPort, f.ListenPortDual}, dropTables: []string{oidTCPConnState},
			wantConns: 2 * f.Conns, wantSource: ConnSourceTCPConnectionTable, wantWalks: []string{oidTCPConnState, oidTCPConnectionState}},
		{name: "no modern table: legacy, blind to dual-stack", ports: []uint16{f.ListenPort, f.ListenPortDual}, dropTables: []string{oidTCPConnectionState},
			wantConns: f.Conns, wantSource: ConnSourceTCPConnTable, wantWalks: []string{oidTCPConnState, oidTCPConnectionState}},
		{name: "no tables: tcpCurrEstab", ports: []uint16{f.ListenPort}, dropTables: []string{oidTCPConnState, oidTCPConnectionState},
			wantConns: -1, wantSource: ConnSourceTCPCurrEstab, wantWalks: []string{oidTCPConnState, oidTCPConnectionState}},
		{name: "no tables, no tcpCurrEstab", ports: []uint16{f.ListenPort}, dropTables: []string{oidTCPConnState, oidTCPConnectionState}, dropEstab: true,
			wantErr: "no connection count"},
		{name: "no ports: no walks", wantConns: -1, wantSource: ConnSourceTCPCurrEstab},
		{name: "malformed legacy table", ports: []uint16{f.ListenPort}, badTable: oidTCPConnState, wantErr: "tcpConnState"},
		{name: "malformed modern table", ports: []uint16{f.ListenPortDual}, badTable: oidTCPConnectionState, wantErr: "tcpConnectionState"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := recordedAgent(t, "warm")
			fs, _ := loadFixture(t, "warm_scalars")
			for _, root := range tc.dropTables {
				a.walks[root] = nil
			}
			if tc.badTable != "" {
				a.walks[tc.badTable] = append(a.walks[tc.badTable], gosnmp.SnmpPDU{Name: tc.badTable + ".1", Type: gosnmp.Integer, Value: 5})
			}
			if tc.dropEstab {
				var kept []gosnmp.SnmpPDU
				for _, p := range a.scalars {
					if p.Name != oidTCPCurrEstab {
						kept = append(kept, p)
					}
				}
				a.scalars = kept
			}
			s, err := mustPoller(t, v2cTarget(tc.ports...), a).Poll(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "192.0.2.7:161") {
					t.Fatalf("err = %v, want one naming the address and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantConns := uint32(tc.wantConns)
			if tc.wantConns < 0 {
				wantConns = uint32(fixtureValue(t, fs, oidTCPCurrEstab))
			}
			if s.ConnSource != tc.wantSource || s.Conns != wantConns {
				t.Errorf("Conns %d from %q, want %d from %q", s.Conns, s.ConnSource, wantConns, tc.wantSource)
			}
			var walks []string
			for _, c := range a.calls {
				if c == oidTCPConnState || c == oidTCPConnectionState {
					walks = append(walks, c)
				}
			}
			if strings.Join(walks, " ") != strings.Join(tc.wantWalks, " ") {
				t.Errorf("walked %v, want %v", walks, tc.wantWalks)
			}
		})
	}
}

// scalarsWith returns warm scalars with the ssCpuRaw counters and uptime replaced.
func scalarsWith(t *testing.T, c cpuTicks, uptime uint32) []gosnmp.SnmpPDU {
	t.Helper()
	_, base := loadFixture(t, "warm_scalars")
	for i := range base {
		switch base[i].Name {
		case oidSysUpTime:
			base[i].Value = uptime
		case oidSsCpuRawUser, oidSsCpuRawNice, oidSsCpuRawSystem, oidSsCpuRawIdle,
			oidSsCpuRawWait, oidSsCpuRawInterrupt, oidSsCpuRawSoftIRQ, oidSsCpuRawSteal:
			base[i].Value = uint(*c.field(base[i].Name))
		}
	}
	return base
}

func TestPollCPUBaseline(t *testing.T) {
	a := recordedAgent(t, "fresh") // no hrProcessorLoad: CPU unknown unless a delta exists
	p := mustPoller(t, v2cTarget(), a)
	poll := func(c cpuTicks, uptime uint32) Sample {
		t.Helper()
		a.scalars = scalarsWith(t, c, uptime)
		s, err := p.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	poll(cpuTicks{user: 100, idle: 100}, 1000)
	if s := poll(cpuTicks{user: 150, idle: 150}, 1500); !s.CPUKnown || s.CPUUtil != 0.5 {
		t.Fatalf("after delta: %+v, want util 0.5", s)
	}
	// A failed poll must not move the baseline.
	a.errs[oidHrProcessorEntry] = errors.New("boom")
	a.scalars = scalarsWith(t, cpuTicks{user: 1000, idle: 150}, 1600)
	if _, err := p.Poll(context.Background()); err == nil || !strings.Contains(err.Error(), "hrProcessorTable") {
		t.Fatalf("err = %v, want the walk step named", err)
	}
	delete(a.errs, oidHrProcessorEntry)
	if s := poll(cpuTicks{user: 150, idle: 250}, 2000); s.CPUUtil != 0 {
		t.Fatalf("after failed poll: util %v, want 0 (delta from the last good poll)", s.CPUUtil)
	}
	// Agent restart (uptime went back): the next delta is not trusted.
	if s := poll(cpuTicks{user: 10, idle: 10}, 100); s.CPUKnown {
		t.Fatalf("after restart: %+v, want CPU unknown", s)
	}
	if s := poll(cpuTicks{user: 40, idle: 20}, 600); !s.CPUKnown || s.CPUUtil != 0.75 {
		t.Fatalf("after restart and a delta: %+v, want util 0.75", s)
	}
	// Counters back to 0 (a restarted agent before its first refresh, uptime
	// not decreased here): baseline dropped, CPU unknown until a new delta.
	if s := poll(cpuTicks{}, 700); s.CPUKnown {
		t.Fatalf("all-zero counters: %+v, want CPU unknown", s)
	}
	if s := poll(cpuTicks{user: 5000, idle: 5000}, 800); s.CPUKnown {
		t.Fatalf("first counters after zeros: %+v, want CPU unknown", s)
	}
	if s := poll(cpuTicks{user: 5000, idle: 5100}, 900); !s.CPUKnown || s.CPUUtil != 0 {
		t.Fatalf("delta after zeros: %+v, want util 0", s)
	}
}

func TestPollRequestErrors(t *testing.T) {
	timeout := fmt.Errorf("request timeout (after 2 retries): %w", gosnmp.ErrMaxRetriesExceeded)
	tests := []struct {
		name     string
		target   Target
		failAt   string
		err      error
		is       error
		contains []string
	}{
		{name: "wrong digest", target: v3Target(), failAt: "get", err: gosnmp.ErrWrongDigest, is: ErrAuth,
			contains: []string{"snmp 192.0.2.7:161: v3 authentication failed for user fwuser", "AuthPassphrase"}},
		{name: "unknown user", target: v3Target(), failAt: "get", err: gosnmp.ErrUnknownUsername, is: ErrAuth,
			contains: []string{"v3 authentication failed for user fwuser", "does not know"}},
		{name: "security level", target: v3Target(), failAt: "get", err: gosnmp.ErrUnknownSecurityLevel, is: ErrAuth,
			contains: []string{"authPriv"}},
		{name: "net-snmp report gosnmp cannot authenticate", target: v3Target(), failAt: "get", err: errors.New("incoming packet is not authentic, discarding"), is: ErrAuth,
			contains: []string{"snmp 192.0.2.7:161: v3 authentication failed for user fwuser", "unknown user", "AuthPassphrase"}},
		{name: "v2c never classified as v3 auth", target: v2cTarget(), failAt: "get", err: errors.New("incoming packet is not authentic, discarding"), is: nil,
			contains: []string{"snmp 192.0.2.7:161"}},
		{name: "decryption", target: v3Target(), failAt: "get", err: gosnmp.ErrDecryption, is: ErrAuth,
			contains: []string{"PrivPassphrase"}},
		{name: "v3 timeout hints at priv", target: v3Target(), failAt: "get", err: timeout, is: ErrNoResponse,
			contains: []string{"snmp 192.0.2.7:161", "ssCpuRaw", "3 attempt(s) of 1s", "PrivPassphrase"}},
		{name: "v2c timeout in walk", target: v2cTarget(), failAt: oidHrProcessorEntry, err: timeout, is: ErrNoResponse,
			contains: []string{"snmp 192.0.2.7:161", "walk hrProcessorTable", "2 attempt(s)"}},
		{name: "context deadline", target: v2cTarget(80), failAt: oidTCPConnState, err: context.DeadlineExceeded, is: ErrNoResponse,
			contains: []string{"tcpConnTable", "context deadline"}},
		{name: "modern table walk fails", target: v2cTarget(1), failAt: oidTCPConnectionState, err: timeout, is: ErrNoResponse,
			contains: []string{"walk tcpConnectionTable", ".1.3.6.1.2.1.6.19.1.7"}},
		{name: "other error kept", target: v2cTarget(), failAt: "get", err: errors.New("read udp: connection refused"), is: nil,
			contains: []string{"snmp 192.0.2.7:161", "connection refused"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := recordedAgent(t, "warm")
			a.errs[tc.failAt] = tc.err
			_, err := mustPoller(t, tc.target, a).Poll(context.Background())
			if err == nil {
				t.Fatal("poll succeeded")
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("%v does not wrap %v", err, tc.err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%v is not %v", err, tc.is)
			}
			if tc.is == nil && (errors.Is(err, ErrAuth) || errors.Is(err, ErrNoResponse)) {
				t.Errorf("%v misclassified", err)
			}
			for _, c := range tc.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("%q lacks %q", err, c)
				}
			}
		})
	}
}

func TestNewPollerWithAgent(t *testing.T) {
	if _, err := NewPollerWithAgent(v2cTarget(), nil); err == nil {
		t.Error("nil agent accepted")
	}
	if _, err := NewPollerWithAgent(Target{}, &fakeAgent{}); err == nil {
		t.Error("invalid target accepted")
	}
	a := &fakeAgent{}
	p := mustPoller(t, v2cTarget(), a)
	if err := p.Close(); err != nil || !a.closed {
		t.Errorf("Close: %v, closed %v", err, a.closed)
	}
}

func TestNewPollerRealSession(t *testing.T) {
	// Opening a UDP session sends nothing; Close must release it.
	p, err := NewPoller(Target{Address: "127.0.0.1:9", Version: "v2c", Community: "c", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Poll(context.Background()); err == nil || !strings.Contains(err.Error(), "127.0.0.1:9") {
		t.Fatalf("poll after Close: %v, want an error naming the address", err)
	}
	if _, err := NewPoller(Target{Version: "v2c"}); err == nil {
		t.Fatal("NewPoller accepted an invalid target")
	}
}
