package health

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const testPassword = "Tr0ub4dor-secret"

// A health URL with credentials is checked with them, as basic authentication (http.Client
// does the same), and not with them in the request line.
func TestCheckURLCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pw, ok := r.BasicAuth()
		if !ok || user != "monitor" || pw != testPassword || strings.Contains(r.RequestURI, "@") {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("ready"))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, url string
		ok        bool
	}{
		{"right password", "http://monitor:" + testPassword + "@" + srv.Listener.Addr().String() + "/health", true},
		{"percent-encoded password", "http://monitor:" + strings.Replace(testPassword, "-", "%2D", 1) + "@" + srv.Listener.Addr().String() + "/health", true},
		{"wrong password", "http://monitor:nope@" + srv.Listener.Addr().String() + "/health", false},
		{"no credentials", srv.URL + "/health", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newChecker(t, tc.url, 5*time.Second, "200", "ready").Check(context.Background())
			if r.OK != tc.ok {
				t.Fatalf("got %+v, want ok=%v", r, tc.ok)
			}
			if !tc.ok && r.Status != http.StatusUnauthorized {
				t.Fatalf("got %+v, want 401", r)
			}
		})
	}
}

// No failed check and no refused configuration shows the URL's password: Result.Err goes into
// the push report and the agent-check reply, which others can read.
func TestCheckErrorsRedactPassword(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 503) }))
	defer down.Close()
	hang := rawServer(t, func(c net.Conn) { c.Read(make([]byte, 1)) }) // answers nothing until the check gives up
	withPW := func(hostport, path string) string { return "http://monitor:" + testPassword + "@" + hostport + path }
	checks := []struct {
		name, url, want string
		timeout         time.Duration
	}{
		{"bad status", withPW(down.Listener.Addr().String(), "/h"), "503", 5 * time.Second},
		{"refused", withPW(closedPort(t, "tcp"), "/h"), "refused", 5 * time.Second},
		{"timeout", withPW(strings.TrimPrefix(strings.TrimSuffix(hang, "/health?x=1"), "http://"), "/h"), "timeout", 200 * time.Millisecond},
	}
	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			c := newChecker(t, tc.url, tc.timeout, "200", "")
			r := c.Check(context.Background())
			if r.OK || !strings.Contains(r.Err, tc.want) || !strings.Contains(r.Err, "monitor:xxxxx@") {
				t.Errorf("got %+v, want a failure with %q naming monitor:xxxxx@", r, tc.want)
			}
			for _, shown := range []string{r.Err, c.URL} {
				if strings.Contains(shown, testPassword) {
					t.Errorf("password shown: %q", shown)
				}
			}
		})
	}
	refused := []struct{ name, url string }{
		{"scheme", "ftp://monitor:" + testPassword + "@h/"},
		{"no host", "http://monitor:" + testPassword + "@/x"},
		{"unparsable port", "http://monitor:" + testPassword + "@h:port/"},
		{"control character", "http://monitor:" + testPassword + "@h/\x7f"},
		{"bad escape in the password", "http://monitor:" + testPassword + "%zz@h/"},
	}
	for _, tc := range refused {
		t.Run("New "+tc.name, func(t *testing.T) {
			_, err := New(Spec{URL: tc.url, Timeout: time.Second, ExpectStatus: "200"})
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), testPassword) || !strings.Contains(err.Error(), "xxxxx") {
				t.Errorf("error %q shows the password or names no redacted URL", err)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://h:8080/health", "http://h:8080/health"},
		{"http://monitor@h/", "http://monitor@h/"},
		{"http://monitor:pw@h/x?y=1", "http://monitor:xxxxx@h/x?y=1"},
		{"https://monitor:p%40ss@h/", "https://monitor:xxxxx@h/"},
		{"http://monitor:pw@h:port/", "http://xxxxx@h:port/"},  // does not parse
		{"http://monitor:pw%zz@h/", "http://xxxxx@h/"},         // does not parse
		{"monitor:pw@h/x", "xxxxx@h/x"},                        // opaque
		{"http://a:b@c@h/", "http://a:xxxxx@h/"},               // last '@' ends the userinfo
		{"http://monitor:pa/ss@h/", "http://monitor:pa/ss@h/"}, // a path: no userinfo
		{"", ""},
	}
	for _, tc := range tests {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRedactURL: whatever the URL around it, a password of the userinfo is never shown.
func FuzzRedactURL(f *testing.F) {
	f.Add("http", "monitor", "s3cret", "h:80/x")
	f.Add("https", "", "p@ss", "[::1]:x/")
	f.Fuzz(func(t *testing.T, scheme, user, pw, rest string) {
		if len(pw) < 6 || strings.ContainsAny(pw, "/?#@") || strings.ContainsAny(user, "/?#@:") ||
			strings.Contains(scheme+user+rest, pw) || strings.Contains(redacted, pw) {
			return // only a distinctive password inside the authority is a password
		}
		raw := scheme + "://" + user + ":" + pw + "@" + rest
		if strings.ContainsAny(scheme, "/?#@") {
			return
		}
		// The rest, as url.URL re-encodes it, may spell the password itself: compare with the
		// same URL under another password.
		other := RedactURL(scheme + "://" + user + ":Zq7Zq7@" + rest)
		if got := RedactURL(raw); strings.Count(got, pw) > strings.Count(other, pw) {
			t.Fatalf("RedactURL(%q) = %q shows the password", raw, got)
		}
		if got := Scrub("GET "+raw+": "+raw, raw); strings.Contains(got, pw) {
			t.Fatalf("Scrub shows the password: %q", got)
		}
	})
}
