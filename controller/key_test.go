package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flowweight/controller/config"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

func TestKeyCommand(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "push.secret")
	if err := os.WriteFile(secret, []byte("flowweight-example-secret-32byte"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "push.key")
	if err := os.WriteFile(shared, []byte("one-key-for-every-probe-000"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := func(collector string) string {
		p := filepath.Join(dir, strings.NewReplacer(" ", "", "\"", "", "/", "", "=", "").Replace(collector)+".toml")
		text := "[collector]\n" + collector + `
[[service]]
name = "web"
vip = "10.0.0.100"
port = 80
group_id = 7
  [[service.backend]]
  name = "web-1"
  ip = "10.0.0.1"
  [[service.backend]]
  name = "own"
  ip = "10.0.0.2"
  key_file = "/etc/flowweight/own.key"
  [[service.backend]]
  name = "polled"
  ip = "10.0.0.3"
  source = "snmp"
  health_url = "http://10.0.0.3/"
  [service.backend.snmp]
  version = "v2c"
  community = "public"
`
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	derived := conf(`secret_file = "` + secret + `"`)
	legacy := conf(`key_file = "` + shared + `"`)
	out := filepath.Join(dir, "web-1.key")
	const vector = "980ff972f047efc421b8d1a4cdae593a5b04b538b25542dd95f83d52b90fb78f\n" // docs/push-protocol.md
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{"prints the derived key", []string{"-config", derived, "web-1"}, 0, vector, nil},
		{"flags after the name", []string{"web-1", "-config", derived}, 0, vector, nil},
		{"writes the key file", []string{"-config", derived, "-out", out, "web-1"}, 0, "", []string{"wrote", out, "0600"}},
		{"unknown backend", []string{"-config", derived, "web-9"}, 1, "", []string{`"web-9" is not in`, "web-1, own, polled"}},
		{"snmp backend", []string{"-config", derived, "polled"}, 1, "", []string{`"polled" has source "snmp"`}},
		{"own key file", []string{"-config", derived, "own"}, 1, "", []string{"own key_file /etc/flowweight/own.key"}},
		{"shared mode", []string{"-config", legacy, "web-1"}, 1, "", []string{`key_mode is "shared"`, shared, "secret_file"}},
		{"no backend", []string{"-config", derived}, 2, "", []string{"usage: controller key"}},
		{"two backends", []string{"-config", derived, "web-1", "own"}, 2, "", []string{"usage: controller key"}},
		{"bad config", []string{"-config", filepath.Join(dir, "nope.toml"), "web-1"}, 2, "", []string{"nope.toml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := keyCommand(tt.args, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if stdout.String() != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.stdout)
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr.String())
				}
			}
		})
	}
	// The written file is one the probe accepts, with the same key.
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", fi.Mode().Perm())
	}
	k, err := report.LoadKey(out)
	if err != nil || string(k)+"\n" != vector {
		t.Errorf("LoadKey(written file) = %q, %v; want the derived key", k, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".web-1.key.*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestCheckKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.secret", "a-controller-secret-of-32-bytes!", 0o600)
	open := write("open.secret", "a-controller-secret-of-32-bytes!", 0o644)
	short := write("short.key", "short", 0o600)
	cfgWith := func(collector, backendKey string) *config.Config {
		// The web service of testdata/web.toml without its third backend; backendKey goes to b.
		text := testutil.Edit(testTOML, `key_file = "KEY"`, collector,
			"  ip = \"10.0.0.2\"\n", "  ip = \"10.0.0.2\"\n"+backendKey,
			"  [[service.backend]]\n  name = \"c\"\n  ip = \"10.0.0.3\"\n", "")
		c, err := config.Parse("t.toml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name string
		cfg  *config.Config
		want []string // substrings of the error; nil: none
	}{
		{"good secret", cfgWith(`secret_file = "`+good+`"`, ""), nil},
		{"secret readable by others", cfgWith(`secret_file = "`+open+`"`, ""), []string{`backend "a"`, "collector.secret_file", open, "readable by others"}},
		{"missing secret", cfgWith(`secret_file = "`+filepath.Join(dir, "nope")+`"`, ""), []string{"collector.secret_file", "nope"}},
		{"a backend's short own key", cfgWith(`secret_file = "`+good+`"`, `  key_file = "`+short+`"`+"\n"), []string{`backend "b"`, short, "want >= 16"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkKeys(tt.cfg)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Count(err.Error(), "\n") > 0 && strings.Count(err.Error(), tt.want[len(tt.want)-1]) > 1 {
				t.Errorf("one bad file reported more than once:\n%v", err)
			}
		})
	}
}
