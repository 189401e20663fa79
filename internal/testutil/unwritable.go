package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// Unwritable makes dir refuse new files to this process until the test ends: chmod 0500 for
// a user, the immutable attribute (chattr +i) for root, whom modes do not stop. Without
// chattr, a root test is skipped, saying why.
func Unwritable(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, fi.Mode().Perm()) })
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("chattr +i %s: %v %s (root ignores modes; no other way to refuse root a write here)", dir, err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
}
