package config

import (
	"strings"
	"testing"
)

// A health URL's password never shows in a configuration error (printed by -check-config and
// logged at start).
func TestHealthURLErrorsRedactPassword(t *testing.T) {
	const pw = "Tr0ub4dor-secret"
	for _, tc := range []struct{ name, url string }{
		{"scheme", "ftp://monitor:" + pw + "@h/"},
		{"no host", "http://monitor:" + pw + "@/x"},
		{"unparsable port", "http://monitor:" + pw + "@h:port/"},
		{"bad escape", "http://monitor:" + pw + "%zz@h/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, minimal+"[health]\nurl = \""+tc.url+"\"\n"))
			if err == nil || !strings.Contains(err.Error(), "health.url") {
				t.Fatalf("err = %v, want one naming health.url", err)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
