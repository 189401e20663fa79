package sample

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each step changes the file (or what its path names) and then reads it once.
func TestReread(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<10/16) // > rereadMinBuf
	exact := bytes.Repeat([]byte("x"), rereadMinBuf)           // fills the first buffer
	type step struct {
		name   string
		change func(t *testing.T, path string)
		want   string // the content read, when it succeeds
		err    error  // errors.Is target of the error expected
		fails  bool   // any error is expected
	}
	write := func(b []byte) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			// os.WriteFile truncates and rewrites the same inode, as the kernel regenerates
			// its files in place.
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	none := func(*testing.T, string) {}
	tests := []struct {
		name  string
		steps []step
	}{
		{"missing, then created", []step{
			{"missing", none, "", fs.ErrNotExist, false},
			{"created", write([]byte("cpu 1 2 3\n")), "cpu 1 2 3\n", nil, false},
		}},
		{"rewritten in place is read again", []step{
			{"first", write([]byte("some total=1\n")), "some total=1\n", nil, false},
			{"second", write([]byte("some total=22\n")), "some total=22\n", nil, false},
			{"unchanged", none, "some total=22\n", nil, false},
			{"shorter", write([]byte("s\n")), "s\n", nil, false},
			{"empty", write(nil), "", nil, false},
		}},
		{"larger than the buffer", []step{
			{"big", write(big), string(big), nil, false},
			{"small again", write([]byte("a\n")), "a\n", nil, false},
		}},
		{"exactly the buffer", []step{{"exact", write(exact), string(exact), nil, false}}},
		// A descriptor that fails (here a directory: EISDIR) is dropped and the path opened
		// again in the same Read, as a removed cgroup's file (ENODEV) is.
		{"failing descriptor replaced", []step{
			{"directory", func(t *testing.T, p string) {
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}, "", nil, true},
			{"now a file", func(t *testing.T, p string) {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				write([]byte("0-3\n"))(t, p)
			}, "0-3\n", nil, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			r := &Reread{Path: p}
			defer r.Close()
			for _, s := range tt.steps {
				s.change(t, p)
				got, err := r.Read()
				switch {
				case s.fails:
					if err == nil {
						t.Fatalf("%s: read a directory: %q", s.name, got)
					}
				case s.err != nil:
					if !errors.Is(err, s.err) {
						t.Fatalf("%s: err %v, want %v", s.name, err, s.err)
					}
				case err != nil:
					t.Fatalf("%s: %v", s.name, err)
				case string(got) != s.want:
					t.Fatalf("%s: read %d bytes %.40q, want %d bytes %.40q", s.name, len(got), got, len(s.want), s.want)
				}
			}
		})
	}
}

// The kernel regenerates /proc/stat on every read from offset 0 through the one descriptor.
func TestRereadProcStat(t *testing.T) {
	r := &Reread{Path: "/proc/stat"}
	defer r.Close()
	b, err := r.Read()
	if err != nil {
		t.Skipf("no /proc/stat: %v", err)
	}
	fd := r.f.Fd()
	first := string(b) // b is reused by the next Read
	for range 3 {
		b, err = r.Read()
		if err != nil || !strings.HasPrefix(string(b), "cpu ") || !strings.Contains(string(b), "\nbtime ") {
			t.Fatalf("read %.60q, %v", b, err)
		}
		if r.f.Fd() != fd {
			t.Fatalf("descriptor %d, then %d: not kept", fd, r.f.Fd())
		}
	}
	if !strings.HasPrefix(first, "cpu ") {
		t.Errorf("first read %.60q", first)
	}
}

// A path to something endless fails at the bound instead of growing the buffer without end.
func TestRereadBound(t *testing.T) {
	r := &Reread{Path: "/dev/zero"}
	defer r.Close()
	b, err := r.Read()
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Read of /dev/zero = %d bytes, %v; want the size bound", len(b), err)
	}
	if len(r.buf) > rereadMaxBuf {
		t.Errorf("buffer grew to %d bytes, over the bound %d", len(r.buf), rereadMaxBuf)
	}
}
