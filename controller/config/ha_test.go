package config

import (
	"strings"
	"testing"
)

func TestHADefaultsAndAbsence(t *testing.T) {
	c, err := Parse("t.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.HA != nil {
		t.Fatalf("no [ha] section, got %+v", c.HA)
	}
	c, err = Parse("t.toml", []byte("[ha]\netcd = [\"http://127.0.0.1:2379\"]\nname = \"c1\"\n"+good))
	if err != nil {
		t.Fatal(err)
	}
	h := c.HA
	if h == nil || h.Prefix != DefaultHAPrefix || h.Lease != DefaultHALease || h.DialTimeout != DefaultHADialTimeout || h.Name != "c1" {
		t.Fatalf("defaults not filled: %+v", h)
	}
}

func TestHAErrorsNameTheKey(t *testing.T) {
	ha := func(body string) string { return "[ha]\n" + body + "\n" + good }
	cases := []struct {
		name, toml string
		want       []string
	}{
		{"no endpoints", ha(`name = "c1"`), []string{"ha.etcd", "required", "remove the [ha] section"}},
		{"scheme", ha(`etcd = ["127.0.0.1:2379"]`), []string{"ha.etcd[0]", "scheme"}},
		{"unix scheme", ha(`etcd = ["unix:///run/etcd.sock"]`), []string{"ha.etcd[0]", `scheme "unix"`}},
		{"no port", ha(`etcd = ["http://127.0.0.1"]`), []string{"ha.etcd[0]", "host:port"}},
		{"port range", ha(`etcd = ["http://127.0.0.1:0"]`), []string{"ha.etcd[0]", "not in [1,65535]"}},
		{"path", ha(`etcd = ["http://127.0.0.1:2379/v3"]`), []string{"ha.etcd[0]", "only scheme://host:port"}},
		{"credentials in url", ha(`etcd = ["http://u:p@127.0.0.1:2379"]`), []string{"ha.etcd[0]", "only scheme://host:port"}},
		{"duplicate", ha(`etcd = ["http://a:2379", "http://a:2379"]`), []string{"ha.etcd[1]", "same as ha.etcd[0]"}},
		{"mixed schemes", ha(`etcd = ["https://a:2379", "http://b:2379"]`), []string{"ha.etcd[1]", "mixes http and https"}},
		{"bad name", ha("etcd = [\"http://a:2379\"]\nname = \"two words\""), []string{"ha.name"}},
		{"prefix without slash", ha("etcd = [\"http://a:2379\"]\nprefix = \"fw\""), []string{"ha.prefix", "starts with /"}},
		{"prefix trailing slash", ha("etcd = [\"http://a:2379\"]\nprefix = \"/fw/\""), []string{"ha.prefix"}},
		{"lease short", ha("etcd = [\"http://a:2379\"]\nlease = \"500ms\""), []string{"ha.lease", "outside [1s,1m]"}},
		{"lease fraction", ha("etcd = [\"http://a:2379\"]\nlease = \"1500ms\""), []string{"ha.lease", "whole seconds"}},
		{"dial timeout", ha("etcd = [\"http://a:2379\"]\ndial_timeout = \"1ms\""), []string{"ha.dial_timeout"}},
		{"cert without key", ha("etcd = [\"https://a:2379\"]\ntls_cert = \"/c\""), []string{"ha.tls_cert", "together"}},
		{"tls over http", ha("etcd = [\"http://a:2379\"]\ntls_ca = \"/ca\""), []string{"ha.tls_ca", "https://"}},
		{"user without password", ha("etcd = [\"http://a:2379\"]\nusername = \"fw\""), []string{"ha.username", "together"}},
		{"unknown key", ha("etcd = [\"http://a:2379\"]\nleader = true"), []string{`unknown key "ha.leader"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(c.toml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	parse := func(s string) *Config {
		t.Helper()
		c, err := Parse("t.toml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := parse(good).Fingerprint()
	if len(base) != 16 {
		t.Fatalf("fingerprint %q", base)
	}
	same := []struct{ name, toml string }{
		{"api and listen differ", "[api]\nlisten = \"127.0.0.1:9191\"\n[controller]\nlisten = \":6654\"\n" + good},
		{"key file differs", strings.Replace(good, `key_file = "/k"`, `key_file = "/other"`, 1)},
		{"ha section", "[ha]\netcd = [\"http://a:2379\"]\nname = \"c2\"\n" + good},
	}
	for _, c := range same {
		if got := parse(c.toml).Fingerprint(); got != base {
			t.Errorf("%s: fingerprint %s, want %s", c.name, got, base)
		}
	}
	differ := []struct{ name, toml string }{
		{"a backend's ip", strings.Replace(good, "10.0.0.2", "10.0.0.3", 1)},
		{"the vip", strings.Replace(good, "10.0.0.100", "10.0.0.101", 1)},
		{"the weighting", "[weighting]\nalpha = 0.5\n" + good},
		{"a capacity", strings.Replace(good, `ip = "10.0.0.1"`, "ip = \"10.0.0.1\"\n  capacity = 2.0", 1)},
	}
	for _, c := range differ {
		if got := parse(c.toml).Fingerprint(); got == base {
			t.Errorf("%s: fingerprint unchanged", c.name)
		}
	}
}

// TestHAWarnings: [ha] without switch certificates that name the datapath is warned about,
// naming the key and the listener; with them, or without [ha], nothing is said.
func TestHAWarnings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ha       bool
		listen   string
		ca       string
		namesDP  bool
		wantWarn []string
	}{
		{name: "no [ha]", listen: ":6653"},
		{name: "plain TCP", ha: true, listen: ":6653", wantWarn: []string{"controller.tls_names_dpid", "anyone who can connect to :6653", "tls_ca"}},
		{name: "TLS without names", ha: true, listen: ":6653", ca: "/etc/ca.pem", wantWarn: []string{"controller.tls_names_dpid", "not authenticated"}},
		{name: "unix socket", ha: true, listen: "unix:/run/fw.sock", wantWarn: []string{"any local process that can open the socket /run/fw.sock"}},
		{name: "TLS naming the datapath", ha: true, listen: ":6653", ca: "/etc/ca.pem", namesDP: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := good
			if tc.ha {
				text = "[ha]\netcd = [\"http://127.0.0.1:2379\"]\nname = \"c1\"\n" + good
			}
			c, err := Parse("t.toml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			c.Controller.Listen, c.Controller.TLSCA, c.Controller.TLSNamesDPID = tc.listen, tc.ca, tc.namesDP
			w := c.HAWarnings()
			if len(tc.wantWarn) == 0 {
				if len(w) != 0 {
					t.Fatalf("warnings %q, want none", w)
				}
				return
			}
			if len(w) != 1 {
				t.Fatalf("warnings %q, want one", w)
			}
			for _, part := range tc.wantWarn {
				if !strings.Contains(w[0], part) {
					t.Errorf("warning %q does not say %q", w[0], part)
				}
			}
		})
	}
}
