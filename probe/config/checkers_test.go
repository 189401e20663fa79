package config

import (
	"strings"
	"testing"
)

func TestParseCheckers(t *testing.T) {
	got, err := ParseCheckers([]string{"10.0.0.5", "192.0.2.0/28", "::1", "::ffff:10.0.0.6", "2001:db8::/64"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.5/32", "192.0.2.0/28", "::1/128", "10.0.0.6/32", "2001:db8::/64"}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("[%d] = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []struct{ in, want string }{
		{"haproxy.local", `[0] "haproxy.local"`},
		{"10.0.0.1/24", "host bits"},
		{"10.0.0.0/33", "[0]"},
		{"fe80::1%eth0", "zone"},
		{"", "[0]"},
	} {
		if _, err := ParseCheckers([]string{bad.in}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseCheckers(%q) = %v, want an error with %q", bad.in, err, bad.want)
		}
	}
}
