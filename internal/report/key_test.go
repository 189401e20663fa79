package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadKey(t *testing.T) {
	key16 := "0123456789abcdef"
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string // key on success
		wantErr string // substring of the error, besides the path
	}{
		{"owner only", key16, 0o600, key16, ""},
		{"read only", key16, 0o400, key16, ""},
		{"group readable", key16, 0o640, key16, ""},
		{"trailing newline trimmed", key16 + "\n", 0o600, key16, ""},
		{"trailing crlf trimmed", key16 + "\r\n", 0o600, key16, ""},
		{"only one newline trimmed", key16 + "\n\n", 0o600, key16 + "\n", ""},
		{"binary key kept as is", "\x00\xff" + key16 + "\n", 0o600, "\x00\xff" + key16, ""},
		{"world readable", key16, 0o604, "", "readable by others"},
		{"0644", key16, 0o644, "", "readable by others"},
		{"group writable", key16, 0o620, "", "writable by group or others"},
		{"world writable", key16, 0o602, "", "writable by group or others"},
		{"empty", "", 0o600, "", "empty"},
		{"newline only", "\n", 0o600, "", "empty"},
		{"short", "fifteen-bytes!!\n", 0o600, "", "15 bytes"},
		{"too large", strings.Repeat("k", maxKeyFile+1), 0o600, "", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "push.key")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			got, err := LoadKey(path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("LoadKey: %v", err)
				}
				if !bytes.Equal(got, []byte(tt.want)) {
					t.Fatalf("key = %q, want %q", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("LoadKey accepted %q mode %04o", tt.content, tt.mode)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q: want the path and %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadKeyNotAFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.key")
	for _, path := range []string{dir, missing} {
		_, err := LoadKey(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("LoadKey(%s): err = %v, want an error naming the path", path, err)
		}
	}
}
