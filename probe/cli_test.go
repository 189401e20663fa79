package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes a config and a 0600 key file into a temp dir and returns the config path.
func writeConfig(t *testing.T, extra string) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	key := filepath.Join(dir, "probe.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := "backend_id = \"web1\"\ncollector = \"127.0.0.1:7946\"\n" +
		"key_file = \"" + key + "\"\ndrain_file = \"" + filepath.Join(dir, "run", "drain") + "\"\n" + extra
	path = filepath.Join(dir, "probe.toml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

func TestCLI(t *testing.T) {
	good, _ := writeConfig(t, "")
	bad, _ := writeConfig(t, "jitter = 0.9\nscope = \"vm\"\n")
	openKey, openDir := writeConfig(t, "")
	os.Chmod(filepath.Join(openDir, "probe.key"), 0o644)
	noCgroup, _ := writeConfig(t, "scope = \"cgroup\"\ncgroup_path = \"/not/a/cgroup\"\n")
	pidfile, _ := writeConfig(t, "[service]\npidfile = \"/run/not-running.pid\"\n") // checked each interval, not at start
	noServiceCgroup, _ := writeConfig(t, "[service]\ncgroup = \"/not/a/cgroup\"\n")
	bothCollectors, _ := writeConfig(t, "collectors = [\"127.0.0.1:7946\", \"127.0.0.2:7946\"]\n")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"help", []string{"-h"}, 0, []string{"probe drain", "probe undrain", "-check-config", "/etc/flowweight/probe.toml", "SIGUSR1", "SIGTERM"}, nil},
		{"check ok", []string{"-check-config", "-config", good}, 0, []string{"OK"}, nil},
		{"check bad names keys", []string{"-check-config", "-config", bad}, 1, nil, []string{"jitter:", "scope:"}},
		{"check readable key", []string{"-check-config", "-config", openKey}, 1, nil, []string{"key_file", "readable by others"}},
		{"check cgroup", []string{"-check-config", "-config", noCgroup}, 1, nil, []string{"cgroup_path", "/not/a/cgroup"}},
		{"check service pidfile", []string{"-check-config", "-config", pidfile}, 0, []string{"OK"}, nil},
		{"check service cgroup", []string{"-check-config", "-config", noServiceCgroup}, 1, nil, []string{"service.cgroup", "/not/a/cgroup"}},
		{"check collector and collectors", []string{"-check-config", "-config", bothCollectors}, 1, nil, []string{"collectors: set together with collector: use one"}},
		{"missing config", []string{"-check-config", "-config", "/nonexistent/probe.toml"}, 1, nil, []string{"/nonexistent/probe.toml"}},
		{"unknown flag", []string{"-bogus"}, 2, nil, []string{"-bogus", "Usage"}},
		{"unknown command", []string{"-config", good, "dance"}, 2, nil, []string{`"dance"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, errb.String())
			}
			for _, s := range tt.stdout {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errb.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, errb.String())
				}
			}
		})
	}
}

func TestDrainUndrain(t *testing.T) {
	cfg, dir := writeConfig(t, "")
	file := filepath.Join(dir, "run", "drain")
	var out, errb bytes.Buffer
	if code := run([]string{"drain", "-config", cfg}, &out, &errb); code != 0 {
		t.Fatalf("drain: %d %s", code, errb.String())
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("drain file: %v", err)
	}
	// Both orders of flag and command work; undrain twice is fine.
	for range 2 {
		if code := run([]string{"-config", cfg, "undrain"}, &out, &errb); code != 0 {
			t.Fatalf("undrain: %d %s", code, errb.String())
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Fatalf("drain file still there: %v", err)
		}
	}
}
