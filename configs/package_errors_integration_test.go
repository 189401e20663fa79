//go:build integration

package configs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageScriptErrors runs scripts/package.sh with what an operator gets wrong: a machine
// without dpkg-deb, a copy of the script outside a flowweight checkout, bad flags, a bad
// version or architecture, an output path that is a file. Each must fail with a message
// naming the thing at fault, and write no package.
func TestPackageScriptErrors(t *testing.T) {
	script, err := filepath.Abs("../scripts/package.sh")
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the script (and the maintainer scripts) in a directory that is no checkout.
	elsewhere := filepath.Join(t.TempDir(), "scripts")
	if err := os.MkdirAll(filepath.Join(elsewhere, "deb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("cp", "-r", script, "../scripts/deb", elsewhere).Run(); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		script string
		args   []string
		env    []string
		want   string
	}{
		{"no dpkg-deb", script, nil, []string{"PATH=" + pathWithout(t, "dpkg-deb")}, "not found on PATH: dpkg-deb"},
		{"outside the repository", filepath.Join(elsewhere, "package.sh"), nil, nil, "is not a flowweight repository"},
		{"unknown flag", script, []string{"-x"}, nil, `unknown argument "-x"`},
		{"-o without a directory", script, []string{"-o"}, nil, "-o needs a directory"},
		{"empty output directory", script, []string{"--out="}, nil, "the output directory is empty"},
		{"output is a file", script, []string{"-o", aFile}, nil, "cannot create the output directory " + aFile},
		{"bad VERSION", script, nil, []string{"VERSION=1.0 beta"}, `VERSION "1.0 beta" is not a Debian version`},
		{"VERSION not starting with a digit", script, nil, []string{"VERSION=v1.0"}, `VERSION "v1.0" is not a Debian version`},
		{"unknown architecture", script, nil, []string{"DEB_ARCH=vax"}, `architecture "vax"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dist := t.TempDir()
			args := c.args
			if args == nil {
				args = []string{"-o", dist}
			}
			cmd := exec.Command("/bin/bash", append([]string{c.script}, args...)...)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), c.env...)
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
				t.Errorf("exit %d (%v), want 1\n%s", code, err, out)
			}
			if !strings.HasPrefix(string(out), "package.sh: ") || !strings.Contains(string(out), c.want) {
				t.Errorf("output %q, want it to say %q", out, c.want)
			}
			if debs, _ := filepath.Glob(filepath.Join(dist, "*.deb")); len(debs) > 0 {
				t.Errorf("wrote %v", debs)
			}
		})
	}
}

// pathWithout returns a PATH holding every program of this machine's PATH (and Go's) but
// the one named, through a directory of symbolic links: a machine without that program.
func pathWithout(t *testing.T, missing string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/local/go/bin") {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.Name() == missing {
				continue
			}
			// The first of a name wins, as in a PATH lookup; later ones fail to link.
			_ = os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "go")); err != nil {
		t.Fatal("go is not on PATH nor in /usr/local/go/bin")
	}
	return dir
}
