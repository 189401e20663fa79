package sample

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// countSampler is an exact counter that returns what the test sets.
type countSampler struct {
	n     uint32
	err   error
	calls int
}

func (c *countSampler) Provides() Field { return FieldConns }
func (c *countSampler) Sample(context.Context) (Values, error) {
	c.calls++
	if c.err != nil {
		return Values{}, c.err
	}
	return Values{Known: FieldConns, Conns: c.n, ConnsVia: ConnsViaNetlink}, nil
}

// snmpWith is a /proc/net/snmp whose Tcp CurrEstab is n.
func snmpWith(n int) []byte {
	return fmt.Appendf(nil, "Ip: Forwarding DefaultTTL\nIp: 1 64\n"+
		"Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs\n"+
		"Tcp: 1 200 120000 -1 10 20 0 0 %d 100\nUdp: InDatagrams\nUdp: 5\n", n)
}

// TestInFlightCalibrated steps a calibrated count through samples: each step sets the exact
// count, the namespace's running count and the clock, and says what the sample must read
// and whether the exact counter was asked.
func TestInFlightCalibrated(t *testing.T) {
	type step struct {
		at       time.Duration // since the start
		exact    uint32
		estab    int
		snmpErr  bool
		want     uint32
		wantVia  string // prefix of ConnsVia
		wantCall bool   // the exact counter was asked
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the offset carries the other connections", []step{
			{at: 0, exact: 5, estab: 12, want: 5, wantVia: ConnsViaNetns, wantCall: true},
			{at: 50 * time.Millisecond, exact: 99, estab: 15, want: 8, wantVia: ConnsViaNetns},
			{at: 100 * time.Millisecond, exact: 99, estab: 6, want: 0, wantVia: ConnsViaNetns},
			// Below the offset: the next sample counts exactly again.
			{at: 150 * time.Millisecond, exact: 2, estab: 7, want: 2, wantVia: ConnsViaNetns, wantCall: true},
			{at: 200 * time.Millisecond, exact: 99, estab: 9, want: 4, wantVia: ConnsViaNetns},
		}},
		{"recalibrates every second", []step{
			{at: 0, exact: 5, estab: 12, want: 5, wantVia: ConnsViaNetns, wantCall: true},
			{at: 999 * time.Millisecond, exact: 6, estab: 13, want: 6, wantVia: ConnsViaNetns},
			{at: time.Second, exact: 6, estab: 20, want: 6, wantVia: ConnsViaNetns, wantCall: true},
			{at: 1050 * time.Millisecond, exact: 0, estab: 21, want: 7, wantVia: ConnsViaNetns},
		}},
		{"a clock that goes back recalibrates", []step{
			{at: time.Second, exact: 5, estab: 12, want: 5, wantVia: ConnsViaNetns, wantCall: true},
			{at: 500 * time.Millisecond, exact: 3, estab: 12, want: 3, wantVia: ConnsViaNetns, wantCall: true},
		}},
		{"churning neighbours end the running count", []step{
			{at: 0, exact: 5, estab: 12, want: 5, wantVia: ConnsViaNetns, wantCall: true},
			{at: 1 * time.Second, exact: 5, estab: 30, want: 5, wantVia: ConnsViaNetns, wantCall: true},    // off by 18: strike 1
			{at: 2 * time.Second, exact: 5, estab: 60, want: 5, wantVia: ConnsViaNetns, wantCall: true},    // strike 2
			{at: 3 * time.Second, exact: 5, estab: 100, want: 5, wantVia: ConnsViaNetlink, wantCall: true}, // strike 3: exact for good
			{at: 3050 * time.Millisecond, exact: 6, estab: 100, want: 6, wantVia: ConnsViaNetlink + " (the namespace's running count was off", wantCall: true},
		}},
		{"one burst between the two reads is one strike", []step{
			{at: 0, exact: 5, estab: 12, want: 5, wantVia: ConnsViaNetns, wantCall: true},
			{at: 1 * time.Second, exact: 5, estab: 30, want: 5, wantVia: ConnsViaNetns, wantCall: true}, // strike 1, offset 25
			{at: 2 * time.Second, exact: 5, estab: 30, want: 5, wantVia: ConnsViaNetns, wantCall: true}, // on target: strikes reset
			{at: 3 * time.Second, exact: 5, estab: 60, want: 5, wantVia: ConnsViaNetns, wantCall: true}, // strike 1
			{at: 4 * time.Second, exact: 5, estab: 60, want: 5, wantVia: ConnsViaNetns, wantCall: true},
			{at: 4050 * time.Millisecond, exact: 0, estab: 61, want: 6, wantVia: ConnsViaNetns},
		}},
		{"a large count tolerates a quarter", []step{
			{at: 0, exact: 400, estab: 410, want: 400, wantVia: ConnsViaNetns, wantCall: true},
			{at: 1 * time.Second, exact: 400, estab: 500, want: 400, wantVia: ConnsViaNetns, wantCall: true}, // off by 90 < 100
			{at: 2 * time.Second, exact: 400, estab: 600, want: 400, wantVia: ConnsViaNetns, wantCall: true},
			{at: 3 * time.Second, exact: 400, estab: 700, want: 400, wantVia: ConnsViaNetns, wantCall: true},
			{at: 3050 * time.Millisecond, exact: 0, estab: 710, want: 410, wantVia: ConnsViaNetns},
		}},
		{"an unreadable /proc/net/snmp falls back to exact", []step{
			{at: 0, exact: 5, estab: 12, snmpErr: true, want: 5, wantVia: ConnsViaNetlink + " (/proc/net/snmp: ", wantCall: true},
			{at: 50 * time.Millisecond, exact: 6, estab: 12, want: 6, wantVia: ConnsViaNetlink + " (/proc/net/snmp: ", wantCall: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
			exact := &countSampler{}
			var now time.Time
			var snmp []byte
			var snmpErr error
			f := &InFlight{Exact: exact, Now: func() time.Time { return now },
				Snmp: func() ([]byte, error) { return snmp, snmpErr }}
			for i, s := range tt.steps {
				now, exact.n, snmp = start.Add(s.at), s.exact, snmpWith(s.estab)
				snmpErr = nil
				if s.snmpErr {
					snmpErr = errors.New("permission denied")
				}
				calls := exact.calls
				v, err := f.Sample(context.Background())
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if !v.Has(FieldConns) || v.Conns != s.want {
					t.Errorf("step %d: conns %d (known %v), want %d", i, v.Conns, v.Known, s.want)
				}
				if !strings.HasPrefix(v.ConnsVia, s.wantVia) {
					t.Errorf("step %d: via %q, want prefix %q", i, v.ConnsVia, s.wantVia)
				}
				if got := exact.calls > calls; got != s.wantCall {
					t.Errorf("step %d: exact counter asked %v, want %v", i, got, s.wantCall)
				}
			}
		})
	}
}

// TestInFlightExactFailure: a failed exact count is an error (no report), never a count made
// up from the running one, and the next sample tries to calibrate again.
func TestInFlightExactFailure(t *testing.T) {
	exact := &countSampler{err: errors.New("sock_diag: EPERM")}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f := &InFlight{Exact: exact, Now: func() time.Time { return now },
		Snmp: func() ([]byte, error) { return snmpWith(40), nil }}
	if _, err := f.Sample(context.Background()); err == nil {
		t.Fatal("a failed calibration gave a count")
	}
	exact.err, exact.n = nil, 3
	now = now.Add(10 * time.Millisecond)
	v, err := f.Sample(context.Background())
	if err != nil || v.Conns != 3 || exact.calls != 2 {
		t.Fatalf("after the failure: %d, %v, %d exact calls; want 3 counted exactly", v.Conns, err, exact.calls)
	}
	if _, err := (&InFlight{}).Sample(context.Background()); err == nil {
		t.Fatal("no exact counter: no error")
	}
}

func TestParseCurrEstab(t *testing.T) {
	tests := []struct {
		name, in string
		want     int64
		err      string
	}{
		{"the kernel's", string(snmpWith(17)), 17, ""},
		{"no newline at the end", "Tcp: CurrEstab InSegs\nTcp: 3 9", 3, ""},
		{"no Tcp lines", "Ip: Forwarding\nIp: 1\n", 0, "no Tcp lines"},
		{"names only", "Tcp: CurrEstab\n", 0, "no Tcp lines"},
		{"no CurrEstab", "Tcp: InSegs\nTcp: 9\n", 0, "no Tcp CurrEstab"},
		{"a value short", "Tcp: InSegs CurrEstab\nTcp: 9\n", 0, "2 Tcp field names but 1 values"},
		{"negative", "Tcp: CurrEstab\nTcp: -1\n", 0, "is not a count"},
		{"not a number", "Tcp: CurrEstab\nTcp: 1e3\n", 0, "is not a count"},
		{"empty", "", 0, "no Tcp lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCurrEstab([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("%d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func FuzzParseCurrEstab(f *testing.F) {
	f.Add(snmpWith(3))
	f.Add([]byte("Tcp: CurrEstab\nTcp: 99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseCurrEstab(b)
		if err == nil && n < 0 {
			t.Fatalf("negative count %d without an error", n)
		}
	})
}

// TestInFlightChurnIsNoStrike: a calibration whose two reads of the running count differ (the
// service's own connections moved during the count) allows that much more miss before it
// counts as a strike, so a busy backend keeps its cheap count; the offset is taken from the
// two reads' mean.
func TestInFlightChurnIsNoStrike(t *testing.T) {
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	now := start
	exact := &countSampler{n: 10}
	var reads []int
	f := &InFlight{Exact: exact, Now: func() time.Time { return now },
		Snmp: func() ([]byte, error) { n := reads[0]; reads = reads[1:]; return snmpWith(n), nil }}
	// Each calibration reads twice: before and after the exact count. Every other one, the
	// service's connections swing by 20 during the count and the running count's mean is 8
	// off: within the churn, no strike. Without the churn allowance each would be a strike
	// (8 > 4) and the third would end the running count.
	for i := range 6 {
		now = start.Add(time.Duration(i) * time.Second)
		reads = []int{20, 20}
		if i%2 == 1 {
			reads = []int{18, 38}
		}
		v, err := f.Sample(context.Background())
		if err != nil || v.Conns != 10 || f.exactFor != "" {
			t.Fatalf("calibration %d: %d, %v, exact for %q", i, v.Conns, err, f.exactFor)
		}
	}
	// The last offset is the reads' mean (28) less the count (10): a read of 30 is 12.
	now = now.Add(50 * time.Millisecond)
	reads = []int{30}
	if v, _ := f.Sample(context.Background()); v.Conns != 12 || v.ConnsVia != ConnsViaNetns {
		t.Fatalf("between calibrations: %d via %q, want 12 via the running count", v.Conns, v.ConnsVia)
	}
}
