package api

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestHostPolicy(t *testing.T) {
	for _, c := range []struct {
		listen  string
		allowed []string
		host    string
		ok      bool
	}{
		{"127.0.0.1:9090", nil, "127.0.0.1:9090", true},
		{"127.0.0.1:9090", nil, "localhost:9090", true},
		{"127.0.0.1:9090", nil, "localhost", false}, // port 80
		{"127.0.0.1:9090", nil, "10.0.0.1:9090", false},
		{"127.0.0.1:80", nil, "127.0.0.1", true},
		{"127.0.0.1:80", nil, "localhost", true},
		{"[::1]:9090", nil, "[::1]:9090", true},
		{"[::1]:9090", nil, "127.0.0.1:9090", false},
		{"[::ffff:127.0.0.1]:9090", nil, "127.0.0.1:9090", true},
		{"0.0.0.0:9090", nil, "192.0.2.7:9090", true}, // any local address reaches an unspecified listener
		{"0.0.0.0:9090", nil, "[2001:db8::1]:9090", true},
		{"0.0.0.0:9090", nil, "192.0.2.7:9091", false},
		{"0.0.0.0:9090", nil, "controller.example.net:9090", false},
		{"[::]:9090", nil, "controller.example.net:9090", false},
		{"0.0.0.0:9090", []string{"controller.example.net"}, "controller.example.net:9090", true},
		{"0.0.0.0:9090", []string{"controller.example.net"}, "Controller.Example.Net", true},
		{"0.0.0.0:9090", []string{"controller.example.net:443"}, "controller.example.net", false},
		{"0.0.0.0:9090", []string{"controller.example.net:443"}, "controller.example.net:443", true},
		{"0.0.0.0:9090", []string{"controller.example.net"}, "evil.controller.example.net:9090", false},
		{"0.0.0.0:9090", []string{"controller.example.net"}, "controller.example.net.evil.example:9090", false},
		{"0.0.0.0:9090", []string{"[2001:db8::5]"}, "[2001:db8::5]:1", true},
	} {
		ln, _ := net.ResolveTCPAddr("tcp", c.listen)
		p, err := newHostPolicy(ln, c.allowed)
		if err != nil {
			t.Fatal(err)
		}
		if why := p.check(c.host); (why == "") != c.ok {
			t.Errorf("listen %s allowed %v: Host %q: %q, want ok=%v", c.listen, c.allowed, c.host, why, c.ok)
		}
	}
}

func TestCrossSite(t *testing.T) {
	for _, c := range []struct {
		host    string
		headers map[string][]string
		ok      bool
	}{
		{"127.0.0.1:9090", nil, true},
		{"127.0.0.1:9090", map[string][]string{"Origin": {"http://127.0.0.1:9090"}}, true},
		{"fw.example.net", map[string][]string{"Origin": {"https://fw.example.net"}}, true}, // a TLS proxy in front
		{"fw.example.net", map[string][]string{"Origin": {"https://FW.example.net"}}, true},
		{"127.0.0.1:9090", map[string][]string{"Origin": {"http://127.0.0.1:9091"}}, false},
		{"127.0.0.1:9090", map[string][]string{"Origin": {"http://user@127.0.0.1:9090"}}, false},
		{"127.0.0.1:9090", map[string][]string{"Origin": {"http://127.0.0.1:9090?"}}, false},
		{"127.0.0.1:9090", map[string][]string{"Origin": {""}}, false},
		{"127.0.0.1:9090", map[string][]string{"Origin": {"null"}}, false},
		{"127.0.0.1:9090", map[string][]string{"Origin": {"chrome-extension://abc"}}, false},
		{"127.0.0.1:9090", map[string][]string{"Sec-Fetch-Site": {"same-origin"}}, true},
		{"127.0.0.1:9090", map[string][]string{"Sec-Fetch-Site": {"none"}}, true},
		{"127.0.0.1:9090", map[string][]string{"Sec-Fetch-Site": {"same-site"}}, false},
		{"127.0.0.1:9090", map[string][]string{"Sec-Fetch-Site": {"cross-site"}}, false},
		{"127.0.0.1:9090", map[string][]string{"Sec-Fetch-Site": {"Same-Origin"}}, false},
		{"127.0.0.1:9090", map[string][]string{"Sec-Fetch-Site": {"same-origin", "cross-site"}}, false},
		{"127.0.0.1:9090", map[string][]string{"Sec-Fetch-Site": {""}}, false},
	} {
		r := &http.Request{Host: c.host, Header: http.Header(c.headers)}
		if why := crossSite(r); (why == "") != c.ok {
			t.Errorf("Host %s headers %v: %q, want ok=%v", c.host, c.headers, why, c.ok)
		}
	}
}

// FuzzGuard: the checks never panic, a refusal always says what, and an accepted Origin is
// one whose host is the request's Host.
func FuzzGuard(f *testing.F) {
	for _, s := range [][2]string{{"127.0.0.1:9090", "http://127.0.0.1:9090"}, {"localhost:9090", "null"}, {"[::1]:9090", "http://[::1]:9090"}, {"x", "http://x:"}} {
		f.Add(s[0], s[1])
	}
	ln := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}
	p, err := newHostPolicy(ln, []string{"fw.example.net"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host, origin string) {
		if why := p.check(host); why == "" {
			h := strings.ToLower(host)
			if !strings.HasPrefix(h, "127.0.0.1:9090") && !strings.HasPrefix(h, "localhost:9090") && !strings.HasPrefix(h, "fw.example.net") {
				t.Fatalf("Host %q accepted", host)
			}
		}
		r := &http.Request{Host: host, Header: http.Header{"Origin": {origin}}}
		if why := crossSite(r); why == "" && !sameOrigin(origin, host) {
			t.Fatalf("Origin %q accepted for Host %q", origin, host)
		} else if why != "" && !strings.Contains(why, "Origin") {
			t.Fatalf("refusal %q does not name the Origin", why)
		}
	})
}

// FuzzEmptyBody: a drain's body is accepted only when it says nothing.
func FuzzEmptyBody(f *testing.F) {
	for _, s := range []string{"", " \n", "{}", "{ }", `{"a":1}`, "[]", "{}{}", "null", "{"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if emptyBody(strings.NewReader(body)) != nil {
			return
		}
		b := strings.Map(func(r rune) rune {
			if strings.ContainsRune(" \t\r\n", r) {
				return -1
			}
			return r
		}, body)
		if b != "" && b != "{}" {
			t.Fatalf("body %q accepted", body)
		}
	})
}
