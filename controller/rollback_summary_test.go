package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRollbackSummaryOfSecretFiles: the summary a rollback prints compares the two versions
// as written. The target used to be the loaded configuration, whose passphrases were read
// from their files, against the running one as written, without them, so every rollback of
// a configuration with passphrase files said the passphrases changed.
func TestRollbackSummaryOfSecretFiles(t *testing.T) {
	l := newLab(t)
	auth, priv := filepath.Join(l.dir, "c.auth"), filepath.Join(l.dir, "c.priv")
	for _, f := range []string{auth, priv} {
		if err := os.WriteFile(f, []byte("a-passphrase-of-some-length\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	snmp := []string{"name = \"c\"\n  ip = \"10.0.0.3\"\n", "name = \"c\"\n  ip = \"10.0.0.3\"\n  source = \"snmp\"\n  health_url = \"http://10.0.0.3:8080/health\"\n" +
		"    [service.backend.snmp]\n    address = \"10.0.0.3:161\"\n    version = \"v3\"\n    user = \"u\"\n" +
		"    auth_protocol = \"SHA\"\n    auth_passphrase_file = \"" + auth + "\"\n" +
		"    priv_protocol = \"AES\"\n    priv_passphrase_file = \"" + priv + "\"\n"}
	v1 := l.toml(t, snmp...)
	v2 := l.toml(t, append(snmp, capB("2")...)...)
	l.applied(t, v1, v2)
	code, stdout, stderr := l.rollback("-wait", "0")
	if code != 0 || !strings.Contains(stdout, "web: capacity b 2→1") {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "passphrase") {
		t.Errorf("the summary says a passphrase changed:\n%s", stdout)
	}
}
