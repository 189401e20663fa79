package main

import (
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    uint64
		wantErr bool
	}{
		{"plain", "1234 (snmpd) S 1 1234 1234 0 -1 4194560 900 0 0 0 17 25 0 0 20 0 1 0 100 1000 200", 42, false},
		{"name with space and paren", "99 (a b) c) R 1 99 99 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0", 7, false},
		{"no paren", "99 a R 1", 0, true},
		{"short", "99 (x) R 1 2 3", 0, true},
		{"bad utime", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u 4 0", 0, true},
		{"bad stime", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 3 s 0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatTicks(tt.line)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("got %d ticks, want %d", got, tt.want)
			}
		})
	}
}

func FuzzParseStatTicks(f *testing.F) {
	f.Add("1234 (snmpd) S 1 1234 1234 0 -1 4194560 900 0 0 0 17 25 0 0 20 0 1 0")
	f.Add("99 (a b) c) R 1 99 99 0 -1 0 0 0 0 0 3 4 0 0")
	f.Add(")")
	f.Fuzz(func(t *testing.T, line string) {
		n, err := parseStatTicks(line)
		if err != nil && n != 0 {
			t.Fatalf("error %v with %d ticks", err, n)
		}
	})
}

func TestParseCounts(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"1,10,50", []int{1, 10, 50}, false},
		{" 5 ", []int{5}, false},
		{"0", nil, true},
		{"1,,2", nil, true},
		{"1001", nil, true},
		{"x", nil, true},
	}
	for _, tt := range tests {
		got, err := parseCounts(tt.in)
		if (err != nil) != tt.wantErr {
			t.Fatalf("parseCounts(%q) err = %v, wantErr %v", tt.in, err, tt.wantErr)
		}
		if len(got) != len(tt.want) {
			t.Fatalf("parseCounts(%q) = %v, want %v", tt.in, got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("parseCounts(%q) = %v, want %v", tt.in, got, tt.want)
			}
		}
	}
}

func TestPerUpdateAndMarginal(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		p        phase
		idle     time.Duration
		wantPer  time.Duration
		a, b     phase
		wantMarg time.Duration
		wantOK   bool
	}{
		{"idle subtracted", phase{cpu: 10 * ms, updates: 10}, 2 * ms, 800 * time.Microsecond,
			phase{cpu: 10 * ms, updates: 10}, phase{cpu: 50 * ms, updates: 90}, 500 * time.Microsecond, true},
		{"idle above phase clamps to 0", phase{cpu: ms, updates: 4}, 2 * ms, 0,
			phase{cpu: 5 * ms, updates: 10}, phase{cpu: 5 * ms, updates: 10}, 0, false},
		{"no updates", phase{cpu: ms}, 0, 0,
			phase{cpu: 5 * ms, updates: 20}, phase{cpu: 9 * ms, updates: 10}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := perUpdate(tt.p, tt.idle); got != tt.wantPer {
				t.Errorf("perUpdate = %v, want %v", got, tt.wantPer)
			}
			got, ok := marginal(tt.a, tt.b)
			if got != tt.wantMarg || ok != tt.wantOK {
				t.Errorf("marginal = %v, %v, want %v, %v", got, ok, tt.wantMarg, tt.wantOK)
			}
		})
	}
}

func TestParseSockstatTCP(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr bool
	}{
		{"real", "sockets: used 43\nTCP: inuse 5 orphan 0 tw 60 alloc 9 mem 3\nUDP: inuse 2 mem 1\n", 65, false},
		{"no tcp line", "sockets: used 43\nUDP: inuse 2 mem 1\n", 0, true},
		{"no tw", "TCP: inuse 5 orphan 0\n", 0, true},
		{"bad number", "TCP: inuse x orphan 0 tw 1\n", 0, true},
		{"negative", "TCP: inuse -1 tw 1\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSockstatTCP(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParseSockstatTCP(f *testing.F) {
	f.Add("sockets: used 43\nTCP: inuse 5 orphan 0 tw 60 alloc 9 mem 3\n")
	f.Add("TCP: inuse 1 tw")
	f.Fuzz(func(t *testing.T, text string) {
		n, err := parseSockstatTCP(text)
		if err == nil && n < 0 {
			t.Fatalf("negative count %d without error", n)
		}
	})
}
