//go:build integration

package configs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPackageInstall builds both packages with scripts/package.sh and installs them with dpkg
// into a temporary root as onto a fresh machine, then checks every installed file, its owner
// and mode, the secrets the controller's postinst creates, that each unit's paths exist, that
// the installed binaries pass -check-config on the installed configurations as the service
// user, that a reinstall keeps the secrets byte for byte, and what remove and purge leave.
// It needs root (chown, chroot) and dpkg; no daemon is started.
func TestPackageInstall(t *testing.T) {
	requireRootAndTools(t, "dpkg", "dpkg-deb", "dpkg-query", "useradd", "groupadd")
	hostBefore := hostAccounts()
	debs := buildPackages(t)
	r := newDpkgRoot(t)

	// The probe alone first, as on a backend (its postinst makes the user), then the
	// controller beside it (its postinst finds the user).
	r.dpkg(t, "-i", debs["flowweight-probe"])
	uid, gid := r.id(t, "passwd", "flowweight"), r.id(t, "group", "flowweight")
	if uid == 0 || gid == 0 {
		t.Fatalf("flowweight is %d:%d, not a user and group of its own", uid, gid)
	}
	want := installedTree(t, uid, gid)
	r.checkTree(t, "after installing the probe", maps(want, notController))
	out := r.dpkg(t, "-i", debs["flowweight-controller"])
	r.checkTree(t, "after installing the controller", want)
	secrets := map[string][]byte{}
	for _, f := range []string{"etc/flowweight/push.secret", "etc/flowweight/api.token"} {
		secrets[f] = r.readFile(t, f)
		if !secretRE.Match(secrets[f]) {
			t.Errorf("/%s: want 64 hex digits and a newline, got %d bytes", f, len(secrets[f]))
		}
		if strings.Contains(out, strings.TrimSpace(string(secrets[f]))) {
			t.Errorf("dpkg's output shows the content of /%s", f)
		}
	}
	if bytes.Equal(secrets["etc/flowweight/push.secret"], secrets["etc/flowweight/api.token"]) {
		t.Error("the push secret and the API token are the same")
	}
	for pkg, conf := range map[string]string{"flowweight-controller": "/etc/flowweight/controller.toml", "flowweight-probe": "/etc/flowweight/probe.toml"} {
		if got := r.query(t, pkg, "${Status}"); got != "install ok installed" {
			t.Errorf("%s: status %q, want installed and configured", pkg, got)
		}
		if got := r.conffiles(t, pkg); !slices.Equal(got, []string{conf}) {
			t.Errorf("%s: conffiles %q, want [%s]", pkg, got, conf)
		}
		checkUnit(t, r, pkg+".service", uid)
	}

	// The installed binaries on the installed configuration, as the units run them.
	ctl := []string{"/usr/bin/flowweight-controller", "-check-config", "-config", "/etc/flowweight/controller.toml"}
	if out, err := r.run(uid, gid, ctl...); err != nil || !strings.Contains(out, "/etc/flowweight/controller.toml: OK (1 services)") {
		t.Errorf("%s as flowweight: %v\n%s", strings.Join(ctl, " "), err, out)
	}
	// The installed configuration reads the token the postinst made: one that others can
	// read is refused, naming it.
	token := r.path("etc/flowweight/api.token")
	if err := os.Chmod(token, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := r.run(uid, gid, ctl...); err == nil || !strings.Contains(out, "/etc/flowweight/api.token: readable by others") {
		t.Errorf("%s with api.token mode 0644: %v, want it refused\n%s", strings.Join(ctl, " "), err, out)
	}
	if err := os.Chmod(token, 0o640); err != nil {
		t.Fatal(err)
	}
	// The probe's key comes from the controller: refused, naming it, until installed as the
	// postinst says (controller key, then install -m 0640 -o root -g flowweight).
	probe := []string{"/usr/bin/flowweight-probe", "-check-config", "-config", "/etc/flowweight/probe.toml"}
	if out, err := r.run(uid, gid, probe...); err == nil || !strings.Contains(out, "key file /etc/flowweight/probe.key") {
		t.Errorf("%s without a key: %v, want an error naming /etc/flowweight/probe.key\n%s", strings.Join(probe, " "), err, out)
	}
	if out, err := r.run(0, 0, "/usr/bin/flowweight-controller", "key", "-out", "/etc/flowweight/probe.key", "web1"); err != nil {
		t.Fatalf("controller key: %v\n%s", err, out)
	}
	if err := os.Chown(r.path("etc/flowweight/probe.key"), 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(r.path("etc/flowweight/probe.key"), 0o640); err != nil {
		t.Fatal(err)
	}
	if out, err := r.run(uid, gid, probe...); err != nil || !strings.Contains(out, "/etc/flowweight/probe.toml: OK") {
		t.Errorf("%s as flowweight with the key: %v\n%s", strings.Join(probe, " "), err, out)
	}
	want["etc/flowweight/probe.key"] = entry{0o640, 0, gid}

	// A reinstall (and so an upgrade's configure) keeps the secrets that exist and makes
	// those that do not (the API token, deleted here as before imaging a machine).
	if err := os.Remove(r.path("etc/flowweight/api.token")); err != nil {
		t.Fatal(err)
	}
	r.dpkg(t, "-i", debs["flowweight-controller"], debs["flowweight-probe"])
	r.checkTree(t, "after reinstall", want)
	if got := r.readFile(t, "etc/flowweight/push.secret"); !bytes.Equal(got, secrets["etc/flowweight/push.secret"]) {
		t.Error("/etc/flowweight/push.secret changed on reinstall")
	}
	if got := r.readFile(t, "etc/flowweight/api.token"); bytes.Equal(got, secrets["etc/flowweight/api.token"]) || !secretRE.Match(got) {
		t.Errorf("/etc/flowweight/api.token, deleted before the reinstall: %d bytes, the old ones: %v", len(got), bytes.Equal(got, secrets["etc/flowweight/api.token"]))
	}
	if u := r.id(t, "passwd", "flowweight"); u != uid {
		t.Errorf("reinstall: flowweight's uid %d, was %d", u, uid)
	}

	// Remove keeps the configuration, the secrets and the state (a state file as the running
	// controller writes it); purge deletes them.
	state := r.path("var/lib/flowweight/controller.state")
	if err := os.WriteFile(state, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, uid, gid); err != nil {
		t.Fatal(err)
	}
	want["var/lib/flowweight/controller.state"] = entry{0o600, uid, gid}
	r.dpkg(t, "--remove", "flowweight-controller")
	removed := maps(want, func(p string) bool { return !strings.Contains(p, "flowweight-controller") })
	r.checkTree(t, "after removing the controller", removed)
	r.dpkg(t, "--purge", "flowweight-controller")
	r.checkTree(t, "after purging the controller", maps(want, notController))
	r.dpkg(t, "--purge", "flowweight-probe")
	r.checkTree(t, "after purging both", map[string]entry{
		"etc": {fs.ModeDir | 0o755, 0, 0}, "var": {fs.ModeDir | 0o755, 0, 0}, "var/lib": {fs.ModeDir | 0o755, 0, 0},
	})
	if u := r.id(t, "passwd", "flowweight"); u != uid { // Debian leaves system users
		t.Errorf("after purge: flowweight's uid %d, was %d", u, uid)
	}
	if after := hostAccounts(); after != hostBefore {
		t.Errorf("this machine's flowweight accounts went from %q to %q: the maintainer scripts acted outside DPKG_ROOT", hostBefore, after)
	}
}

// secretRE is what the postinst writes in a secret: 32 random bytes as hex, and a newline.
var secretRE = regexp.MustCompile(`^[0-9a-f]{64}\n$`)

// requireRootAndTools fails (not skips: the integration tier runs as root on Debian) without
// root or one of the tools.
func requireRootAndTools(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root: chown to the flowweight user, chroot")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (Debian packages dpkg, passwd)", tool)
		}
	}
}

// buildPackages runs scripts/package.sh from outside the repository into a temporary
// directory and returns the package files by name, checking their names and fields.
func buildPackages(t *testing.T) map[string]string {
	t.Helper()
	script, err := filepath.Abs("../scripts/package.sh")
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	cmd := exec.Command("bash", script, "-o", dist)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("package.sh: %v\n%s", err, out)
	}
	arch, err := exec.Command("dpkg", "--print-architecture").Output()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dist, "*"))
	debs := map[string]string{}
	name := regexp.MustCompile(`^(flowweight-controller|flowweight-probe)_([0-9][A-Za-z0-9.+~]*)_` + regexp.QuoteMeta(strings.TrimSpace(string(arch))) + `\.deb$`)
	for _, f := range files {
		m := name.FindStringSubmatch(filepath.Base(f))
		if m == nil {
			t.Fatalf("package.sh wrote %s: not NAME_VERSION_%s.deb", filepath.Base(f), arch)
		}
		fields, err := exec.Command("dpkg-deb", "-f", f, "Package", "Version", "Architecture").Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s: %v", f, err)
		}
		if w := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s", m[1], m[2], arch); string(fields) != w {
			t.Errorf("%s: fields\n%s\nwant\n%s", filepath.Base(f), fields, w)
		}
		debs[m[1]] = f
	}
	if len(debs) != 2 || len(files) != 2 {
		t.Fatalf("package.sh wrote %v, want one flowweight-controller and one flowweight-probe package", files)
	}
	return debs
}

// installedTree is everything both packages and their postinsts put in the root: the
// binaries root 0755, the units 0644, /etc/flowweight root:flowweight 0750 with the
// configurations and secrets root:flowweight 0640 (the daemons read them, and can change
// none), the state directory flowweight 0700 (the unit's StateDirectoryMode), the docs.
func installedTree(t *testing.T, uid, gid int) map[string]entry {
	t.Helper()
	dir, file := func(m fs.FileMode) entry { return entry{fs.ModeDir | m, 0, 0} }, entry{0o644, 0, 0}
	want := map[string]entry{
		"etc":                            dir(0o755),
		"etc/flowweight":                 {fs.ModeDir | 0o750, 0, gid},
		"etc/flowweight/controller.toml": {0o640, 0, gid},
		"etc/flowweight/probe.toml":      {0o640, 0, gid},
		"etc/flowweight/push.secret":     {0o640, 0, gid},
		"etc/flowweight/api.token":       {0o640, 0, gid},
		"var":                            dir(0o755),
		"var/lib":                        dir(0o755),
		"var/lib/flowweight":             {fs.ModeDir | 0o700, uid, gid},
	}
	for _, d := range []string{"usr", "usr/bin", "usr/lib", "usr/lib/systemd", "usr/lib/systemd/system", "usr/share", "usr/share/doc"} {
		want[d] = dir(0o755)
	}
	docs, _ := filepath.Glob("../docs/*.md")
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	for _, pkg := range []string{"flowweight-controller", "flowweight-probe"} {
		want["usr/bin/"+pkg] = entry{0o755, 0, 0}
		want["usr/lib/systemd/system/"+pkg+".service"] = file
		doc := "usr/share/doc/" + pkg
		want[doc], want[doc+"/docs"], want[doc+"/README.md"] = dir(0o755), dir(0o755), file
		for _, d := range docs {
			want[doc+"/docs/"+filepath.Base(d)] = file
		}
	}
	return want
}

// checkUnit checks that what an installed unit names exists in the root: its programs and
// the files they are given, its documentation, its user and group, its state directory with
// the mode it asks for.
func checkUnit(t *testing.T, r *dpkgRoot, unit string, uid int) {
	t.Helper()
	text := string(r.readFile(t, "usr/lib/systemd/system/"+unit))
	for line := range strings.Lines(text) {
		key, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		switch key {
		case "ExecStartPre", "ExecStart", "Documentation":
			for _, f := range strings.Fields(val) {
				f = strings.TrimLeft(strings.TrimPrefix(f, "file://"), "-+!@")
				if _, err := os.Stat(r.path(f)); strings.HasPrefix(f, "/") && err != nil {
					t.Errorf("%s: %s names %s, which the packages did not install: %v", unit, key, f, err)
				}
			}
		case "User":
			if got := r.id(t, "passwd", val); got != uid {
				t.Errorf("%s: User=%s has uid %d, want flowweight's %d", unit, val, got, uid)
			}
		case "Group":
			r.id(t, "group", val)
		case "StateDirectory":
			fi, err := os.Stat(r.path("var/lib/" + val))
			if err != nil {
				t.Fatalf("%s: StateDirectory=%s: %v", unit, val, err)
			}
			m := regexp.MustCompile(`(?m)^StateDirectoryMode=(\d+)$`).FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("%s: StateDirectory without StateDirectoryMode", unit)
			}
			if mode, _ := strconv.ParseUint(m[1], 8, 32); fi.Mode().Perm() != fs.FileMode(mode) {
				t.Errorf("%s: /var/lib/%s has mode %04o, the unit's StateDirectoryMode is %s", unit, val, fi.Mode().Perm(), m[1])
			}
		}
	}
}

// notController says whether a path of the installed tree is not the controller's: not its
// package's files, configuration, secrets or state.
func notController(p string) bool {
	return !strings.Contains(p, "flowweight-controller") && !strings.HasPrefix(p, "var/lib/flowweight") &&
		!slices.Contains([]string{"etc/flowweight/push.secret", "etc/flowweight/api.token", "etc/flowweight/controller.toml"}, p)
}

// hostAccounts returns this machine's passwd and group lines for flowweight (other tests may
// change other accounts meanwhile).
func hostAccounts() string {
	var lines []string
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		data, _ := os.ReadFile(f)
		for line := range strings.Lines(string(data)) {
			if strings.HasPrefix(line, "flowweight:") {
				lines = append(lines, f+": "+line)
			}
		}
	}
	return strings.Join(lines, "")
}

// maps returns the entries of m whose path keep accepts.
func maps(m map[string]entry, keep func(string) bool) map[string]entry {
	out := map[string]entry{}
	for p, e := range m {
		if keep(p) {
			out[p] = e
		}
	}
	return out
}
