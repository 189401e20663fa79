package config

import (
	"strings"
	"testing"
	"time"
)

func TestConfirmation(t *testing.T) {
	now := time.Unix(2e9, 0)
	cfg := []byte("[controller]\n")
	c, err := ParseConfirmation(Confirm(cfg, now, 10*time.Minute).Encode())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
		at   time.Time
		want bool
	}{
		{"the confirmed content", cfg, now, true},
		{"just before expiry", cfg, now.Add(10*time.Minute - time.Second), true},
		{"expired", cfg, now.Add(10 * time.Minute), false},
		{"a truncated copy", cfg[:5], now, false},
		{"empty", nil, now, false},
		{"one byte more", append([]byte(nil), append(cfg, ' ')...), now, false},
	}
	for _, tc := range cases {
		if got := c.Allows(tc.data, tc.at); got != tc.want {
			t.Errorf("%s: Allows = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseConfirmationRejects(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	cases := []struct{ name, data, want string }{
		{"empty", "", "EOF"},
		{"truncated", `{"version":1,"sha256":"` + hex[:10], "unexpected EOF"},
		{"version", `{"version":2,"sha256":"` + hex + `","expires":"2030-01-01T00:00:00Z"}`, "version"},
		{"short digest", `{"version":1,"sha256":"abcd","expires":"2030-01-01T00:00:00Z"}`, "sha256"},
		{"upper case", `{"version":1,"sha256":"` + strings.ToUpper(hex) + `","expires":"2030-01-01T00:00:00Z"}`, "sha256"},
		{"no expiry", `{"version":1,"sha256":"` + hex + `"}`, "expires"},
		{"unknown key", `{"version":1,"sha256":"` + hex + `","expires":"2030-01-01T00:00:00Z","all":true}`, "unknown field"},
		{"trailing", `{"version":1,"sha256":"` + hex + `","expires":"2030-01-01T00:00:00Z"}x`, "after"},
		{"huge", strings.Repeat(" ", MaxConfirmationSize+1), "more than"},
	}
	for _, tc := range cases {
		if _, err := ParseConfirmation([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParseConfirmation(f *testing.F) {
	f.Add(Confirm([]byte("x"), time.Unix(2e9, 0), time.Minute).Encode())
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfirmation(data)
		if err != nil {
			return
		}
		again, err := ParseConfirmation(c.Encode())
		if err != nil || again != c {
			t.Fatalf("re-parse of %+v: %+v, %v", c, again, err)
		}
	})
}
