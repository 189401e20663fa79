package configs

import (
	"strings"
	"testing"
	"time"
)

func TestAddr(t *testing.T) {
	tests := []struct {
		s    string
		rule Addr
		want string // substring of the problem; "" for none
	}{
		{"127.0.0.1:9000", Addr{Host: true}, ""},
		{":9000", Addr{}, ""},
		{":9000", Addr{Host: true}, "has no host"},
		{"[::1]:9000", Addr{Host: true}, ""},
		{"localhost", Addr{}, "is not host:port"},
		{"x:0", Addr{}, "port 0 is outside 1-65535"},
		{"x:0", Addr{Port0: true}, ""},
		{"x:65536", Addr{Port0: true}, "port 65536 is outside 0-65535"},
		{"x:http", Addr{}, `port "http" is not a number`},
		{"", Addr{}, "is not host:port"},
	}
	for _, tt := range tests {
		var p Problems
		p.Addr("k", tt.s, tt.rule)
		err := p.Err()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q %+v: %v, want no problem", tt.s, tt.rule, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "k: ")):
			t.Errorf("%q %+v: %v, want k: …%s", tt.s, tt.rule, err, tt.want)
		}
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{time.Second, ""},
		{100 * time.Millisecond, ""},
		{time.Minute, ""},
		{5, "5ns is below the minimum 100ms (write durations as strings"},
		{2 * time.Minute, "2m0s is above the maximum 1m0s"},
	}
	for _, tt := range tests {
		var p Problems
		p.Duration("interval", tt.d, 100*time.Millisecond, time.Minute)
		err := p.Err()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), "interval: "+tt.want)) {
			t.Errorf("%v: %v, want %q", tt.d, err, tt.want)
		}
	}
}

func TestPositive(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{{time.Nanosecond, ""}, {0, "timeout: 0s must be a positive duration"}, {-time.Second, "timeout: -1s must be a positive"}} {
		var p Problems
		p.Positive("timeout", tt.d)
		err := p.Err()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v: %v, want %q", tt.d, err, tt.want)
		}
	}
}
