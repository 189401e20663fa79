package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRead: a regular file is read whole; a FIFO (without blocking), a directory, a device
// and a file over the bound are refused, each error naming the path and what it is.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("12345678"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path    string
		max     int64
		want    string
		wantErr []string
		is      error
	}{
		{small, 8, "12345678", nil, nil},
		{empty, 8, "", nil, nil},
		{small, 7, "", []string{small, "more than 7 bytes"}, ErrTooLarge},
		{fifo, 8, "", []string{fifo, "named pipe"}, ErrNotRegular},
		{dir, 8, "", []string{dir, "a directory"}, ErrNotRegular},
		{"/dev/null", 8, "", []string{"/dev/null", "character device"}, ErrNotRegular},
		{filepath.Join(dir, "missing"), 8, "", []string{"missing", "no such file"}, os.ErrNotExist},
	} {
		got, err := Read(tt.path, tt.max)
		if tt.wantErr == nil {
			if err != nil || string(got) != tt.want || got == nil {
				t.Errorf("Read(%s) = %q, %v; want %q", tt.path, got, err, tt.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("Read(%s): no error, want %q", tt.path, tt.wantErr)
			continue
		}
		for _, w := range tt.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Read(%s): err = %v, want it to say %q", tt.path, err, w)
			}
		}
		if !errors.Is(err, tt.is) {
			t.Errorf("Read(%s): err = %v, not %v", tt.path, err, tt.is)
		}
	}
}
