package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"flowweight/internal/testutil"
)

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// record keeps each content in turn, one second apart, and fails the test on an error.
func record(t *testing.T, s Store, keep int, contents ...string) {
	t.Helper()
	for i, c := range contents {
		if _, _, err := s.Record([]byte(c), "SIGHUP", "/etc/flowweight/controller.toml", t0.Add(time.Duration(i)*time.Second), keep); err != nil {
			t.Fatalf("Record(%q): %v", c, err)
		}
	}
}

// listed is the numbers and contents of what List returns, "n:content" each.
func listed(t *testing.T, s Store) (string, []Problem) {
	t.Helper()
	es, bad, err := s.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var parts []string
	for _, e := range es {
		parts = append(parts, strings.TrimSpace(string(rune('0'+e.Number%10)))+":"+e.Content)
	}
	return strings.Join(parts, " "), bad
}

// TestRecord: the bound, the order, numbers that never go back, and the same content twice in
// a row making no new version.
func TestRecord(t *testing.T) {
	for _, tt := range []struct {
		name     string
		keep     int
		contents []string
		want     string
	}{
		{"one", 5, []string{"a"}, "1:a"},
		{"in order", 5, []string{"a", "b", "c"}, "1:a 2:b 3:c"},
		{"bounded: the oldest go", 3, []string{"a", "b", "c", "d", "e"}, "3:c 4:d 5:e"},
		{"keep 1 is the running one", 1, []string{"a", "b"}, "2:b"},
		{"keep below the minimum is the minimum", 0, []string{"a", "b"}, "2:b"},
		{"same content again is no new version", 5, []string{"a", "a", "b", "b"}, "1:a 2:b"},
		{"a content seen before but not newest is a new version", 5, []string{"a", "b", "a"}, "1:a 2:b 3:a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := Store{Dir: filepath.Join(t.TempDir(), "controller.state.history")}
			record(t, s, tt.keep, tt.contents...)
			got, bad := listed(t, s)
			if got != tt.want || len(bad) != 0 {
				t.Errorf("versions %q (problems %v), want %q", got, bad, tt.want)
			}
		})
	}
}

// TestRecordFiles: the directory is 0700, each version 0600, written whole, with its time,
// hash and source, and no temporary file is left.
func TestRecordFiles(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "h")}
	e, added, err := s.Record([]byte("x = 1\n"), "start", "/c.toml", t0, 5)
	if err != nil || !added {
		t.Fatalf("Record: %v, added %v", err, added)
	}
	sum := sha256.Sum256([]byte("x = 1\n"))
	if e.Number != 1 || e.SHA256 != hex.EncodeToString(sum[:]) || e.Source != "start" || e.File != "/c.toml" || !e.Time.Equal(t0) {
		t.Errorf("entry %+v", e)
	}
	if e.Short() != e.SHA256[:12] || len(e.SHA256) != 64 {
		t.Errorf("hash %q short %q", e.SHA256, e.Short())
	}
	fi, err := os.Stat(s.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, mode %v, want 0700", err, fi.Mode().Perm())
	}
	des, _ := os.ReadDir(s.Dir)
	if len(des) != 1 || des[0].Name() != "00000001.json" {
		t.Fatalf("directory holds %v, want only 00000001.json", des)
	}
	fi, _ = os.Stat(filepath.Join(s.Dir, "00000001.json"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("version file mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := s.Get(1)
	if err != nil || got != e {
		t.Errorf("Get(1) = %+v, %v; want %+v", got, err, e)
	}
}

// TestCorruptVersion: a damaged, foreign or not private version file is skipped and reported
// with its path; the others are listed, and the next version is numbered above it, never
// over it.
func TestCorruptVersion(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(path string) error
		want   string
	}{
		{"content changed", func(p string) error {
			return rewrite(p, func(s string) string { return strings.Replace(s, `"b"`, `"B"`, 1) })
		}, "does not match the content"},
		{"cut short", func(p string) error { return rewrite(p, func(s string) string { return s[:len(s)/2] }) }, "unexpected EOF"},
		{"unknown field", func(p string) error {
			return rewrite(p, func(s string) string { return strings.Replace(s, "{", `{"extra": 1,`, 1) })
		}, "unknown field"},
		{"number of another version", func(p string) error {
			return rewrite(p, func(s string) string { return strings.Replace(s, `"number": 2`, `"number": 1`, 1) })
		}, "file named for version 2"},
		{"readable by others", func(p string) error { return os.Chmod(p, 0o644) }, "readable by others"},
		{"a directory", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o700)
		}, "directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := Store{Dir: filepath.Join(t.TempDir(), "h")}
			record(t, s, 5, "a", "b", "c")
			path := filepath.Join(s.Dir, "00000002.json")
			if err := tt.damage(path); err != nil {
				t.Fatal(err)
			}
			got, bad := listed(t, s)
			if got != "1:a 3:c" {
				t.Errorf("listed %q, want the two good versions 1:a 3:c", got)
			}
			if len(bad) != 1 || bad[0].Number != 2 || !strings.Contains(bad[0].Error(), path) || !strings.Contains(bad[0].Error(), tt.want) {
				t.Errorf("problems %v, want one for %s saying %q", bad, path, tt.want)
			}
			if _, err := s.Get(2); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Get(2): %v, want %q", err, tt.want)
			}
			record(t, s, 5, "d")
			if got, _ := listed(t, s); got != "1:a 3:c 4:d" {
				t.Errorf("after a new version: %q", got)
			}
		})
	}
}

func rewrite(path string, f func(string) string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(f(string(b))), 0o600)
}

// TestUnwritableHistory: a history directory that cannot be written (or a file where it
// should be) fails Record with an error naming the path, and loses none of the versions
// kept, nor leaves a temporary file.
func TestUnwritableHistory(t *testing.T) {
	t.Run("not writable", func(t *testing.T) {
		s := Store{Dir: filepath.Join(t.TempDir(), "h")}
		record(t, s, 5, "a", "b")
		testutil.Unwritable(t, s.Dir)
		_, _, err := s.Record([]byte("c"), "SIGHUP", "/c.toml", t0, 5)
		if err == nil || !strings.Contains(err.Error(), s.Dir) || !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("Record into a read-only directory: %v, want a permission error naming %s", err, s.Dir)
		}
		if got, bad := listed(t, s); got != "1:a 2:b" || len(bad) != 0 {
			t.Errorf("after the failed write: %q, %v; want 1:a 2:b", got, bad)
		}
		if des, _ := os.ReadDir(s.Dir); len(des) != 2 {
			t.Errorf("directory holds %d files, want the 2 versions", len(des))
		}
	})
	t.Run("a file in its place", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "h")
		if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := Store{Dir: dir}.Record([]byte("a"), "start", "/c.toml", t0, 5)
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("Record: %v, want an error naming %s", err, dir)
		}
		if b, _ := os.ReadFile(dir); string(b) != "not a directory" {
			t.Errorf("the file in the way was changed: %q", b)
		}
	})
}

// TestGetUnknown: an unknown version's error names the directory and lists what is kept.
func TestGetUnknown(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "h")}
	record(t, s, 2, "a", "b", "c")
	_, err := s.Get(1)
	if err == nil || !strings.Contains(err.Error(), "no version 1") || !strings.Contains(err.Error(), "kept: 2, 3") || !strings.Contains(err.Error(), s.Dir) {
		t.Errorf("Get(1): %v", err)
	}
	if _, _, err := (Store{Dir: filepath.Join(t.TempDir(), "none")}).List(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("List of a missing directory: %v, want not-exist", err)
	}
}

// TestParseName: only the one spelling of a version's file name counts.
func TestParseName(t *testing.T) {
	for name, want := range map[string]uint64{
		"00000001.json": 1, "12345678.json": 12345678, "123456789.json": 123456789,
		"000000001.json": 0, "00000000.json": 0, "1.json": 0, "0000000a.json": 0,
		".00000001.json.tmp123": 0, "00000001.json~": 0, "-0000001.json": 0,
	} {
		if got, ok := parseName(name); ok != (want != 0) || (ok && got != want) {
			t.Errorf("parseName(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
}

// TestDecodeRefusesControlCharacters: a version's source and file are printed as they are on
// root's terminal by `history` and `rollback`; one holding an escape sequence or a line break
// is refused, naming the field.
func TestDecodeRefusesControlCharacters(t *testing.T) {
	for _, tt := range []struct{ source, file, want string }{
		{"SIGHUP\x1b[2J", "/etc/c.toml", "source:"},
		{"start\nVERSION 9 forged", "/etc/c.toml", "source:"},
		{"start", "/etc/c\u009b1m.toml", "file:"},
		{"start", "/etc/c\x7f.toml", "file:"},
	} {
		e := NewEntry(1, []byte("[controller]\n"), tt.source, tt.file, time.Unix(1, 0))
		data, err := json.Marshal(&e) // as a hostile writer would, past Encode's checks
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(data); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("source %q, file %q: err = %v, want one about %q", tt.source, tt.file, err, tt.want)
		}
	}
}

// TestRecordReadsOnlyTheNewest: a reload's Record needs only the newest version (is this
// content new?), so its cost does not grow with the versions kept: with 20 versions of 1 MiB
// kept it allocates about 21 MiB (reading, decoding and encoding one version each take a few
// times its size), not 195 MiB as when it read and decoded all 20 at every reload (and a
// waiting rollback did so ten times a second).
func TestRecordReadsOnlyTheNewest(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "h")}
	const size, n = 1 << 20, 20
	body := strings.Repeat("# padding line of a large configuration\n", size/40)
	for i := range n {
		if _, _, err := s.Record([]byte(fmt.Sprintf("%s# %d\n", body, i)), "file changed", "/etc/c.toml", t0, 50); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e, added, err := s.Record([]byte(body+"# new\n"), "file changed", "/etc/c.toml", t0, 50)
	runtime.ReadMemStats(&after)
	if err != nil || !added || e.Number != n+1 {
		t.Fatalf("Record = %d, %v, %v", e.Number, added, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 40*size {
		t.Errorf("Record allocated %d MiB with %d versions of 1 MiB kept; want at most 40 MiB", got>>20, n)
	}
}
