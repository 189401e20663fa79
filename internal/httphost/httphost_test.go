package httphost

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, want, err string // want is String() of the result
	}{
		{"127.0.0.1:9090", "127.0.0.1:9090", ""},
		{"127.0.0.1", "127.0.0.1", ""},
		{"localhost:9090", "localhost:9090", ""},
		{"LocalHost:9090", "localhost:9090", ""},
		{"[::1]:9090", "[::1]:9090", ""},
		{"[::1]", "[::1]", ""},
		{"fw.example.net", "fw.example.net", ""},
		{"fw-1.example.net:443", "fw-1.example.net:443", ""},
		{"", "", "empty"},
		{"::1", "", "brackets"},
		{"::1:9090", "", "brackets"},
		{"[::1", "", "no ]"},
		{"[::1]x", "", "text after ]"},
		{"[::1]:", "", "empty port"},
		{"[fe80::1%eth0]:1", "", "zone"},
		{"[127.0.0.1]:1", "", "IPv6"},
		{"localhost:", "", "empty port"},
		{"localhost:0", "", "port"},
		{"localhost:65536", "", "port"},
		{"localhost:09090", "", "port"},
		{"localhost:+909", "", "port"},
		{"localhost.", "", "trailing dot"},
		{"*.example.net", "", "wildcards"},
		{"a_b.example", "", "DNS name"},
		{"rebind%2eevil.example", "", "DNS name"},
		{"-a.example", "", "DNS name"},
		{"a..example", "", "DNS name"},
		{"127.1:9090", "", "dotted-quad"},
		{"2130706433", "", "dotted-quad"},
		{"0x7f.0.0.1", "", "dotted-quad"},
		{"user@localhost", "", "DNS name"},
		{"localhost/x", "", "DNS name"},
		{strings.Repeat("a", 300), "", "longer"},
		{strings.Repeat("a", 64) + ".example", "", "DNS name"},
	} {
		h, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %v, %v; want an error with %q", c.in, h, err, c.err)
			}
			continue
		}
		if err != nil || h.String() != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", c.in, h, err, c.want)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts writes back to a value it parses to the
// same Host (so a configured name and a browser's Host compare exactly).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"127.0.0.1:9090", "[::1]:80", "localhost", "Fw.Example.NET:443", "[::ffff:127.0.0.1]:1", "a:b:c", "[", "]:", "1.2.3.4.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(h.String())
		if err != nil || again != h {
			t.Fatalf("Parse(%q) = %#v; its String %q parses to %#v, %v", s, h, h.String(), again, err)
		}
		if h.Name != "" && h.Addr.IsValid() {
			t.Fatalf("both a name and an address: %#v", h)
		}
	})
}
