package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// v3Config is a configuration whose backend "b" is polled over SNMPv3, its [snmp] table
// ending with lines.
func v3Config(lines string) string {
	return good + "  source = \"snmp\"\n  health_url = \"http://10.0.0.2/\"\n  [service.backend.snmp]\n  version = \"v3\"\n  user = \"fw\"\n" + lines
}

// TestSNMPPassphraseFiles: passphrases can come from files checked as key files; a
// passphrase given both ways is refused naming both keys; a bad file names its key and path.
func TestSNMPPassphraseFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	auth := file("auth", "auth-secret-1\n", 0o600)
	priv := file("priv", "priv-secret-2\n", 0o640)
	open := file("open", "open-secret-3\n", 0o644)
	short := file("short", "abc\n", 0o600)
	q := strconv.Quote
	for _, tc := range []struct {
		name  string
		lines string
		want  []string // nil: loads
	}{
		{"files", "  auth_passphrase_file = " + q(auth) + "\n  priv_passphrase_file = " + q(priv) + "\n", nil},
		{"auth both ways", "  auth_passphrase = \"inline-auth-1\"\n  auth_passphrase_file = " + q(auth) + "\n  priv_passphrase = \"inline-priv-1\"\n",
			[]string{"snmp.auth_passphrase: given with", "snmp.auth_passphrase_file"}},
		{"priv both ways", "  auth_passphrase = \"inline-auth-1\"\n  priv_passphrase = \"inline-priv-1\"\n  priv_passphrase_file = " + q(priv) + "\n",
			[]string{"snmp.priv_passphrase: given with", "snmp.priv_passphrase_file"}},
		{"readable by others", "  auth_passphrase_file = " + q(open) + "\n  priv_passphrase_file = " + q(priv) + "\n",
			[]string{"snmp.auth_passphrase_file", open, "readable by others"}},
		{"too short", "  auth_passphrase_file = " + q(auth) + "\n  priv_passphrase_file = " + q(short) + "\n",
			[]string{"snmp.priv_passphrase_file", short, "at least 8"}},
		{"missing", "  auth_passphrase_file = " + q(filepath.Join(dir, "none")) + "\n  priv_passphrase_file = " + q(priv) + "\n",
			[]string{"snmp.auth_passphrase_file", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.toml")
			if err := os.WriteFile(path, []byte(v3Config(tc.lines)), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				tg := c.Services[0].Backends[1].SNMP.Target()
				if tg.AuthPassphrase != "auth-secret-1" || tg.PrivPassphrase != "priv-secret-2" {
					t.Fatalf("passphrases %q %q, want the files' content", tg.AuthPassphrase, tg.PrivPassphrase)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to say %q", err, w)
				}
			}
		})
	}
}

// TestInlineSecretWarnings: the shipped configuration, written 0644 with its inline SNMPv3
// passphrases, is warned about, naming the backend and the keys; at 0600 it is not.
func TestInlineSecretWarnings(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "controller.toml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("controller.toml", data)
	if err != nil {
		t.Fatal(err)
	}
	w := c.SecretWarnings(0o644)
	if len(w) != 1 || !strings.Contains(w[0], `backend "web3".snmp.auth_passphrase, priv_passphrase`) ||
		!strings.Contains(w[0], "auth_passphrase_file") || !strings.Contains(w[0], "mode 0644") {
		t.Fatalf("warnings at 0644: %q", w)
	}
	if w := c.SecretWarnings(0o600); len(w) != 0 {
		t.Fatalf("warnings at 0600: %q", w)
	}
}
