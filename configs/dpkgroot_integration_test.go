//go:build integration

package configs

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// dpkgRoot is a temporary root directory that dpkg installs into (dpkg --root), prepared as
// a fresh machine's would be: root's account files and an empty dpkg database. Maintainer
// scripts run without chroot (--force-script-chrootless) with DPKG_ROOT set to it, which is
// what scripts/deb/ honours.
type dpkgRoot struct{ dir string }

// accountFiles are the files useradd and groupadd keep, with their backups: prepared by
// newDpkgRoot and changed by the maintainer scripts, so not part of any package's tree.
var accountFiles = []string{"etc/passwd", "etc/group", "etc/shadow", "etc/gshadow",
	"etc/passwd-", "etc/group-", "etc/shadow-", "etc/gshadow-"}

func newDpkgRoot(t *testing.T) *dpkgRoot {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // as / is: the service user must reach /usr/bin
		t.Fatal(err)
	}
	for _, d := range []string{"etc", "var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range map[string]struct {
		text string
		mode fs.FileMode
	}{
		"etc/passwd":          {"root:x:0:0:root:/root:/bin/sh\n", 0o644},
		"etc/group":           {"root:x:0:\n", 0o644},
		"etc/shadow":          {"root:*:20000:0:99999:7:::\n", 0o640},
		"etc/gshadow":         {"root:*::\n", 0o640},
		"var/lib/dpkg/status": {"", 0o644},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(f.text), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return &dpkgRoot{dir}
}

func (r *dpkgRoot) path(rel string) string { return filepath.Join(r.dir, rel) }

// dpkg runs dpkg on the root and returns its output. --force-depends: the root's database
// has no passwd package (useradd), which the host provides.
func (r *dpkgRoot) dpkg(t *testing.T, args ...string) string {
	t.Helper()
	args = append([]string{"--root=" + r.dir, "--force-script-chrootless", "--force-depends"}, args...)
	out, err := exec.Command("dpkg", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// id returns the numeric id of name in the root's passwd or group file (field 3).
func (r *dpkgRoot) id(t *testing.T, file, name string) int {
	t.Helper()
	data, err := os.ReadFile(r.path("etc/" + file))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) >= 3 && f[0] == name {
			n, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("%s: %q: %v", file, line, err)
			}
			return n
		}
	}
	t.Fatalf("no %q in the root's /etc/%s:\n%s", name, file, data)
	return 0
}

// run runs an installed program inside the root (chroot) as uid:gid, as systemd would run
// the unit, and returns its combined output and error.
func (r *dpkgRoot) run(uid, gid int, args ...string) (string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     r.dir,
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// entry is what a path in the root must be: its type and permission bits, owner and group.
type entry struct {
	mode     fs.FileMode // fs.ModeDir for a directory, plus the permission bits
	uid, gid int
}

func (e entry) String() string {
	kind := "file"
	if e.mode.IsDir() {
		kind = "dir"
	}
	return fmt.Sprintf("%s %04o %d:%d", kind, e.mode.Perm(), e.uid, e.gid)
}

// tree lists every path under the root (relative, without the dpkg database and the account
// files) with what it is.
func (r *dpkgRoot) tree(t *testing.T) map[string]entry {
	t.Helper()
	got := map[string]entry{}
	err := filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.dir, p)
		switch {
		case rel == ".":
			return nil
		case rel == "var/lib/dpkg":
			return filepath.SkipDir
		case slices.Contains(accountFiles, rel):
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		got[rel] = entry{fi.Mode() & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), int(st.Uid), int(st.Gid)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkTree fails for every path that is missing, unexpected, or of the wrong type, mode,
// owner or group: every installed file is checked, not a sample.
func (r *dpkgRoot) checkTree(t *testing.T, when string, want map[string]entry) {
	t.Helper()
	got := r.tree(t)
	var bad []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("/%s: missing (want %v)", p, w))
		case g != w:
			bad = append(bad, fmt.Sprintf("/%s: %v, want %v", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			bad = append(bad, fmt.Sprintf("/%s: not expected (%v)", p, g))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		t.Errorf("%s, the root holds:\n%s", when, strings.Join(bad, "\n"))
	}
}

// readFile returns the content of a file in the root.
func (r *dpkgRoot) readFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(r.path(rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// query returns a field of pkg in the root's dpkg database (dpkg-query -W -f format).
func (r *dpkgRoot) query(t *testing.T, pkg, format string) string {
	t.Helper()
	out, err := exec.Command("dpkg-query", "--admindir="+r.path("var/lib/dpkg"), "-W", "-f="+format, pkg).Output()
	if err != nil {
		t.Fatalf("dpkg-query %s: %v", pkg, err)
	}
	return string(out)
}

// conffiles returns the conffiles dpkg has registered for pkg.
func (r *dpkgRoot) conffiles(t *testing.T, pkg string) []string {
	t.Helper()
	var files []string
	for line := range strings.Lines(r.query(t, pkg, "${Conffiles}")) {
		if f := strings.Fields(string(line)); len(f) > 0 {
			files = append(files, f[0])
		}
	}
	return files
}
