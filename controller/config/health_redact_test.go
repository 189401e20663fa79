package config

import (
	"strings"
	"testing"
)

// A health URL's password never shows in a configuration error (printed by -check-config and
// logged on a refused reload).
func TestHealthURLErrorsRedactPassword(t *testing.T) {
	const pw = "Tr0ub4dor-secret"
	for _, tc := range []struct{ name, toml string }{
		{"health_url not http", snmpGood("  health_url = \"ftp://monitor:"+pw+"@10.0.0.2/\"\n", "")},
		{"health_url unparsable", snmpGood("  health_url = \"http://monitor:"+pw+"@10.0.0.2:port/\"\n", "")},
		{"health_url without host", snmpGood("  health_url = \"http://monitor:"+pw+"@/x\"\n", "")},
		{"url not http", healthTable("  url = \"ftp://monitor:" + pw + "@10.0.0.2/\"\n")},
		{"url scheme is not the type", healthTable("  type = \"https\"\n  url = \"http://monitor:" + pw + "@10.0.0.2/\"\n")},
		{"url bad escape", healthTable("  url = \"http://monitor:" + pw + "%zz@10.0.0.2/\"\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.toml", []byte(tc.toml))
			if err == nil || !strings.Contains(err.Error(), "health") {
				t.Fatalf("err = %v, want one naming the health key", err)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
