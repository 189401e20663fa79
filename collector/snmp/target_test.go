package snmp

import (
	"strings"
	"testing"
	"time"
)

func TestTargetValidate(t *testing.T) {
	v3 := v3Target()
	tests := []struct {
		name   string
		mutate func(*Target)
		base   Target
		want   []string // substrings, each must appear; none means valid
	}{
		{name: "v2c ok", base: v2cTarget(80, 443)},
		{name: "v3 ok", base: v3},
		{name: "v3 SHA512 AES256 lower case ok", base: v3, mutate: func(t *Target) { t.AuthProtocol, t.PrivProtocol = "sha512", "aes256" }},
		{name: "zero retries ok", base: v2cTarget(), mutate: func(t *Target) { t.Retries = 0 }},
		{name: "ipv6 address ok", base: v2cTarget(), mutate: func(t *Target) { t.Address = "[::1]:161" }},
		{name: "empty target names every field", base: Target{}, want: []string{"Address", "Version"}},
		{name: "no port", base: v2cTarget(), mutate: func(t *Target) { t.Address = "127.0.0.1" }, want: []string{"Address \"127.0.0.1\""}},
		{name: "port 0", base: v2cTarget(), mutate: func(t *Target) { t.Address = "127.0.0.1:0" }, want: []string{"port"}},
		{name: "port too big", base: v2cTarget(), mutate: func(t *Target) { t.Address = "127.0.0.1:70000" }, want: []string{"port"}},
		{name: "no host", base: v2cTarget(), mutate: func(t *Target) { t.Address = ":161" }, want: []string{"no host"}},
		{name: "v1 refused", base: v2cTarget(), mutate: func(t *Target) { t.Version = "v1" }, want: []string{"Version \"v1\""}},
		{name: "v2c without community", base: v2cTarget(), mutate: func(t *Target) { t.Community = "" }, want: []string{"Community"}},
		{name: "v3 without user", base: v3, mutate: func(t *Target) { t.User = "" }, want: []string{"User"}},
		{name: "v3 MD5 refused", base: v3, mutate: func(t *Target) { t.AuthProtocol = "MD5" }, want: []string{"AuthProtocol \"MD5\""}},
		{name: "v3 DES refused", base: v3, mutate: func(t *Target) { t.PrivProtocol = "DES" }, want: []string{"PrivProtocol \"DES\""}},
		{name: "v3 short passphrases", base: v3, mutate: func(t *Target) { t.AuthPassphrase, t.PrivPassphrase = "short", "" },
			want: []string{"AuthPassphrase must be at least 8 bytes, has 5", "PrivPassphrase must be at least 8 bytes, has 0"}},
		{name: "timeout", base: v2cTarget(), mutate: func(t *Target) { t.Timeout = 0 }, want: []string{"Timeout"}},
		{name: "negative timeout and retries", base: v2cTarget(), mutate: func(t *Target) { t.Timeout, t.Retries = -time.Second, -1 },
			want: []string{"Timeout -1s", "Retries -1"}},
		{name: "service port 0", base: v2cTarget(80, 0), want: []string{"ServicePorts[1]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := tc.base
			tg.ServicePorts = append([]uint16(nil), tc.base.ServicePorts...)
			if tc.mutate != nil {
				tc.mutate(&tg)
			}
			err := tg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if _, err := tg.session(); err != nil {
					t.Fatalf("session: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}
