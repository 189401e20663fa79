//go:build integration

package configs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnitsVerify builds both binaries, points copies of the unit files at them and
// has systemd-analyze verify them, so a typo in a directive or a flag fails here and not on
// an operator's server.
func TestSystemdUnitsVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not found (Debian package systemd)")
	}
	dir := t.TempDir()
	bins := map[string]string{"/usr/bin/flowweight-controller": "../controller", "/usr/bin/flowweight-probe": "../probe"}
	for installed, pkg := range bins {
		out := filepath.Join(dir, filepath.Base(installed))
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
	}
	units, _ := filepath.Glob("*.service")
	if len(units) != 2 {
		t.Fatalf("expected 2 unit files, found %v", units)
	}
	for _, u := range units {
		data, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for installed := range bins {
			text = strings.ReplaceAll(text, installed, filepath.Join(dir, filepath.Base(installed)))
		}
		copyPath := filepath.Join(dir, u)
		if err := os.WriteFile(copyPath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(sa, "verify", copyPath).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", u, err, out)
		}
	}
}
