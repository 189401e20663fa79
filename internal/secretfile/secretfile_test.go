package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	for _, tt := range []struct {
		name    string
		content string
		mode    os.FileMode
		wantErr string
	}{
		{"owner only", "secret", 0o600, ""},
		{"read only", "secret", 0o400, ""},
		{"group readable", "secret", 0o640, ""},
		{"empty is the caller's business", "", 0o600, ""},
		{"world readable", "secret", 0o604, "readable by others (mode 0604)"},
		{"0644", "secret", 0o644, "readable by others"},
		{"group writable", "secret", 0o620, "writable by group or others (mode 0620)"},
		{"world writable", "secret", 0o602, "writable by group or others"},
		{"at the limit", strings.Repeat("k", 64), 0o600, ""},
		{"over the limit", strings.Repeat("k", 65), 0o600, "larger than 64 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			got, err := Read(path, 64)
			if tt.wantErr == "" {
				if err != nil || string(got) != tt.content {
					t.Fatalf("Read = %q, %v; want %q", got, err, tt.content)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Read: err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestReadNotARegularFile: a directory, a missing file and a FIFO are refused, and the FIFO
// without blocking (a plain open waits for a writer forever).
func TestReadNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		dir:                           "not a regular file",
		fifo:                          "not a regular file",
		filepath.Join(dir, "missing"): "no such file",
	} {
		if _, err := Read(path, 64); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Read(%s): err = %v, want %q", path, err, want)
		}
	}
}
