package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestFilesMustBeRegular: every file the configuration names, and the configuration itself,
// is refused at once when it is a FIFO (a plain open waits for a writer forever, which hung
// start-up or the reload), a directory or a device, with an error naming the key and path.
func TestFilesMustBeRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		path string // the configuration to load
		want []string
	}{
		{"configuration a FIFO", fifo, []string{fifo, "named pipe"}},
		{"configuration a directory", dir, []string{dir, "directory"}},
		{"configuration a device", "/dev/zero", []string{"/dev/zero", "character device"}},
		{"token a FIFO", write("token.toml", "[api]\ntoken_file = "+strconv.Quote(fifo)+"\n"+good), []string{"api.token_file", fifo, "not a regular file"}},
		{"health CA a FIFO", write("ca.toml", healthTable("  type = \"https\"\n  tls_ca = "+strconv.Quote(fifo)+"\n")), []string{"health.tls_ca", fifo, "named pipe"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.path)
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
